package attest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/scoring"
)

// TestRescoreVoters: the labs drawn at step 0 vote; others stand in, least draw first, only
// for drawn labs that did not re-score; a contradicting voter widens the draw; the order of
// the re-scores changes nothing.
func TestRescoreVoters(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rep, cands int
		rs         []DrawnRescore
		want       []string
		wantNeed   int
	}{
		{"drawn lab votes, undrawn contradiction is none", 1, 4,
			[]DrawnRescore{{"A", 0.1, false}, {"B", 0.6, true}, {"C", 0.9, true}}, []string{"A"}, 1},
		{"undrawn stands in for a silent drawn lab, least draw first", 1, 4,
			[]DrawnRescore{{"C", 0.9, false}, {"B", 0.6, false}}, []string{"B"}, 1},
		{"a drawn contradiction widens the draw", 1, 4,
			[]DrawnRescore{{"A", 0.1, true}, {"B", 0.3, false}, {"C", 0.9, false}, {"D", 0.95, false}}, []string{"A", "B", "C"}, 3},
		{"replication 0 draws nobody", 0, 4,
			[]DrawnRescore{{"A", 0.01, true}}, nil, 0},
		{"capped by the candidates", 1, 2,
			[]DrawnRescore{{"A", 0.2, true}, {"B", 0.7, true}}, []string{"A", "B"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 8 {
				rs := slices.Clone(tc.rs)
				rand.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
				voters, need := RescoreVoters(tc.rep, tc.cands, rs)
				got := slices.Sorted(maps.Keys(voters))
				if !slices.Equal(got, tc.want) || need != tc.wantNeed {
					t.Fatalf("voters %v need %d, want %v need %d", got, need, tc.want, tc.wantNeed)
				}
			}
		})
	}
}

// drawnRescore signs lab's re-score of the run named run with the lab node's re-scorer draw
// for it, and returns the draw (DrawFraction).
func (w *acceptWorld) drawnRescore(name string, lab int, run string, score float64) float64 {
	w.t.Helper()
	f := w.labs[lab]
	return w.drawnRescoreBy(name, f.node, f.node, f.cert, run, score)
}

// drawnRescoreBy signs a re-score of the run named run by the node of node and cert, with
// drawer's re-scorer draw for it, and returns the draw.
func (w *acceptWorld) drawnRescoreBy(name string, node, drawer crypto.PrivKey, cert *NodeCert, run string, score float64) float64 {
	w.t.Helper()
	rp := w.runPredicateOf(run)
	proof, beta, err := RescoreDraw(drawer, rp)
	if err != nil {
		w.t.Fatal(err)
	}
	nodeID, err := peerIDOf(node)
	if err != nil {
		w.t.Fatal(err)
	}
	p := RescorePredicate{Run: w.ids[run], Valid: true, Score: ptr(score), Metric: "accuracy", Evaluator: "builtin:accuracy",
		Node: nodeID, Lab: cert.Lab, Time: t0.Add(-30 * time.Minute), Draw: proof}
	st, err := NewStatement([]Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": sha(name)}}}, PredicateRescoreV1, p)
	if err != nil {
		w.t.Fatal(err)
	}
	env, _, err := Sign(node, cert, st)
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(name, env)
	return DrawFraction(beta)
}

func (w *acceptWorld) runPredicateOf(run string) *RunPredicate {
	w.t.Helper()
	e, err := DecodeEnvelope(w.envs[run])
	if err != nil {
		w.t.Fatal(err)
	}
	_, rp, _, err := DecodeStatement(e.Payload)
	if err != nil || rp == nil {
		w.t.Fatalf("run %s: %v", run, err)
	}
	return rp
}

// labDraws is each lab's re-scorer draw (DrawFraction) for run.
func (w *acceptWorld) labDraws(run string) []float64 {
	rp := w.runPredicateOf(run)
	out := make([]float64, len(w.labs))
	for i, f := range w.labs {
		_, beta, err := RescoreDraw(f.node, rp)
		if err != nil {
			w.t.Fatal(err)
		}
		out[i] = DrawFraction(beta)
	}
	return out
}

// TestAcceptOnlyDrawnRescorersVote: five labs, replication 1, so each of the four labs other
// than the runner's is drawn with probability 1/4. For a run where one lab is drawn and two
// are not, the two undrawn labs contradict it and the drawn lab confirms: under the drawn
// rule their re-scores are no votes (listed as such) and the run counts, 2 votes to 0; under
// the old rule (every lab that re-scored votes) the same re-scores tie the vote, 2 to 2, and
// hold the run aside.
func TestAcceptOnlyDrawnRescorersVote(t *testing.T) {
	w := newAcceptWorld(t, 5)
	var labs []string
	for _, f := range w.labs {
		labs = append(labs, f.lab.ID)
	}
	draw := &RescorerDraw{Labs: labs, Replication: 1}
	const threshold = 0.25
	run, drawn, undrawn := "", -1, []int(nil)
	for seed := 0; seed < 64 && run == ""; seed++ {
		name := fmt.Sprint("r", seed)
		w.run(name, 0, "bafytask", "bafyagent", seed, name, 0.5, 1)
		d := w.labDraws(name)
		drawn, undrawn = -1, nil
		for i := 1; i < len(d); i++ {
			switch {
			case d[i] < threshold && drawn < 0:
				drawn = i
			case d[i] >= threshold:
				undrawn = append(undrawn, i)
			}
		}
		if drawn > 0 && len(undrawn) >= 2 && slices.IndexFunc(d[1:], func(u float64) bool { return u < threshold }) == drawn-1 &&
			len(slices.DeleteFunc(slices.Clone(d[1:]), func(u float64) bool { return u >= threshold })) == 1 {
			run = name
		}
	}
	if run == "" {
		t.Fatal("no run among 64 with exactly one drawn lab (probability ≈ 0.42 each)")
	}
	w.drawnRescore("confirm", drawn, run, 0.5)
	w.drawnRescore("veto1", undrawn[0], run, 0.0)
	w.drawnRescore("veto2", undrawn[1], run, 0.0)
	o := Reconcile(w.verified(), Agree)
	id := w.ids[run]
	if tl := o.Tally(id); tl.For != 2 || tl.Against != 2 {
		t.Fatalf("old rule: tally %+v, want 2 for and 2 against", tl)
	}
	od := o.WithRescorerDraw(draw)
	if tl := od.Tally(id); tl.For != 2 || tl.Against != 0 {
		t.Fatalf("drawn rule: tally %+v, want 2 for and 0 against", tl)
	}
	var noVotes []string
	for _, nv := range od.NoVotes {
		noVotes = append(noVotes, w.nameOf(nv.Rescore))
	}
	slices.Sort(noVotes)
	if !slices.Equal(noVotes, []string{"veto1", "veto2"}) {
		t.Errorf("no-vote re-scores %v (%+v), want veto1 and veto2", noVotes, od.NoVotes)
	}
	counted := func(p AcceptPolicy) bool {
		results, _ := Accept(o, p)
		return slices.ContainsFunc(results, func(r scoring.Result) bool { return r.AttestationID == id })
	}
	if counted(AcceptPolicy{Replication: 1}) {
		t.Error("old rule: the run counts despite a tied vote")
	}
	if !counted(AcceptPolicy{Replication: 1, RescorerDraw: draw}) {
		t.Error("drawn rule: the run does not count; the undrawn labs' contradictions moved it")
	}
	if mis := ProvenMisconduct(od); len(mis) != 0 {
		t.Errorf("drawn rule: misconduct %+v from re-scores that are no votes", mis)
	}
}

// TestRescoreDrawIsTheRunnersToNeither: a run re-signed with a field varied (another
// attestation ID) has the same draws, and a draw made for another run, another attempt or by
// another node is no vote.
func TestRescoreDrawIsTheRunnersToNeither(t *testing.T) {
	w := newAcceptWorld(t, 3)
	w.run("r", 0, "bafytask", "bafyagent", 0, "s", 0.5, 1)
	w.run("r-resigned", 0, "bafytask", "bafyagent", 0, "s", 0.5, 2)
	if w.ids["r"] == w.ids["r-resigned"] {
		t.Fatal("re-signing did not change the ID")
	}
	if a, b := w.labDraws("r"), w.labDraws("r-resigned"); !slices.Equal(a, b) {
		t.Errorf("draws moved with the attestation ID: %v vs %v", a, b)
	}
	w.run("other", 0, "bafytask", "bafyagent", 1, "o", 0.5, 1)
	// Lab 1's draw for "other", carried in a re-score of "r".
	rp := w.runPredicateOf("other")
	proof, _, err := RescoreDraw(w.labs[1].node, rp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyRescoreDraw(w.labs[1].nodeID, proof, w.runPredicateOf("r")); err == nil {
		t.Error("a draw for another run verified for r")
	}
	if _, err := VerifyRescoreDraw(w.labs[2].nodeID, proof, rp); err == nil {
		t.Error("lab 1's draw verified as lab 2's node's")
	}
	next := *w.runPredicateOf("r")
	next.Attempt = 2
	if _, err := VerifyRescoreDraw(w.labs[1].nodeID, proof, &next); err == nil {
		t.Error("a draw verified for another attempt")
	}
}

package attest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/scoring"
)

// auditRun signs lab's audit of the run named run (its own slot, attempt and lab), with
// the re-execution's submission and score.
func (w *acceptWorld) auditRun(name string, lab int, run, submission string, score float64) {
	w.t.Helper()
	rp := w.runPredicateOf(run)
	f := w.labs[lab]
	a := AuditPredicate{Run: w.ids[run], Slot: rp.Slot, Attempt: 1, RunLab: rp.Lab,
		Result: AuditResult{Submission: sha(submission), Valid: true, Score: ptr(score), GPUModel: h200}, Verdict: VerdictMatch}
	env, _, err := NewAudit(f.node, nil, f.cert, a, t0.Add(-time.Minute))
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(name, env)
}

// moversWorld: labs 1 and 2 run a weak agent (≈0.3) and a strong one (≈0.6) on one task,
// six seeds each; lab 0, dishonest, signs six runs of the weak agent at 1.0, made from the
// labels: counted, they would lift the weak agent above the strong one.
func moversWorld(t *testing.T) (*acceptWorld, AcceptPolicy, []scoring.TaskInfo) {
	w := newAcceptWorld(t, 3)
	seed := 0
	for lab := 1; lab <= 2; lab++ {
		for k := 0; k < 6; k++ {
			w.run(fmt.Sprintf("weak-%d-%d", lab, k), lab, "bafytask", "bafyweak", seed, fmt.Sprintf("w%d", seed), 0.30+0.01*float64(k%3), 1)
			w.run(fmt.Sprintf("strong-%d-%d", lab, k), lab, "bafytask", "bafystrong", seed, fmt.Sprintf("s%d", seed), 0.60+0.01*float64(k%3), 1)
			seed++
		}
	}
	for k := 0; k < 6; k++ {
		w.run(fmt.Sprintf("fab-%d", k), 0, "bafytask", "bafyweak", seed, fmt.Sprintf("f%d", seed), 1, 1)
		seed++
	}
	win := CampaignWindow{Created: t0.Add(-24 * time.Hour), Deadline: t0.Add(24 * time.Hour), Agents: []string{"bafystrong", "bafyweak"},
		Deterministic: []string{"bafystrong", "bafyweak"}}
	pol := AcceptPolicy{SetAsideOffenders: true, Audits: &AuditRules{HoldMovers: true}, Campaigns: map[string]CampaignWindow{"bafycampaign": win}}
	return w, pol, []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.95}}
}

func moversLedger(t *testing.T, w *acceptWorld, pol AcceptPolicy, tasks []scoring.TaskInfo) (*scoring.Ledger, *LedgerReport, map[string]ExcludeReason) {
	t.Helper()
	l, rep, err := LedgerFromVerified(w.verified(), LedgerInput{Tasks: tasks, Policy: pol, Scoring: scoring.Options{BootstrapRounds: 20}})
	if err != nil {
		t.Fatal(err)
	}
	ex := map[string]ExcludeReason{}
	for _, e := range rep.Excluded {
		ex[w.nameOf(e.ID)] = e.Reason
	}
	return l, rep, ex
}

// A dishonest lab's results that would move an agent's rank are held until audited: every
// node holds the same ones (any input order, same root), the honest labs' results count,
// the held group is in the report for the coordinator, and audits decide: two labs'
// mismatches disprove them and set the lab aside; matching re-executions (an honest lab
// whose agent really is that good) let them count. Without ledger.audits they count at once.
func TestLedgerHoldsRankMoversUntilAudited(t *testing.T) {
	w, pol, tasks := moversWorld(t)
	l, rep, ex := moversLedger(t, w, pol, tasks)
	fab := w.labs[0].lab.ID
	// The movers are the largest lifts taken until the rest no longer moves the rank
	// (scoring.RankMovers): here five of six; the sixth alone moves nothing and is drawn at
	// the group's weight.
	heldN := 0
	for k := 0; k < 6; k++ {
		if r := ex[fmt.Sprintf("fab-%d", k)]; r == ExcludeMoverHeld {
			heldN++
		} else if r != "" {
			t.Errorf("fab-%d: %q", k, r)
		}
	}
	if heldN < 5 {
		t.Errorf("%d of lab 0's six lifted results held, want the five that carry the move", heldN)
	}
	for name, r := range ex {
		if name[:3] != "fab" {
			t.Errorf("honest run %s excluded: %s", name, r)
		}
	}
	if len(rep.Held) != 1 || rep.Held[0].Lab != fab || rep.Held[0].AgentSpec != "bafyweak" || !rep.Held[0].MovesRank || len(rep.Held[0].Runs) != heldN {
		t.Fatalf("held groups %+v, want lab 0's weak results", rep.Held)
	}
	// Same set in another order: the same held runs and the same root.
	vs := w.verified()
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
	l2, rep2, err := LedgerFromVerified(vs, LedgerInput{Tasks: tasks, Policy: pol, Scoring: scoring.Options{BootstrapRounds: 20}})
	if err != nil || l2.Root() != l.Root() || !slices.Equal(rep2.Held[0].Runs, rep.Held[0].Runs) {
		t.Fatalf("another order: root %s vs %s, held %+v vs %+v (%v)", l2.Root(), l.Root(), rep2.Held, rep.Held, err)
	}

	// Without the rule the lift counts at once: what the hold prevents.
	off := pol
	off.Audits = nil
	if _, rep, ex := moversLedger(t, w, off, tasks); ex["fab-0"] != "" || len(rep.Held) != 0 {
		t.Fatalf("audits off: fab-0 %q, held %+v; want counted", ex["fab-0"], rep.Held)
	}

	// Honest labs re-run each: another submission, found by two labs, is proof.
	for k := 0; k < 6; k++ {
		w.auditRun(fmt.Sprintf("a1-%d", k), 1, fmt.Sprintf("fab-%d", k), "agent-output", 0.3)
		w.auditRun(fmt.Sprintf("a2-%d", k), 2, fmt.Sprintf("fab-%d", k), "agent-output", 0.3)
	}
	_, rep, ex = moversLedger(t, w, pol, tasks)
	if r := ex["fab-0"]; r != ExcludeDisproven && r != ExcludeOffender {
		t.Fatalf("after mismatching audits: fab-0 %q, want disproven", r)
	}
	if len(rep.Held) != 0 || !slices.ContainsFunc(rep.Misconduct, func(m Misconduct) bool { return m.Principal == fab && m.Kind == MisconductFabricated }) {
		t.Fatalf("after audits: held %+v misconduct %+v", rep.Held, rep.Misconduct)
	}

	// The same lift, reproduced by both auditors' re-executions: cleared, it counts.
	w2, pol2, tasks2 := moversWorld(t)
	for k := 0; k < 6; k++ {
		w2.auditRun(fmt.Sprintf("m1-%d", k), 1, fmt.Sprintf("fab-%d", k), fmt.Sprintf("f%d", 12+k), 1)
	}
	if _, rep, ex := moversLedger(t, w2, pol2, tasks2); ex["fab-0"] != "" || len(rep.Held) != 0 {
		t.Fatalf("cleared movers: fab-0 %q held %+v; want counted", ex["fab-0"], rep.Held)
	}
}

// A stochastic agent's held mover clears by the pair test on its re-runs' scores: re-runs
// near the run's score clear it; re-runs at the other labs' level do not.
func TestLedgerStochasticMoverClearsByPairTest(t *testing.T) {
	w, pol, tasks := moversWorld(t)
	win := pol.Campaigns["bafycampaign"]
	win.Deterministic = nil
	pol.Campaigns = map[string]CampaignWindow{"bafycampaign": win}
	for k := 0; k < 6; k++ {
		w.auditRun(fmt.Sprintf("low-%d", k), 1, fmt.Sprintf("fab-%d", k), "x", 0.3)
	}
	if _, _, ex := moversLedger(t, w, pol, tasks); ex["fab-0"] != ExcludeMoverHeld {
		t.Fatalf("re-runs far below: fab-0 %q, want still held", ex["fab-0"])
	}
	w2, _, _ := moversWorld(t)
	for k := 0; k < 6; k++ {
		w2.auditRun(fmt.Sprintf("near-%d", k), 1, fmt.Sprintf("fab-%d", k), "x", 0.99)
	}
	if _, rep, ex := moversLedger(t, w2, pol, tasks); ex["fab-0"] != "" || len(rep.Held) != 0 {
		t.Fatalf("re-runs near: fab-0 %q held %+v, want counted", ex["fab-0"], rep.Held)
	}
}

// A lab that lifts both agents: its lift of the strong agent widens that agent's interval,
// which alone would hide its lift of the weak one (the two would look tied); the margins
// are taken against the intervals without the results already held, so both are held.
func TestLedgerHoldsALiftHiddenBehindAnother(t *testing.T) {
	w, pol, tasks := moversWorld(t)
	for k := 0; k < 6; k++ {
		w.run(fmt.Sprintf("fab-strong-%d", k), 0, "bafytask", "bafystrong", 100+k, fmt.Sprintf("fs%d", k), 1, 1)
	}
	_, rep, ex := moversLedger(t, w, pol, tasks)
	weakHeld := 0
	for k := 0; k < 6; k++ {
		if ex[fmt.Sprintf("fab-%d", k)] == ExcludeMoverHeld {
			weakHeld++
		}
	}
	if weakHeld < 5 {
		t.Fatalf("%d of lab 0's lifted weak results held (want the five that carry the move); held %+v", weakHeld, rep.Held)
	}
}

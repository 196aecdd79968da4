package attest

import (
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/scoring"
)

// drawKeysOf gives each lab of w (but the runner, lab 0) a draw key: the keys and the
// DrawKeys a network document naming them makes.
func drawKeysOf(t *testing.T, w *acceptWorld) ([]crypto.PrivKey, DrawKeys) {
	t.Helper()
	keys := make([]crypto.PrivKey, len(w.labs))
	named := DrawKeys{}
	for i := 1; i < len(w.labs); i++ {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := k.GetPublic().Raw()
		keys[i], named[w.labs[i].lab.ID] = k, ed25519.PublicKey(raw)
	}
	return keys, named
}

// secondNode is another node lab f certifies: its key and certificate.
func (f *fixture) secondNode(t *testing.T) (crypto.PrivKey, *NodeCert) {
	t.Helper()
	key, id := newNode(t)
	cert, err := f.lab.Certify(id, t0.Add(-24*time.Hour), 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

// drawOf is drawer's re-scorer draw (DrawFraction) for the run named run.
func (w *acceptWorld) drawOf(drawer crypto.PrivKey, run string) float64 {
	w.t.Helper()
	_, beta, err := RescoreDraw(drawer, w.runPredicateOf(run))
	if err != nil {
		w.t.Fatal(err)
	}
	return DrawFraction(beta)
}

// TestDrawKeyOnlyTheLabsDrawVotes: four labs, replication 1, so each of the three labs other
// than the runner's is drawn when its draw is under 1/3. Labs 2 and 3 collude against an
// honest run of lab 0 that their draw keys do not draw them for: each certifies second nodes
// until one's node-key draw is under 1/3 and vetoes from it. Lab 1, drawn by its draw key,
// confirms from a second node with that draw, and from its first with the node's. Without draw keys (the rule
// before them) the ground node-key draws vote and tie the run, 2 to 2, holding it aside; with
// the document naming the labs' draw keys they are no votes, listed as such, and the run
// counts, 2 to 0. A draw by the lab's key counts from whichever of its nodes carries it.
func TestDrawKeyOnlyTheLabsDrawVotes(t *testing.T) {
	w := newAcceptWorld(t, 4)
	drawKeys, named := drawKeysOf(t, w)
	var labs []string
	for _, f := range w.labs {
		labs = append(labs, f.lab.ID)
	}
	const threshold = 1.0 / 3
	run := ""
	for seed := 0; seed < 64 && run == ""; seed++ {
		name := fmt.Sprint("r", seed)
		w.run(name, 0, "bafytask", "bafyagent", seed, name, 0.5, 1)
		if w.drawOf(drawKeys[1], name) < threshold && w.drawOf(drawKeys[2], name) >= threshold && w.drawOf(drawKeys[3], name) >= threshold {
			run = name
		}
	}
	if run == "" {
		t.Fatal("no run among 64 that draws lab 1 by its draw key and neither lab 2 nor 3 (probability 4/27 each)")
	}
	// Lab 1 confirms from a second node with its lab's draw, and from its first node with
	// that node's draw (what it did before draw keys).
	n1, c1 := w.labs[1].secondNode(t)
	w.drawnRescoreBy("confirm", n1, drawKeys[1], c1, run, 0.5)
	w.drawnRescore("confirm-node", 1, run, 0.5)
	tries := 0
	for _, lab := range []int{2, 3} {
		for {
			tries++
			key, cert := w.labs[lab].secondNode(t)
			if w.drawOf(key, run) < threshold {
				w.drawnRescoreBy(fmt.Sprint("veto", lab), key, key, cert, run, 0)
				break
			}
		}
	}
	o := Reconcile(w.verified(), Agree)
	id := w.ids[run]
	counted := func(p AcceptPolicy) bool {
		results, _ := Accept(o, p)
		return slices.ContainsFunc(results, func(r scoring.Result) bool { return r.AttestationID == id })
	}
	nodeKeys := &RescorerDraw{Labs: labs, Replication: 1}
	if tl := o.WithRescorerDraw(nodeKeys).Tally(id); tl.For != 2 || tl.Against != 2 {
		t.Fatalf("node-key draws: tally %+v, want 2 for and 2 against (the ground vetoes vote)", tl)
	}
	if counted(AcceptPolicy{Replication: 1, RescorerDraw: nodeKeys}) {
		t.Fatal("node-key draws: the run counts; the ground vetoes should have tied it")
	}
	labKeys := &RescorerDraw{Labs: labs, Replication: 1, Keys: named}
	od := o.WithRescorerDraw(labKeys)
	if tl := od.Tally(id); tl.For != 2 || tl.Against != 0 {
		t.Fatalf("draw keys: tally %+v, want 2 for and 0 against", tl)
	}
	if !counted(AcceptPolicy{Replication: 1, RescorerDraw: labKeys}) {
		t.Error("draw keys: the run does not count; node-key draws of labs with a draw key moved it")
	}
	var noVotes []string
	for _, nv := range od.NoVotes {
		noVotes = append(noVotes, w.nameOf(nv.Rescore))
		if !strings.Contains(nv.Why, "draw key") {
			t.Errorf("no vote %+v: want it to say the draw is not under the lab's draw key", nv)
		}
	}
	slices.Sort(noVotes)
	if !slices.Equal(noVotes, []string{"confirm-node", "veto2", "veto3"}) {
		t.Errorf("no-vote re-scores %v, want confirm-node, veto2 and veto3", noVotes)
	}
	if mis := ProvenMisconduct(od); len(mis) != 0 {
		t.Errorf("draw keys: misconduct %+v from re-scores that are no votes", mis)
	}
	t.Logf("labs 2 and 3 certified %d nodes to find two with node-key draws under 1/3", tries)
}

// TestDrawKeyAudits: where the document names the auditing labs' draw keys, audits drawn
// with a node's own key do not vote (two such mismatches would prove a fabrication under the
// rule before draw keys), and the same labs' audits drawn with their draw keys, from any of
// their nodes, do. An audit carrying a draw key the document does not name is no vote
// either: a lab could mint such keys at will.
func TestDrawKeyAudits(t *testing.T) {
	w := newAcceptWorld(t, 4)
	drawKeys, named := drawKeysOf(t, w)
	w.run("fab", 0, "bafytask", "bafyagent", 0, "from-labels", 1, 1)
	for _, lab := range []int{1, 2} {
		key, cert := w.labs[lab].secondNode(t)
		w.auditBy(fmt.Sprint("node", lab), key, nil, cert, "fab", "agent-output", h200)
	}
	o := Reconcile(w.verified(), Agree)
	old := auditPolicy(true)
	if mis := AuditMisconduct(o, old); len(mis) != 1 {
		t.Fatalf("node-key draws, no draw keys named: misconduct %+v, want fab proven", mis)
	}
	p := auditPolicy(true)
	p.Audits.DrawKeys = named
	if mis := AuditMisconduct(o, p); len(mis) != 0 {
		t.Fatalf("draw keys named: misconduct %+v from node-key draws", mis)
	}
	recs := AuditRecords(o, p)
	if len(recs) != 2 {
		t.Fatalf("records %+v: want both node-key audits recorded", recs)
	}
	for _, r := range recs {
		if r.Verdict != VerdictInconclusive || !strings.Contains(r.Reason, "draw key") || r.Outcome != "open" {
			t.Errorf("record %+v: want an inconclusive no vote naming the draw key, the run open", r)
		}
	}
	// The same labs with their draw keys, from their first nodes: proof.
	for _, lab := range []int{1, 2} {
		f := w.labs[lab]
		w.auditBy(fmt.Sprint("drawn", lab), f.node, drawKeys[lab], f.cert, "fab", "agent-output", h200)
	}
	o = Reconcile(w.verified(), Agree)
	if mis := AuditMisconduct(o, p); len(mis) != 1 || mis[0].Principal != w.labs[0].lab.ID {
		t.Fatalf("draw-key audits: misconduct %+v, want fab's lab proven", mis)
	}
	// A draw key the document does not name (lab 3 has none in it) draws nothing.
	delete(named, w.labs[3].lab.ID)
	f := w.labs[3]
	w.auditBy("minted", f.node, drawKeys[3], f.cert, "fab", "agent-output", h200)
	o = Reconcile(w.verified(), Agree)
	for _, r := range AuditRecords(o, p) {
		if w.nameOf(r.ID) == "minted" && (r.Verdict != VerdictInconclusive || !strings.Contains(r.Reason, "names no draw key")) {
			t.Errorf("audit under an unnamed draw key: %+v, want no vote", r)
		}
	}
}

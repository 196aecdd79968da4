package attest

import (
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/scoring"
)

// A lab that retires from the network keeps the runs its nodes signed before retiring; what
// it signs claiming a later time does not count, nor its live messages once retired; only a
// revocation voids what it signed before.
func TestRetiredLabKeepsEarlierRuns(t *testing.T) {
	f := newFixture(t)
	retired := t0.Add(time.Hour)
	before := f.signRunUnder(t, t0, t0.Add(48*time.Hour), t0.Add(30*time.Minute), 0)
	straddles := f.signRunSpan(t, t0, t0.Add(48*time.Hour), t0.Add(50*time.Minute), t0.Add(70*time.Minute), 1)
	after := f.signRunUnder(t, t0, t0.Add(48*time.Hour), t0.Add(2*time.Hour), 2)
	id, _ := f.trust.LabByName(f.labName)
	f.trust.RetireLab(id, retired)

	tasks := []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.95}}
	ledger := func() *LedgerReport {
		t.Helper()
		_, rep, err := BuildLedger(LedgerInput{Trust: f.trust, Tasks: tasks, Scoring: scoring.Options{BootstrapRounds: 5},
			Envelopes: []EnvelopeFile{{Name: "before.json", Data: before}, {Name: "straddles.json", Data: straddles}, {Name: "after.json", Data: after}}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := ledger()
	if rep.Counted != 1 || len(rep.Refused) != 2 {
		t.Fatalf("report %+v: want the run before the retirement counted, the two others refused", rep)
	}
	for _, r := range rep.Refused {
		if r.Reason != string(ReasonLabRetired) || r.File == "before.json" {
			t.Fatalf("refused %+v, want %q for the runs claiming a time at or after the retirement", r, ReasonLabRetired)
		}
	}
	// Live (at now): the lab's nodes are believed until it retires, then not at all.
	if _, err := Verify(before, f.trust, retired.Add(-time.Second)); err != nil {
		t.Fatalf("live before the retirement: %v", err)
	}
	if _, err := Verify(before, f.trust, retired); ReasonOf(err) != ReasonLabRetired {
		t.Fatalf("live at the retirement: %v, want %q", err, ReasonLabRetired)
	}
	if _, err := f.trust.CheckNodeCert(f.cert.Raw(), retired.Add(time.Minute)); ReasonOf(err) != ReasonLabRetired {
		t.Fatalf("node certificate live after the retirement: %v, want %q", err, ReasonLabRetired)
	}
	// A revocation voids what was signed before the retirement too.
	rev, err := f.lab.Revoke([]string{f.nodeID}, nil, t0.Add(3*time.Hour), "key leaked after retiring")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.trust.AddRevocation(rev); err != nil {
		t.Fatal(err)
	}
	if rep := ledger(); rep.Counted != 0 || len(rep.Refused) != 3 {
		t.Fatalf("after the revocation: %+v, want nothing counted", rep)
	}
}

// A retired lab is granted no new bundle keys: LabRecipients leaves it out.
func TestRetiredLabGetsNoNewGrants(t *testing.T) {
	f := newFixture(t)
	id, _ := f.trust.LabByName(f.labName)
	const recip = "age1z4vzkn9d4wr34cx8nxt6fqxfaa9qvptt9n4chvevrrdky6z7dcqsf633ap"
	if err := f.trust.SetAgeRecipient(id, recip); err != nil {
		t.Fatal(err)
	}
	if got := f.trust.LabRecipients(); got[id] != recip {
		t.Fatalf("active lab's recipient: %v", got)
	}
	f.trust.RetireLab(id, t0)
	if got := f.trust.LabRecipients(); len(got) != 0 {
		t.Fatalf("retired lab still granted: %v", got)
	}
}

package attest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func within(tol float64) AgreeFunc {
	return func(_ string, a, b float64) bool { return math.Abs(a-b) <= tol }
}

func mustVerify(t *testing.T, f *fixture, envs ...[]byte) []*Verified {
	t.Helper()
	var vs []*Verified
	for _, e := range envs {
		v, err := Verify(e, f.trust, t0)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func ids(vs []*Verified) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.ID)
	}
	return out
}

func TestEquivocation(t *testing.T) {
	f := newFixture(t)
	// Same slot (seed 0), same lab, different submissions: equivocation.
	a, aID := f.signRun(t, 0, "first answer", 0.9)
	b, bID := f.signRun(t, 0, "second answer", 0.95)
	// Another node of the same lab is the same principal.
	node2, node2ID := newNode(t)
	cert2, _ := f.lab.Certify(node2ID, t0.Add(-time.Hour), 24*time.Hour)
	f2 := *f
	f2.node, f2.nodeID, f2.cert = node2, node2ID, cert2
	c, cID := f2.signRun(t, 0, "third answer", 0.5)
	// An honest run in another slot, with re-scores.
	d, dID := f.signRun(t, 1, "honest", 0.8)
	agree := f.signRescore(t, dID, true, 0.8000001)
	disagree := f.signRescore(t, dID, true, 0.6)
	invalid := f.signRescore(t, dID, false, 0)
	ofEquivocal := f.signRescore(t, aID, true, 0.9)

	vs := mustVerify(t, f, a, b, d, agree, disagree, invalid, ofEquivocal)
	vs = append(vs, mustVerify(t, &f2, c)...)
	out := Reconcile(vs, within(1e-3))

	if got := ids(out.Runs); !slices.Equal(got, []string{dID}) {
		t.Fatalf("counted runs %v, want only %s", got, dID)
	}
	if len(out.Equivocations) != 2 {
		t.Fatalf("%d evidence objects, want 2: %+v", len(out.Equivocations), out.Equivocations)
	}
	named := map[string]bool{}
	for _, e := range out.Equivocations {
		if e.Principal != f.lab.ID || e.Slot.Seed != 0 || e.A >= e.B || e.SubmissionA == e.SubmissionB {
			t.Errorf("evidence %+v", e)
		}
		// The evidence carries both envelopes, and they re-verify on their own.
		for _, env := range [][]byte{e.EnvelopeA, e.EnvelopeB} {
			v, err := Verify(env, f.trust, t0)
			if err != nil {
				t.Fatalf("evidence envelope does not verify: %v", err)
			}
			named[v.ID] = true
		}
	}
	for _, id := range []string{aID, bID, cID} {
		if !named[id] {
			t.Errorf("equivocating run %s not in evidence", id)
		}
	}
	if got := len(out.Rescores[dID]); got != 1 {
		t.Errorf("%d agreeing re-scores, want 1", got)
	}
	if len(out.Disagreements) != 2 {
		t.Fatalf("disagreements %+v, want 2", out.Disagreements)
	}
	for _, dg := range out.Disagreements {
		if dg.Run != dID || dg.By != f.lab.ID {
			t.Errorf("disagreement %+v", dg)
		}
	}
	if len(out.Orphans) != 1 || out.Orphans[0].Rescore.Run != aID {
		t.Errorf("orphans %v: a re-score of an excluded run is an orphan", ids(out.Orphans))
	}
}

func TestDuplicatesAreNotEquivocation(t *testing.T) {
	f := newFixture(t)
	a, _ := f.signRun(t, 0, "same", 0.9)
	// The same signed statement re-encoded (DSSE allows either base64 alphabet): other
	// bytes, another ID, the same submission.
	b := mutate(t, a, func(m map[string]any) {
		p, _ := DecodeBase64(m["payload"].(string))
		m["payload"] = base64.RawURLEncoding.EncodeToString(p)
	})
	vs := mustVerify(t, f, a, b)
	out := Reconcile(vs, within(0))
	if len(out.Equivocations) != 0 || len(out.Runs) != 1 || len(out.Duplicates) != 1 {
		t.Fatalf("runs %d duplicates %d equivocations %d", len(out.Runs), len(out.Duplicates), len(out.Equivocations))
	}
	// A re-score naming the duplicate counts for the run kept.
	rs := mustVerify(t, f, f.signRescore(t, out.Duplicates[0].ID, true, 0.9))
	out = Reconcile(append(vs, rs...), within(0))
	if len(out.Rescores[out.Runs[0].ID]) != 1 {
		t.Fatalf("re-score of a duplicate not credited: %+v", out)
	}
}

func TestDifferentLabsSameSlotIsReplication(t *testing.T) {
	f, g := newFixture(t), newFixture(t)
	g.trust = f.trust
	g.trust.AddLab("other", g.lab.Pub)
	a, _ := f.signRun(t, 0, "x", 0.9)
	b, _ := g.signRun(t, 0, "y", 0.1)
	out := Reconcile(mustVerify(t, f, a, b), within(0))
	if len(out.Runs) != 2 || len(out.Equivocations) != 0 {
		t.Fatalf("two labs running one slot: runs %d equivocations %d", len(out.Runs), len(out.Equivocations))
	}
}

// Reconcile is a function of the set: order and repetition of its input do not matter.
func TestReconcileIsOrderIndependent(t *testing.T) {
	f := newFixture(t)
	var envs [][]byte
	for i := 0; i < 6; i++ {
		e, id := f.signRun(t, i%3, string(rune('a'+i)), float64(i)/10)
		envs = append(envs, e, f.signRescore(t, id, true, float64(i)/10))
	}
	vs := mustVerify(t, f, envs...)
	want := Reconcile(vs, within(1e-9))
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		shuffled := slices.Clone(vs)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		shuffled = append(shuffled, shuffled[:3]...)
		got := Reconcile(shuffled, within(1e-9))
		if !slices.Equal(ids(got.Runs), ids(want.Runs)) || len(got.Equivocations) != len(want.Equivocations) ||
			len(got.Orphans) != len(want.Orphans) || len(got.Disagreements) != len(want.Disagreements) {
			t.Fatalf("order changed the outcome")
		}
		for i := range got.Equivocations {
			if got.Equivocations[i].A != want.Equivocations[i].A || got.Equivocations[i].B != want.Equivocations[i].B {
				t.Fatal("evidence order changed")
			}
		}
	}
}

// Evidence is a proof anyone can re-check after it travels as JSON: the envelopes come back
// byte for byte, so their IDs are still A and B, even for an envelope that is not compact
// JSON (pretty-printed by another DSSE tool, or saved with a trailing newline).
func TestEvidenceSurvivesJSONByteExact(t *testing.T) {
	f := newFixture(t)
	a, _ := f.signRun(t, 0, "first answer", 0.9)
	b, _ := f.signRun(t, 0, "second answer", 0.95)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteString("\n")
	out := Reconcile(mustVerify(t, f, a, pretty.Bytes()), within(0))
	if len(out.Equivocations) != 1 {
		t.Fatalf("%d evidence objects, want 1", len(out.Equivocations))
	}
	j, err := json.Marshal(out.Equivocations[0])
	if err != nil {
		t.Fatal(err)
	}
	var back Evidence
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id  string
		env []byte
	}{{back.A, back.EnvelopeA}, {back.B, back.EnvelopeB}} {
		if got := EnvelopeID(c.env); got != c.id {
			t.Errorf("evidence envelope's ID after a JSON round trip is %s, want %s", got, c.id)
		}
		if v, err := Verify(c.env, f.trust, t0); err != nil || v.ID != c.id {
			t.Errorf("evidence envelope %s does not re-verify: %v", c.id, err)
		}
	}
}

// Only other labs that confirmed a run, and never also contradicted it, replicate it.
func TestReplicatorsAreOtherLabsThatOnlyConfirmed(t *testing.T) {
	f := newFixture(t)
	b, c := newFixture(t), newFixture(t)
	for _, x := range []*fixture{b, c} {
		x.trust = f.trust
		f.trust.AddLab("lab", x.lab.Pub)
	}
	run, id := f.signRun(t, 0, "answer", 0.8)
	envs := [][]byte{run,
		f.signRescore(t, id, true, 0.8), // the run's own lab: not a replication
		b.signRescore(t, id, true, 0.8), // another lab, twice: counts once
		b.signRescore(t, id, true, 0.80001),
		c.signRescore(t, id, true, 0.8), // a third lab that also contradicts: hedging
		c.signRescore(t, id, true, 0.2),
	}
	var vs []*Verified
	for _, e := range envs {
		v, err := Verify(e, f.trust, t0)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	out := Reconcile(vs, within(1e-3))
	if got := len(out.Rescores[id]); got != 4 {
		t.Fatalf("%d agreeing re-scores recorded, want 4", got)
	}
	if got := out.Replicators(id); !slices.Equal(got, []string{b.lab.ID}) {
		t.Fatalf("replicators %v, want only %s", got, b.lab.ID)
	}
	if got := out.Replicators("bafkreinotarun"); got != nil {
		t.Fatalf("replicators of an unknown run: %v", got)
	}
}

package attest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func auditFixture(t testing.TB) (*fixture, AuditPredicate) {
	f := newFixture(t)
	return f, AuditPredicate{
		Run:     EnvelopeID([]byte("the audited run")),
		Slot:    Slot{Campaign: "bafycampaign", Task: "bafytask", Agent: "bafyagent", Seed: 3},
		Attempt: 1,
		RunLab:  "lab:runner",
		Result:  AuditResult{Submission: sha("sub"), Valid: true, Score: ptr(0.5), GPUModel: "NVIDIA H100"},
		Verdict: VerdictMatch,
	}
}

// An audit verifies as the node and lab that signed it, with the VRF output of its node's
// key on the run's draw input.
func TestAuditVerifiesAsItsSigner(t *testing.T) {
	f, a := auditFixture(t)
	env, id, err := NewAudit(f.node, nil, f.cert, a, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := VerifyWith(env, f.trust, VerifyOptions{AtClaimedTime: true})
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != id || v.Audit == nil || v.Audit.Run != a.Run || v.Audit.Lab != f.lab.ID || v.Counts {
		t.Fatalf("verified %+v audit %+v", v, v.Audit)
	}
	_, beta, err := AuditDraw(f.node, a.Slot, a.Attempt, a.RunLab)
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyAuditDraw(v.Audit.Node, v.Audit.VRFProof, a.Slot, a.Attempt, a.RunLab)
	if err != nil || string(got) != string(beta) {
		t.Fatalf("draw output %x, %v; want %x", got, err, beta)
	}
}

// The draw is bound to the run: a proof made for one slot, attempt or runner lab is refused
// for another, and a proof by another node's key is refused for this one (the auditor
// cannot borrow a luckier draw).
func TestAuditRefusesABorrowedDraw(t *testing.T) {
	f, a := auditFixture(t)
	other, _ := newNode(t)
	borrow := func(mutate func(p *AuditPredicate)) error {
		p := a
		p.Node, p.Lab, p.Time = f.nodeID, f.lab.ID, t0
		proof, _, err := AuditDraw(f.node, p.Slot, p.Attempt, p.RunLab)
		if err != nil {
			t.Fatal(err)
		}
		p.VRFProof = string(hexOf(proof))
		mutate(&p)
		return p.validate()
	}
	if err := borrow(func(*AuditPredicate) {}); err != nil {
		t.Fatalf("the honest draw is refused: %v", err)
	}
	cases := map[string]func(p *AuditPredicate){
		"another seed":    func(p *AuditPredicate) { p.Slot.Seed++ },
		"another attempt": func(p *AuditPredicate) { p.Attempt++ },
		"another lab":     func(p *AuditPredicate) { p.RunLab = "lab:someoneelse" },
		"another node's proof": func(p *AuditPredicate) {
			proof, _, _ := AuditDraw(other, p.Slot, p.Attempt, p.RunLab)
			p.VRFProof = string(hexOf(proof))
		},
	}
	for name, mutate := range cases {
		if err := borrow(mutate); err == nil || !strings.Contains(err.Error(), "vrf_proof") {
			t.Errorf("%s: %v, want the vrf_proof refused", name, err)
		}
	}
}

// The decoder's refusals, each naming its field.
func TestAuditPredicateRefusals(t *testing.T) {
	f, a := auditFixture(t)
	cases := []struct {
		name   string
		mutate func(p *AuditPredicate)
		want   string
	}{
		{"own lab", func(p *AuditPredicate) { p.RunLab = f.lab.ID }, "audits its own run"},
		{"attempt 0", func(p *AuditPredicate) { p.Attempt = 0 }, "attempts count from 1"},
		{"unknown verdict", func(p *AuditPredicate) { p.Verdict = "guilty" }, "verdict"},
		{"mismatch without reason", func(p *AuditPredicate) { p.Verdict = VerdictMismatch }, "needs a reason"},
		{"mismatch without digest", func(p *AuditPredicate) {
			p.Verdict, p.Reason, p.Result.Submission = VerdictMismatch, "differs", ""
		}, "auditor's submission digest"},
		{"valid without score", func(p *AuditPredicate) { p.Result.Score = nil }, "needs a score"},
		{"bad digest", func(p *AuditPredicate) { p.Result.Submission = "ABC" }, "submission"},
		{"run not an ID", func(p *AuditPredicate) { p.Run = "run-1" }, "not an attestation ID"},
	}
	for _, c := range cases {
		p := a
		c.mutate(&p)
		if _, _, err := NewAudit(f.node, nil, f.cert, p, t0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// An audit naming another node than its signer is refused, as for runs and witnesses.
func TestAuditNamingAnotherNodeIsRefused(t *testing.T) {
	f, a := auditFixture(t)
	other, otherID := newNode(t)
	a.Node, a.Lab, a.Time = otherID, f.lab.ID, t0
	proof, _, _ := AuditDraw(other, a.Slot, a.Attempt, a.RunLab)
	a.VRFProof = string(hexOf(proof))
	d, _ := digestOfID(a.Run)
	st, err := NewStatement([]Subject{{Name: "run", Digest: map[string]string{"sha256": hexOf(d[:])}}}, PredicateAuditV1, a)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWith(env, f.trust, VerifyOptions{AtClaimedTime: true}); ReasonOf(err) != ReasonPredicateSigner {
		t.Fatalf("an audit naming another node: %v, want %s", err, ReasonPredicateSigner)
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// FuzzDecodeAudit: the decoder never panics, and what it accepts validates (its VRF proof
// included) and survives a round trip.
func FuzzDecodeAudit(f *testing.F) {
	fx, a := auditFixture(f)
	env, _, err := NewAudit(fx.node, nil, fx.cert, a, t0)
	if err != nil {
		f.Fatal(err)
	}
	e, _ := DecodeEnvelope(env)
	f.Add(e.Payload)
	a.Result.Transcript = &TranscriptShape{Calls: 40, PromptTokens: 9000, CompletionTokens: 1200}
	env, _, err = NewAudit(fx.node, nil, fx.cert, a, t0)
	if err != nil {
		f.Fatal(err)
	}
	e, _ = DecodeEnvelope(env)
	f.Add(e.Payload)
	// Drawn with a lab's draw key (draw_key set): the proof is checked under that key.
	dk, _ := newNode(f)
	if env, _, err = NewAudit(fx.node, dk, fx.cert, a, t0); err != nil {
		f.Fatal(err)
	}
	e, _ = DecodeEnvelope(env)
	f.Add(e.Payload)
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"r","digest":{"sha256":"00"}}],"predicateType":"` + PredicateAuditV1 + `","predicate":{}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeAudit(b)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		if err := p.validate(); err != nil {
			t.Fatalf("accepted an audit that does not validate: %v", err)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var q AuditPredicate
		if err := json.Unmarshal(again, &q); err != nil || q.validate() != nil {
			t.Fatalf("round trip of an accepted audit fails: %v", err)
		}
	})
}

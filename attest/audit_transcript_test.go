package attest

import (
	"strings"
	"testing"
)

// transcriptSubject is a run's transcript subject of shape s (its document named by name).
func transcriptSubject(name string, s TranscriptShape) Subject {
	return Subject{Name: "transcript.json", Digest: map[string]string{"sha256": sha("transcript " + name)},
		Annotations: map[string]any{AnnotationCID: "bafkreitranscript", AnnotationRole: RoleTranscript,
			AnnotationCalls: s.Calls, AnnotationPromptTokens: s.PromptTokens, AnnotationCompletionTokens: s.CompletionTokens,
			AnnotationTotalTokens: s.PromptTokens + s.CompletionTokens}}
}

// transcriptRun signs lab's run of bafyagent on bafytask seed 0 with submission and a
// transcript subject of shape s.
func (w *acceptWorld) transcriptRun(name string, lab int, submission string, s TranscriptShape) {
	w.t.Helper()
	f := w.labs[lab]
	p := runPredicate(f.nodeID, f.lab.ID, 0, 1)
	w.putRunSubjects(name, lab, p, append(runSubjects(submission), transcriptSubject(name, s)))
}

// agentShape is what the agent really does on the task: forty model calls.
var agentShape = TranscriptShape{Calls: 40, PromptTokens: 92000, CompletionTokens: 6100}

// The comparison JudgeAudit applies, case by case: for a deterministic agent on the same GPU
// model any difference in calls or tokens is a mismatch, even with the same submission;
// another GPU model, or no transcript on either side, leaves the submission's verdict; for a
// stochastic agent a shape within DefaultShapeTolerance says nothing and one far outside it
// is named as suspicion, never as a mismatch.
func TestJudgeAuditComparesTranscriptShapes(t *testing.T) {
	st := func(s *TranscriptShape) *Statement {
		subs := runSubjects("out")
		if s != nil {
			subs = append(subs, transcriptSubject("run", *s))
		}
		b, err := NewStatement(subs, PredicateRunV1, runPredicate("node", "lab:x", 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		x, err := ParseStatement(b)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	res := func(sub, gpu string, s *TranscriptShape) AuditResult {
		return AuditResult{Submission: sha(sub), Valid: true, Score: ptr(1), GPUModel: gpu, Transcript: s}
	}
	few := &TranscriptShape{Calls: 1, PromptTokens: 300, CompletionTokens: 40}
	near := &TranscriptShape{Calls: 41, PromptTokens: 94000, CompletionTokens: 5900}
	oneToken := &TranscriptShape{Calls: 40, PromptTokens: 92000, CompletionTokens: 6101}
	for _, c := range []struct {
		name          string
		run           *Statement
		deterministic bool
		res           AuditResult
		verdict       string
		reason        string // a prefix of the reason, or "" for none
	}{
		{"deterministic, same submission and shape", st(&agentShape), true, res("out", h200, &agentShape), VerdictMatch, ""},
		{"deterministic, same submission, one token more", st(&agentShape), true, res("out", h200, oneToken), VerdictMismatch, ReasonShapeMismatch},
		{"deterministic, fabricated transcript", st(few), true, res("out", h200, &agentShape), VerdictMismatch, ReasonShapeMismatch},
		{"deterministic, both differ", st(few), true, res("other", h200, &agentShape), VerdictMismatch, "submission sha256"},
		{"deterministic, another GPU model", st(few), true, res("out", "NVIDIA A100", &agentShape), VerdictInconclusive, "audited on NVIDIA A100"},
		{"deterministic, the run has no transcript", st(nil), true, res("out", h200, &agentShape), VerdictMatch, ""},
		{"deterministic, the audit has no transcript", st(few), true, res("out", h200, nil), VerdictMatch, ""},
		{"stochastic, within the tolerance", st(&agentShape), false, res("x", h200, near), VerdictInconclusive, VerdictStochastic},
		{"stochastic, fabricated transcript", st(few), false, res("x", h200, &agentShape), VerdictInconclusive, ReasonShapeSuspicion},
	} {
		v, why := JudgeAudit(c.run, h200, c.deterministic, c.res)
		if v != c.verdict || !strings.HasPrefix(why, c.reason) {
			t.Errorf("%s: %s (%s), want %s (%s…)", c.name, v, why, c.verdict, c.reason)
		}
	}
}

// A dishonest lab (lab 0) signs a run of a deterministic agent with the submission the
// agent really writes and a transcript of one call, where the agent makes forty (a result
// it never computed, or a cheaper-looking one). Two honest labs re-execute it: the same
// submission, forty calls. The transcripts' shapes disagree, so the ledger proves it and
// sets lab 0 aside, while an honest lab's run still counts. Audits that carry no transcript
// (as before the rule) clear the same run: the submission alone cannot see it. For a
// stochastic agent the same audits are suspicion in the record, never proof: the run counts
// and nobody is set aside. And one dishonest auditor signing a tiny transcript against an
// honest run that two labs reproduced frames nobody.
func TestAcceptCatchesAFabricatedTranscript(t *testing.T) {
	few := TranscriptShape{Calls: 1, PromptTokens: 300, CompletionTokens: 40}
	count := func(w *acceptWorld, p AcceptPolicy) (map[string]bool, []Misconduct, []AuditRecord) {
		o := Reconcile(w.verified(), Agree)
		results, _ := Accept(o, p)
		in := map[string]bool{}
		for _, r := range results {
			in[w.nameOf(r.AttestationID)] = true
		}
		return in, AuditMisconduct(o, p), AuditRecords(o, p)
	}
	redo := AuditResult{Submission: sha("perfect"), Valid: true, Score: ptr(1), GPUModel: h200, Transcript: &agentShape}

	w := newAcceptWorld(t, 4)
	w.transcriptRun("fab", 0, "perfect", few)
	w.run("other", 0, "bafytask", "bafyagent2", 0, "s", 0.4, 1)
	w.run("honest", 1, "bafytask", "bafyagent", 1, "t", 0.3, 1)
	w.auditResult("a1", 1, "fab", redo)
	w.auditResult("a2", 2, "fab", redo)
	in, mis, _ := count(w, auditPolicy(true))
	if len(mis) != 1 || mis[0].Kind != MisconductFabricated || w.nameOf(mis[0].Run) != "fab" || mis[0].Principal != w.labs[0].lab.ID {
		t.Fatalf("deterministic: misconduct %+v, want fab's lab proven", mis)
	}
	if in["fab"] || in["other"] || !in["honest"] {
		t.Fatalf("deterministic: counted %v; want lab 0 set aside, lab 1 counted", in)
	}
	if in, mis, recs := count(w, auditPolicy(false)); !in["fab"] || len(mis) != 0 || len(recs) != 2 ||
		recs[0].Verdict != VerdictInconclusive || !strings.HasPrefix(recs[0].Reason, ReasonShapeSuspicion) {
		t.Fatalf("stochastic: counted %v misconduct %+v records %+v; want fab counted, suspicion recorded", in, mis, recs)
	}

	bare := redo
	bare.Transcript = nil
	w0 := newAcceptWorld(t, 4)
	w0.transcriptRun("fab", 0, "perfect", few)
	w0.auditResult("a1", 1, "fab", bare)
	w0.auditResult("a2", 2, "fab", bare)
	if in, mis, _ := count(w0, auditPolicy(true)); !in["fab"] || len(mis) != 0 {
		t.Fatalf("audits without transcripts: counted %v misconduct %+v; want fab cleared by the submission alone", in, mis)
	}

	w2 := newAcceptWorld(t, 4)
	w2.transcriptRun("r", 0, "perfect", agentShape)
	w2.auditResult("m1", 1, "r", redo)
	w2.auditResult("m2", 2, "r", redo)
	liar := redo
	liar.Transcript = &few
	w2.auditResult("liar", 3, "r", liar)
	if in, mis, recs := count(w2, auditPolicy(true)); !in["r"] || len(mis) != 0 || len(recs) != 3 || recs[0].Outcome != "cleared" {
		t.Fatalf("framing by one lab: counted %v misconduct %+v records %+v; want r cleared", in, mis, recs)
	}
}

// An audit's transcript counts must not be negative.
func TestAuditRefusesANegativeTranscriptShape(t *testing.T) {
	f, a := auditFixture(t)
	a.Result.Transcript = &TranscriptShape{Calls: -1}
	if _, _, err := NewAudit(f.node, nil, f.cert, a, t0); err == nil || !strings.Contains(err.Error(), "transcript") {
		t.Fatalf("negative calls: %v", err)
	}
}

package runner_test

import (
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
)

// An audit re-runs the slot on the ordinary run path and signs nothing: the outcome carries
// the unsigned statement (the same submission as the signed run of the same agent, bundle
// and seed: the agent is deterministic), no attestation file is written, and the run is
// done. A restart in the middle of an audit abandons it rather than signing it as a run.
func TestAuditReexecutesWithoutSigning(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	task := exampleTask(t, "arithmetic")
	run, err := r.Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("heuristic"), Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("heuristic"), Seed: 4, Attempt: 1, Audit: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Envelope != nil || a.AttestationID != "" || len(a.Statement) == 0 {
		t.Fatalf("audit outcome signed something: id %q, %d envelope bytes, %d statement bytes", a.AttestationID, len(a.Envelope), len(a.Statement))
	}
	if files := attestationFiles(t, h); len(files) != 1 {
		t.Fatalf("attestations after an audit: %v (want only the run's)", files)
	}
	runSt, _ := attest.ParseStatement(mustPayload(t, run.Envelope))
	auditSt, err := attest.ParseStatement(a.Statement)
	if err != nil || auditSt.SubmissionDigest() == "" || auditSt.SubmissionDigest() != runSt.SubmissionDigest() {
		t.Fatalf("audit submission %q (%v), run's %q", auditSt.SubmissionDigest(), err, runSt.SubmissionDigest())
	}
	if st, _ := runner.LoadState(h, a.RunID); st.Phase != runner.PhaseDone || !st.Audit {
		t.Fatalf("audit state %+v", st)
	}

	// Crashed before its statement was read: a fresh process fails it, signs nothing.
	rewriteState(t, r, a.RunID, func(s *runner.RunState) { s.Phase = runner.PhaseSigning })
	rec, err := processRunner(t, h, nil).Recover(bg)
	if err != nil || len(rec) != 1 || rec[0].Err == nil || rec[0].Outcome != nil {
		t.Fatalf("recovered an interrupted audit: %+v %v", rec, err)
	}
	if files := attestationFiles(t, h); len(files) != 1 {
		t.Fatalf("attestations after recovering an audit: %v", files)
	}
}

func mustPayload(t *testing.T, env []byte) []byte {
	t.Helper()
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	return e.Payload
}

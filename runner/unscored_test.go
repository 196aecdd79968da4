package runner_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/tasks"
)

// TestUnscoredRunnerWithoutLabels: a lab that does not score a sealed task (Runner.Unscored)
// runs the agent and signs the submission with no score at once, waiting for no key; a
// scoring lab re-scores that submission against its labels.
func TestUnscoredRunnerWithoutLabels(t *testing.T) {
	src := exampleTask(t, "arithmetic")
	sealed := filepath.Join(t.TempDir(), "arithmetic-sealed")
	key, err := tasks.Seal(src, sealed)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := runner.BundleCID(bg, sealed)
	if err != nil {
		t.Fatal(err)
	}
	trust := attest.NewTrustStore()
	alpha := newSealLab(t, trust, "alpha") // scores the task
	beta := newSealLab(t, trust, "beta")   // runs it, no key
	grants := filepath.Join(t.TempDir(), "grants")
	grantTo(t, grants, alpha, alpha, cid, key)

	h := newHome(t)
	r := processRunner(t, h, nil)
	r.Keys = &runner.GrantKeys{Lab: beta.lab.ID, Identity: beta.age, Trust: trust, Grants: runner.DirGrants(grants)}
	r.Unscored = func(b string) bool { return b == cid }
	o, err := r.Run(bg, runner.Request{TaskDir: sealed, TaskCID: cid, Agent: exampleAgent("solver"), Seed: 1})
	if err != nil {
		t.Fatalf("an unscored run: %v", err)
	}
	p := o.Predicate
	if !p.ScoreAbsent || p.Valid || p.Score != nil || o.AttestationID == "" {
		t.Fatalf("predicate %+v: want the submission attested with no score", p)
	}
	st, run, _, err := attest.DecodeStatement(mustPayload(t, o.Envelope))
	if err != nil || !run.ScoreAbsent || st.SubmissionDigest() == "" {
		t.Fatalf("decoded: %+v %v", run, err)
	}

	// Alpha re-scores the submission: its verdict, the run's result.
	ha := newHome(t)
	ra := processRunner(t, ha, nil)
	ra.Keys = &runner.GrantKeys{Lab: alpha.lab.ID, Identity: alpha.age, Trust: trust, Grants: runner.DirGrants(grants)}
	sub, err := os.ReadFile(filepath.Join(runner.RunDir(h, o.RunID), "output", "submission.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ra.Rescore(o.AttestationID, &p, sub, "", "", sealed)
	if err != nil || !rs.Predicate.Valid || rs.Predicate.Score == nil || *rs.Predicate.Score != 1 {
		t.Fatalf("the scoring lab's verdict: %+v %v", rs, err)
	}
}

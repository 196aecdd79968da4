package runner_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/tasks"
)

// evaluatorTask is the regression example scored by the evaluator image img (its
// /evaluator, the evaluate.py contract) instead of the built-in metric: a fresh copy, as
// each lab holds its own copy of the bundle.
func evaluatorTask(t *testing.T, img string) string {
	t.Helper()
	return copyTask(t, "regression", func(y string) string {
		i := strings.Index(y, "evaluator:")
		return y[:i] + "evaluator:\n  image: " + img + "\n  command: [\"/evaluator\", \"--metric\", \"MAE\"]\n"
	})
}

// A task scored by its evaluator image is re-scored by another node running that image in
// its own Docker engine, against its own copy of the bundle: the honest submission gets the
// run's score and evaluator identity; a tampered one gets another score.
func TestRescoreEvaluatorImage(t *testing.T) {
	r, cli := dockerRunner(t)
	img := exampleImage(t, cli)
	solver := &agentspec.Spec{Name: "solver", Version: "1.0.0", Image: img, Command: []string{"/agent"}}
	o, err := r.Run(bg, runner.Request{TaskDir: evaluatorTask(t, img), Agent: solver, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Valid || o.Score == nil || !strings.HasPrefix(o.Predicate.Evaluator, img+" /evaluator") {
		t.Fatalf("run: valid %v score %v reason %q evaluator %q", o.Valid, o.Score, o.InvalidReason, o.Predicate.Evaluator)
	}
	sub, err := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "output", "submission.csv"))
	if err != nil {
		t.Fatal(err)
	}

	// The re-scorer: another home (another lab's node) with its own engine client and bundle.
	ex, err := docker.New(docker.Options{Client: executortest.DockerClient(t)})
	if err != nil {
		t.Skipf("skipping: docker executor: %v", err)
	}
	rescorer := processRunner(t, newHome(t), ex)
	own := evaluatorTask(t, img)
	rs, err := rescorer.RescoreSubmission(bg, o.AttestationID, &o.Predicate, sub, "", "", own)
	if err != nil {
		t.Fatal(err)
	}
	p := rs.Predicate
	if !p.Valid || p.Score == nil || *p.Score != *o.Score || p.Evaluator != o.Predicate.Evaluator || p.Run != o.AttestationID {
		t.Fatalf("re-score %+v (score %v), run score %v evaluator %q", p, p.Score, *o.Score, o.Predicate.Evaluator)
	}
	// The evaluator's folders (its copy of private/ and of the submission) are gone.
	if left, _ := os.ReadDir(rescorer.Home.RescoresDir()); len(left) != 0 {
		t.Fatalf("re-score left %d entries in %s", len(left), rescorer.Home.RescoresDir())
	}

	// A tampered submission: one prediction moved by 1000. The evaluator scores it, lower.
	lines := bytes.Split(bytes.TrimSpace(sub), []byte("\n"))
	cols := bytes.Split(lines[1], []byte(","))
	cols[len(cols)-1] = append([]byte("1000"), cols[len(cols)-1]...)
	lines[1] = bytes.Join(cols, []byte(","))
	tampered := append(bytes.Join(lines, []byte("\n")), '\n')
	rt, err := rescorer.RescoreSubmission(bg, o.AttestationID, &o.Predicate, tampered, "", "", own)
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Predicate.Valid || rt.Predicate.Score == nil || *rt.Predicate.Score == *o.Score || rt.Predicate.Evaluator != o.Predicate.Evaluator {
		t.Fatalf("tampered re-score %+v (score %v), run score %v\n%s", rt.Predicate, rt.Predicate.Score, *o.Score, tampered)
	}
	// And it is the evaluator image's score: the built-in MAE of the same bytes agrees.
	builtin, err := rescorer.RescoreSubmission(bg, o.AttestationID, &o.Predicate, tampered, "", "", exampleTask(t, "regression"))
	if err != nil || builtin.Predicate.Score == nil || *builtin.Predicate.Score != *rt.Predicate.Score {
		t.Fatalf("built-in score of the tampered submission %+v (%v), evaluator's %v", builtin, err, *rt.Predicate.Score)
	}
}

// A node without a Docker engine refuses to re-score an evaluator-image task, naming what it
// lacks, rather than run the image's command on the host or fall back to a built-in metric.
func TestRescoreEvaluatorNeedsDocker(t *testing.T) {
	r := processRunner(t, newHome(t), nil)
	run, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "regression"), Agent: exampleAgent("solver"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	img := "sha256:" + strings.Repeat("0", 64)
	_, err = r.RescoreSubmission(bg, run.AttestationID, &run.Predicate, []byte("id,y\n"), "", "", evaluatorTask(t, img))
	if err == nil || !strings.Contains(err.Error(), "no Docker engine") || !strings.Contains(err.Error(), img) {
		t.Fatalf("re-score without Docker: %v", err)
	}
}

// A sealed bundle scored by its evaluator image: a lab granted the key re-scores by
// decrypting its own copy for the evaluator container, gets the run's score and keeps no
// clear copy; a lab without a grant cannot.
func TestRescoreSealedEvaluatorImage(t *testing.T) {
	r, cli := dockerRunner(t)
	img := exampleImage(t, cli)
	src := evaluatorTask(t, img)
	labels, err := os.ReadFile(filepath.Join(src, "private", "labels.csv"))
	if err != nil {
		t.Fatal(err)
	}
	sealed := filepath.Join(t.TempDir(), "sealed")
	key, err := tasks.Seal(src, sealed)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := runner.BundleCID(bg, sealed)
	if err != nil {
		t.Fatal(err)
	}
	trust := attest.NewTrustStore()
	alpha, gamma := newSealLab(t, trust, "alpha"), newSealLab(t, trust, "gamma")
	grants := filepath.Join(t.TempDir(), "grants")
	grantTo(t, grants, alpha, alpha, cid, key)
	grantTo(t, grants, alpha, gamma, cid, key)
	r.Keys = &runner.GrantKeys{Lab: alpha.lab.ID, Identity: alpha.age, Trust: trust, Grants: runner.DirGrants(grants)}
	solver := &agentspec.Spec{Name: "solver", Version: "1.0.0", Image: img, Command: []string{"/agent"}}
	o, err := r.Run(bg, runner.Request{TaskDir: sealed, TaskCID: cid, Agent: solver, Seed: 1})
	if err != nil || !o.Valid || o.Score == nil {
		t.Fatalf("sealed run: %+v %v", o, err)
	}
	sub, err := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "output", "submission.csv"))
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(t.TempDir(), "own")
	if err := tasks.CopyTree(sealed, own); err != nil {
		t.Fatal(err)
	}
	ex, err := docker.New(docker.Options{Client: cli})
	if err != nil {
		t.Skipf("skipping: docker executor: %v", err)
	}
	hg := newHome(t)
	rg := processRunner(t, hg, ex)
	rg.Keys = &runner.GrantKeys{Lab: gamma.lab.ID, Identity: gamma.age, Trust: trust, Grants: runner.DirGrants(grants)}
	rs, err := rg.RescoreSubmission(bg, o.AttestationID, &o.Predicate, sub, "", "", own)
	if err != nil || !rs.Predicate.Valid || rs.Predicate.Score == nil || *rs.Predicate.Score != *o.Score || rs.Predicate.Evaluator != o.Predicate.Evaluator {
		t.Fatalf("re-score of a sealed evaluator-image run: %+v %v (run %v)", rs, err, *o.Score)
	}
	grepTree(t, hg.Dir, labels, "the re-scorer's home")

	nobody := newSealLab(t, trust, "nobody")
	rn := processRunner(t, newHome(t), ex)
	rn.Keys = &runner.GrantKeys{Lab: nobody.lab.ID, Identity: nobody.age, Trust: trust, Grants: runner.DirGrants(grants)}
	var nk *runner.NoKeyError
	if _, err := rn.RescoreSubmission(bg, o.AttestationID, &o.Predicate, sub, "", "", own); !errors.As(err, &nk) {
		t.Fatalf("re-score without a grant: %v", err)
	}
}

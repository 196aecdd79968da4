package runner_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/tasks"
)

// sealLab is a lab of a sealed-bundle test: its signing key (certifying one node) and its
// age identity, listed in the shared trust store.
type sealLab struct {
	lab  *attest.Lab
	age  *age.X25519Identity
	node crypto.PrivKey
	cert *attest.NodeCert
}

func newSealLab(t *testing.T, trust *attest.TrustStore, name string) *sealLab {
	t.Helper()
	lk, _, _ := crypto.GenerateEd25519Key(nil)
	lab, err := attest.NewLab(lk)
	if err != nil {
		t.Fatal(err)
	}
	nk, _, _ := crypto.GenerateEd25519Key(nil)
	pid, _ := peer.IDFromPrivateKey(nk)
	cert := mustCertify(t, lab, pid.String(), time.Now().Add(-time.Hour), 48*time.Hour)
	id, _ := age.GenerateX25519Identity()
	if _, err := trust.AddLab(name, lab.Pub); err != nil {
		t.Fatal(err)
	}
	if err := trust.SetAgeRecipient(lab.ID, id.Recipient().String()); err != nil {
		t.Fatal(err)
	}
	return &sealLab{lab: lab, age: id, node: nk, cert: cert}
}

// grantTo makes a grant by from's node of key to lab to, written into dir.
func grantTo(t *testing.T, dir string, from, to *sealLab, bundle string, key *tasks.DataKey) {
	t.Helper()
	env, id, err := attest.NewGrant(from.node, from.cert, bundle, to.lab.ID, to.age.Recipient().String(), key.String(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, id+".json"), env, 0o644); err != nil {
		t.Fatal(err)
	}
}

// grepTree fails if any regular file under dir contains needle.
func grepTree(t *testing.T, dir string, needle []byte, what string) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, needle) {
			t.Errorf("%s: %s holds the labels in the clear", what, p)
		}
		return nil
	})
}

// TestSealedRunWaitsForGrantThenScores: a lab without a grant runs the agent but does not
// score (the run waits and says why); once a lab that holds the key grants it, the waiting
// run is scored; a lab added later gets a grant and the bundle's CID never changes; the
// labels are never in the clear in the home (runs, objects) afterwards.
func TestSealedRunWaitsForGrantThenScores(t *testing.T) {
	src := exampleTask(t, "arithmetic")
	clear, err := tasks.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := os.ReadFile(clear.LabelsPath())
	if err != nil {
		t.Fatal(err)
	}
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
	alpha := newSealLab(t, trust, "alpha") // sealed the bundle: holds the key
	beta := newSealLab(t, trust, "beta")   // no grant yet
	grants := filepath.Join(t.TempDir(), "grants")
	grantTo(t, grants, alpha, alpha, cid, key)

	h := newHome(t)
	r := processRunner(t, h, nil)
	r.Keys = &runner.GrantKeys{Lab: beta.lab.ID, Identity: beta.age, Trust: trust, Grants: runner.DirGrants(grants)}
	_, err = r.Run(bg, runner.Request{TaskDir: sealed, TaskCID: cid, Agent: exampleAgent("constant"), Seed: 1})
	var nk *runner.NoKeyError
	if !errors.As(err, &nk) || nk.Bundle != cid || !strings.Contains(err.Error(), "sealed") || !strings.Contains(err.Error(), "evalmesh task grant") {
		t.Fatalf("a run without a grant: %v", err)
	}
	runs, _ := runner.ListRuns(h)
	if len(runs) != 1 || runs[0].Phase != runner.PhaseAwaitingKey || !strings.Contains(runs[0].Error, "holds no grant") {
		t.Fatalf("runs %+v", runs)
	}
	if len(attestationFiles(t, h)) != 0 {
		t.Fatal("a run without the key was attested")
	}
	grepTree(t, h.Dir, labels, "after a run without the key")

	// A grant to alpha does not open for beta; then alpha grants beta.
	if out, err := r.ScoreAwaiting(bg, cid); err != nil || len(out) != 1 || !errors.As(out[0].Err, &nk) {
		t.Fatalf("still waiting: %+v %v", out, err)
	}
	grantTo(t, grants, alpha, beta, cid, key)
	out, err := r.ScoreAwaiting(bg, cid)
	if err != nil || len(out) != 1 || out[0].Err != nil || out[0].Outcome == nil {
		t.Fatalf("after the grant: %+v %v", out, err)
	}
	o := out[0].Outcome
	if !o.Valid || o.Score == nil || o.Predicate.Slot.Task != cid {
		t.Fatalf("outcome %+v", o)
	}
	// The same agent on the clear bundle scores the same.
	o2, err := processRunner(t, newHome(t), nil).Run(bg, runner.Request{TaskDir: src, Agent: exampleAgent("constant"), Seed: 1})
	if err != nil || *o2.Score != *o.Score {
		t.Fatalf("clear bundle scored %v, sealed %v (%v)", o2.Score, *o.Score, err)
	}

	// A new lab joins: one more grant, the bundle and its CID untouched.
	gamma := newSealLab(t, trust, "gamma")
	grantTo(t, grants, beta, gamma, cid, key)
	if again, err := runner.BundleCID(bg, sealed); err != nil || again != cid {
		t.Fatalf("CID after a lab was added: %s, was %s (%v)", again, cid, err)
	}
	hg := newHome(t)
	rg := processRunner(t, hg, nil)
	rg.Keys = &runner.GrantKeys{Lab: gamma.lab.ID, Identity: gamma.age, Trust: trust, Grants: runner.DirGrants(grants)}
	og, err := rg.Run(bg, runner.Request{TaskDir: sealed, TaskCID: cid, Agent: exampleAgent("solver"), Seed: 2})
	if err != nil || !og.Valid || *og.Score != 1 {
		t.Fatalf("the new lab's run: %+v %v", og, err)
	}
	// Gamma re-scores beta's run from its submission alone (the re-score path).
	sub, err := os.ReadFile(filepath.Join(runner.RunDir(h, o.RunID), "output", "submission.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rg.Rescore(o.AttestationID, &o.Predicate, sub, "", "", sealed)
	if err != nil || rs.Predicate.Score == nil || *rs.Predicate.Score != *o.Score {
		t.Fatalf("re-score of a sealed run: %+v %v", rs, err)
	}
	// Beta without a key cannot re-score.
	rb := processRunner(t, newHome(t), nil)
	if _, err := rb.Rescore(o.AttestationID, &o.Predicate, sub, "", "", sealed); !errors.As(err, &nk) {
		t.Fatalf("re-score without a key: %v", err)
	}
	// (Gamma's home holds the labels' bytes only as its solver's own submission.)
	grepTree(t, h.Dir, labels, "beta's home")
}

// TestSealedEvaluatorProgram: an evaluator program sees the decrypted private/ while it
// runs, and no clear copy is left in the run folder afterwards.
func TestSealedEvaluatorProgram(t *testing.T) {
	src := copyTask(t, "sentiment", func(y string) string {
		i := strings.Index(y, "evaluator:")
		return y[:i] + "evaluator:\n  image: sha256:" + strings.Repeat("0", 64) + "\n  command: [\"evalmesh\", \"agent\", \"evaluator\", \"--metric\", \"Accuracy\"]\n"
	})
	var labels []byte
	filepath.Walk(filepath.Join(src, "private"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && labels == nil {
			labels, _ = os.ReadFile(p)
		}
		return nil
	})
	sealed := filepath.Join(t.TempDir(), "s")
	key, err := tasks.Seal(src, sealed)
	if err != nil {
		t.Fatal(err)
	}
	cid, _ := runner.BundleCID(bg, sealed)
	trust := attest.NewTrustStore()
	alpha := newSealLab(t, trust, "alpha")
	grants := filepath.Join(t.TempDir(), "grants")
	grantTo(t, grants, alpha, alpha, cid, key)
	h := newHome(t)
	r := processRunner(t, h, nil)
	r.Keys = &runner.GrantKeys{Lab: alpha.lab.ID, Identity: alpha.age, Trust: trust, Grants: runner.DirGrants(grants)}
	o, err := r.Run(context.Background(), runner.Request{TaskDir: sealed, TaskCID: cid, Agent: exampleAgent("solver"), Seed: 1})
	if err != nil || !o.Valid {
		t.Fatalf("%+v %v", o, err)
	}
	if _, err := os.Stat(filepath.Join(runner.RunDir(h, o.RunID), "eval", "sealed")); !os.IsNotExist(err) {
		t.Fatalf("the decrypted folder outlived the evaluator: %v", err)
	}
	if len(labels) > 0 {
		grepTree(t, h.Dir, labels, "after an evaluator program")
	}
}

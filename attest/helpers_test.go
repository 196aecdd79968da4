package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// t0 is the fixed "now" of these tests: clocks are injected, never read.
var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	lab     *Lab
	node    crypto.PrivKey
	nodeID  string
	cert    *NodeCert
	trust   *TrustStore
	labName string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	lk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := NewLab(lk)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{lab: lab, labName: "acme"}
	f.node, f.nodeID = newNode(t)
	f.cert, err = lab.Certify(f.nodeID, t0.Add(-24*time.Hour), 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f.trust = NewTrustStore()
	if _, err := f.trust.AddLab(f.labName, lab.Pub); err != nil {
		t.Fatal(err)
	}
	return f
}

func newNode(t testing.TB) (crypto.PrivKey, string) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peerIDOf(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

func sha(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

func ptr(f float64) *float64 { return &f }

// runPredicate is a well-formed run predicate for node/lab in slot seed.
func runPredicate(node, lab string, seed int, score float64) RunPredicate {
	return RunPredicate{
		Slot: Slot{Campaign: "bafycampaign", Task: "bafytask", Agent: "bafyagent", Seed: seed},
		Node: node, Lab: lab,
		Hardware: Hardware{GPUModel: "NVIDIA H200", Driver: "570.86", GPUCount: 1, GPUUUIDHashes: []string{sha("GPU-1")}},
		Start:    t0.Add(-2 * time.Hour), End: t0.Add(-time.Hour),
		WallSeconds: 3600, GPUSeconds: 3500, EnergyJoules: 2.1e6,
		Valid: true, Score: ptr(score), Metric: "accuracy", Evaluator: "builtin:accuracy",
		Executor: &ExecutorInfo{Name: "docker", Isolation: IsolationContainer, Limits: "cgroup2"},
	}
}

func runSubjects(submission string) []Subject {
	return []Subject{
		{Name: "submission.csv", Digest: map[string]string{"sha256": sha(submission)}, Annotations: map[string]any{AnnotationCID: "bafkreisub", AnnotationRole: RoleSubmission}},
		{Name: "logs.tar", Digest: map[string]string{"sha256": sha("logs" + submission)}, Annotations: map[string]any{AnnotationRole: RoleLogs}},
	}
}

// signRun signs a run attestation by the fixture's node.
func (f *fixture) signRun(t testing.TB, seed int, submission string, score float64) ([]byte, string) {
	t.Helper()
	st, err := NewStatement(runSubjects(submission), PredicateRunV1, runPredicate(f.nodeID, f.lab.ID, seed, score))
	if err != nil {
		t.Fatal(err)
	}
	env, id, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	return env, id
}

func (f *fixture) signRescore(t testing.TB, run string, valid bool, score float64) []byte {
	t.Helper()
	p := RescorePredicate{Run: run, Valid: valid, Metric: "accuracy", Evaluator: "builtin:accuracy", Node: f.nodeID, Lab: f.lab.ID, Time: t0.Add(-30 * time.Minute)}
	if valid {
		p.Score = ptr(score)
	}
	st, err := NewStatement([]Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": sha(fmt.Sprint(run))}}}, PredicateRescoreV1, p)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

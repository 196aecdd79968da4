// Package attestgen makes real signed run attestations for tests and benchmarks: a lab key,
// a certified node key, and run statements signed exactly as a node signs them. Times are
// fixed (no clock is read), so the same (lab, i) gives a statement of the same shape.
//
// Concurrency: a Fixture may sign from many goroutines.
package attestgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
)

// Base is the fixed time runs are placed from; certificates are valid 30 days from it.
var Base = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// Fixture is one lab with one certified node.
type Fixture struct {
	Name   string
	Lab    *attest.Lab
	Node   crypto.PrivKey
	NodeID string
	Cert   *attest.NodeCert
}

// New makes a lab called name and certifies a fresh node key under it.
func New(name string) (*Fixture, error) {
	lk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	lab, err := attest.NewLab(lk)
	if err != nil {
		return nil, err
	}
	nk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, err
	}
	id, err := peer.IDFromPrivateKey(nk)
	if err != nil {
		return nil, err
	}
	cert, err := lab.Certify(id.String(), Base.Add(-24*time.Hour), 30*24*time.Hour)
	if err != nil {
		return nil, err
	}
	return &Fixture{Name: name, Lab: lab, Node: nk, NodeID: id.String(), Cert: cert}, nil
}

// Trust returns a trust store trusting every fixture's lab.
func Trust(fs ...*Fixture) (*attest.TrustStore, error) {
	t := attest.NewTrustStore()
	for _, f := range fs {
		if _, err := t.AddLab(f.Name, f.Lab.Pub); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func sha(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// Run signs the run attestation number i: seed i of one slot, its own submission, ending i
// seconds after Base.
func (f *Fixture) Run(i int) ([]byte, error) {
	score := float64(i%1000) / 1000
	sub := fmt.Sprintf("%s-submission-%d", f.Name, i)
	start := Base.Add(time.Duration(i) * time.Second)
	p := attest.RunPredicate{
		Slot: attest.Slot{Campaign: "bafycampaign", Task: "bafytask", Agent: "bafyagent", Seed: i},
		Node: f.NodeID, Lab: f.Lab.ID,
		Hardware: attest.Hardware{GPUModel: "NVIDIA H200", Driver: "570.86", GPUCount: 1, GPUUUIDHashes: []string{sha("GPU-1")}},
		Start:    start, End: start.Add(time.Second),
		WallSeconds: 3600, GPUSeconds: 3500, EnergyJoules: 2.1e6,
		Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy",
		// As a docker run records it: the default acceptance policy counts only isolated runs.
		Executor: &attest.ExecutorInfo{Name: "docker", Isolation: attest.IsolationContainer, Limits: "cgroup2"},
	}
	subjects := []attest.Subject{
		{Name: "submission.csv", Digest: map[string]string{"sha256": sha(sub)}, Annotations: map[string]any{attest.AnnotationCID: "bafkreisub", attest.AnnotationRole: attest.RoleSubmission}},
		{Name: "logs.tar", Digest: map[string]string{"sha256": sha("logs" + sub)}, Annotations: map[string]any{attest.AnnotationRole: attest.RoleLogs}},
	}
	st, err := attest.NewStatement(subjects, attest.PredicateRunV1, p)
	if err != nil {
		return nil, err
	}
	env, _, err := attest.Sign(f.Node, f.Cert, st)
	return env, err
}

// Runs signs runs lo..hi-1.
func (f *Fixture) Runs(lo, hi int) ([][]byte, error) {
	out := make([][]byte, 0, hi-lo)
	for i := lo; i < hi; i++ {
		e, err := f.Run(i)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Rescore signs this fixture's re-score of run attestation run (its ID), which ran as
// Run(i): the same valid score, made a minute after the run ended.
func (f *Fixture) Rescore(run string, i int) ([]byte, error) {
	score := float64(i%1000) / 1000
	p := attest.RescorePredicate{Run: run, Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy",
		Node: f.NodeID, Lab: f.Lab.ID, Time: Base.Add(time.Duration(i)*time.Second + time.Minute)}
	sub := fmt.Sprintf("rescore-%s", run)
	st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": sha(sub)}}}, attest.PredicateRescoreV1, p)
	if err != nil {
		return nil, err
	}
	env, _, err := attest.Sign(f.Node, f.Cert, st)
	return env, err
}

// TrustedPair is two labs, lab-a and lab-b, and a trust store listing both: the fixture of
// the sync and heads tests (in node and node/syncer).
func TrustedPair() (a, b *Fixture, trust *attest.TrustStore, err error) {
	if a, err = New("lab-a"); err != nil {
		return nil, nil, nil, err
	}
	if b, err = New("lab-b"); err != nil {
		return nil, nil, nil, err
	}
	trust, err = Trust(a, b)
	return a, b, trust, err
}

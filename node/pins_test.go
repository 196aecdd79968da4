package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
)

// Garbage collection keeps every block of an object a stored attestation names (here a
// run's submission, put as a raw block and never pinned, as the mesh stores its runs'
// objects), and drops an unpinned block nothing names.
func TestGCKeepsWhatTheLedgerRestsOn(t *testing.T) {
	ctx := context.Background()
	f, tr := testLab(t, "lab1")
	opts := testOptions()
	opts.Trust = tr
	n := startNode(t, opts)
	put := func(data []byte) cid.Cid {
		c, err := cid.Decode(agentspec.RawCID(data))
		if err != nil {
			t.Fatal(err)
		}
		b, err := blocks.NewBlockWithCid(data, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Blockstore().Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		return c
	}
	subData := []byte("prediction\n1\n2\n3\n")
	sub, stray := put(subData), put([]byte("nothing names this block"))
	sum := sha256.Sum256(subData)
	score := 0.5
	start := attestgen.Base.Add(time.Minute)
	p := attest.RunPredicate{Slot: attest.Slot{Campaign: "bafycampaign", Task: "bafytask", Agent: "bafyagent", Seed: 0},
		Node: f.NodeID, Lab: f.Lab.ID, Start: start, End: start.Add(time.Second), Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy",
		Executor: &attest.ExecutorInfo{Name: "docker", Isolation: attest.IsolationContainer, Limits: "cgroup2"}}
	st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])},
		Annotations: map[string]any{attest.AnnotationCID: sub.String(), attest.AnnotationRole: attest.RoleSubmission}}}, attest.PredicateRunV1, p)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := attest.Sign(f.Node, f.Cert, st)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := n.Store().Attestations().Add([][]byte{env}, SourceLocal, ""); err != nil || res[0].Status == StatusRefused {
		t.Fatalf("store the run: %+v %v", res, err)
	}
	if _, err := n.GC(ctx, GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := n.Blockstore().Has(ctx, sub); !ok {
		t.Errorf("GC dropped submission %s, which a stored run attestation names", sub)
	}
	if ok, _ := n.Blockstore().Has(ctx, stray); ok {
		t.Errorf("GC kept %s, which nothing pins or names", stray)
	}
}

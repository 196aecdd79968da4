package node

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"testing"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/protocol"
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
	put := func(data []byte) cid.Cid { return putRaw(t, n, data) }
	subData := []byte("prediction\n1\n2\n3\n")
	sub, stray := put(subData), put([]byte("nothing names this block"))
	env := signRunNaming(t, f, sub, subData)
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

// putRaw stores data as a raw block (unpinned, as the mesh stores a run's objects).
func putRaw(t *testing.T, n *Node, data []byte) cid.Cid {
	t.Helper()
	c, err := cid.Decode(agentspec.RawCID(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := blocks.NewBlockWithCid(data, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Blockstore().Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return c
}

// signRunNaming signs, by f's node, a run attestation whose submission is sub (data).
func signRunNaming(t *testing.T, f *attestgen.Fixture, sub cid.Cid, data []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(data)
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
	return env
}

// A repair round on real nodes of a two-lab network (pin factor 2): lab B's node learns
// over the holdings protocol that only lab A holds a run's submission, fetches and pins it;
// the next round finds the factor met and fetches nothing. Run under -race: the holdings
// stream is served while the round runs.
func TestRepairPinsFetchesWhatItsLabMustHold(t *testing.T) {
	ctx := context.Background()
	fa, err := attestgen.New("laba")
	if err != nil {
		t.Fatal(err)
	}
	fb, err := attestgen.New("labb")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := protocol.ParseNetworkDoc((&protocol.NetworkDoc{Version: protocol.NetworkDocVersion, Network: "pintest",
		Labs:   []protocol.NetworkLab{{Name: "laba", Key: base64.StdEncoding.EncodeToString(fa.Lab.Pub)}, {Name: "labb", Key: base64.StdEncoding.EncodeToString(fb.Lab.Pub)}},
		Ledger: protocol.LedgerPolicy{Worst: "population"}}).Canonical())
	if err != nil {
		t.Fatal(err)
	}
	trust, err := doc.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	start := func(f *attestgen.Fixture) *Node {
		h := newHome(t)
		opts := testOptions()
		opts.Trust, opts.Network = trust, doc
		n := startNodeAt(t, h, opts)
		cert, err := f.Lab.Certify(n.ID().String(), time.Now().Add(-time.Hour), 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.CertPath(), cert.Raw(), 0o644); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := start(fa), start(fb)
	data := []byte("the submission lab A's run made")
	sub := putRaw(t, a, data)
	env := signRunNaming(t, fa, sub, data)
	for _, n := range []*Node{a, b} {
		if res, err := n.Store().Attestations().Add([][]byte{env}, SourceLocal, ""); err != nil || res[0].Status == StatusRefused {
			t.Fatalf("store the run: %+v %v", res, err)
		}
	}
	connect(t, a, b)
	sv, err := b.RepairPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sv.Factor != 2 || sv.Objects != 1 || sv.UnderFactor != 1 || len(sv.Fetched) != 1 || sv.Fetched[0] != sub.String() {
		t.Fatalf("first round on B: %+v; want the submission under factor 2 and fetched", sv)
	}
	if !b.HoldsWhole(ctx, sub) {
		t.Fatalf("B does not hold %s after fetching it", sub)
	}
	if ok, err := b.IsPinned(ctx, sub); err != nil || !ok {
		t.Errorf("B fetched %s but did not pin it (%v)", sub, err)
	}
	for _, n := range []*Node{a, b} {
		sv, err := n.RepairPins(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sv.UnderFactor != 0 || len(sv.Fetched) != 0 || len(sv.States) != 1 || !sv.States[0].Met || len(sv.States[0].Holding) != 2 {
			t.Errorf("second round: %+v; want the factor met by both labs, nothing fetched", sv)
		}
	}
}

package node

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/node/pins"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
	"github.com/evalmesh/evalmesh/protocol"
)

// Garbage collection keeps every block of an object a stored attestation names (here a
// run's submission, put as a raw block and never pinned, as the mesh stores its runs'
// objects), and drops an unpinned block nothing names.
func TestGCKeepsWhatTheLedgerRestsOn(t *testing.T) {
	ctx := context.Background()
	f, tr := vstoretest.Lab(t, "lab1")
	opts := testOptions()
	opts.Trust = tr
	n := startNode(t, opts)
	put := func(data []byte) cid.Cid { return putRaw(t, n, data) }
	subData := []byte("prediction\n1\n2\n3\n")
	sub, stray := put(subData), put([]byte("nothing names this block"))
	env := signRunNaming(t, f, sub, subData)
	if res, err := n.Store().Attestations().Add([][]byte{env}, vstore.SourceLocal, ""); err != nil || res[0].Status == vstore.StatusRefused {
		t.Fatalf("store the run: %+v %v", res, err)
	}
	if _, err := n.pins.GC(ctx, pins.GCOptions{}); err != nil {
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
	fs, nodes := pinNetwork(t, "laba", "labb")
	fa, a, b := fs[0], nodes[0], nodes[1]
	data := []byte("the submission lab A's run made")
	sub := putRaw(t, a, data)
	env := signRunNaming(t, fa, sub, data)
	for _, n := range []*Node{a, b} {
		if res, err := n.Store().Attestations().Add([][]byte{env}, vstore.SourceLocal, ""); err != nil || res[0].Status == vstore.StatusRefused {
			t.Fatalf("store the run: %+v %v", res, err)
		}
	}
	connect(t, a, b)
	sv, err := b.pins.RepairPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sv.Factor != 2 || sv.Objects != 1 || sv.UnderFactor != 1 || len(sv.Fetched) != 1 || sv.Fetched[0] != sub.String() {
		t.Fatalf("first round on B: %+v; want the submission under factor 2 and fetched", sv)
	}
	if !b.pins.HoldsWhole(ctx, sub) {
		t.Fatalf("B does not hold %s after fetching it", sub)
	}
	if ok, err := b.IsPinned(ctx, sub); err != nil || !ok {
		t.Errorf("B fetched %s but did not pin it (%v)", sub, err)
	}
	for _, n := range []*Node{a, b} {
		sv, err := n.pins.RepairPins(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if sv.UnderFactor != 0 || len(sv.Fetched) != 0 || len(sv.States) != 1 || !sv.States[0].Met || len(sv.States[0].Holding) != 2 {
			t.Errorf("second round: %+v; want the factor met by both labs, nothing fetched", sv)
		}
	}
}

// A repair round of many objects on real nodes of a two-lab network (pin factor 2): lab A
// holds the nine task bundles of a campaign; B's round fetches and pins the eight that fit
// B's max_bundle_size and leaves the one that declares more to a fetch of its own
// (FetchTogether takes only roots within the limit), which refuses it naming the limit.
// With no limit, FetchTogether brings that one whole beside one B holds, and the next round
// finds the factor met.
func TestRepairPinsFetchesManyObjectsTogether(t *testing.T) {
	ctx := context.Background()
	fs, nodes := pinNetwork(t, "laba", "labb")
	a, b := nodes[0], nodes[1]
	var small []string
	var big string
	for i := range 9 {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("object", i))
		size := 3000 + i
		if i == 8 {
			size = 1 << 20
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data.bin"), randomBytes(uint64(i), size), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := a.Add(ctx, dir, AddOptions{Unchecked: true})
		if err != nil {
			t.Fatal(err)
		}
		if i == 8 {
			big = c.String()
		} else {
			small = append(small, c.String())
		}
	}
	storeCampaignOf(t, fs[0], nodes, "many", append(slices.Clone(small), big))
	b.cfg.MaxBundleSize = 512 << 10
	wantPinGauges(t, b, "before B's first round", 0, 0)
	connect(t, a, b)
	sv, err := b.pins.RepairPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// /metrics counts the round's decision (before its fetches): all nine held by A alone.
	wantPinGauges(t, b, "after B's first round", 9, 9)
	slices.Sort(small)
	if !slices.Equal(sv.Fetched, small) || len(sv.Failed) != 1 || !strings.HasPrefix(sv.Failed[0], big+": ") || !strings.Contains(sv.Failed[0], "max_bundle_size") {
		t.Fatalf("round on B: fetched %v, failed %v; want the eight small objects fetched and %s refused for max_bundle_size", sv.Fetched, sv.Failed, big)
	}
	for _, s := range small {
		c, _ := cid.Decode(s)
		if ok, err := b.IsPinned(ctx, c); err != nil || !ok || !b.pins.HoldsWhole(ctx, c) {
			t.Errorf("B fetched %s but does not hold and pin it (%v)", s, err)
		}
	}
	// With no limit, FetchTogether itself brings the ninth whole (its root came in the
	// round's want list), beside one it already holds.
	b.cfg.MaxBundleSize = 0
	objs := []protocol.LedgerObject{{CID: big, What: "bundle"}, {CID: small[0], What: "bundle"}}
	got, rest := b.pins.FetchTogether(ctx, objs, map[string][]peer.ID{big: {a.ID()}, small[0]: {a.ID()}})
	bc, _ := cid.Decode(big)
	if len(got) != 2 || len(rest) != 0 || !b.pins.HoldsWhole(ctx, bc) {
		t.Fatalf("FetchTogether on B: got %v, left %v; want both whole", got, rest)
	}
	if sv, err = b.pins.RepairPins(ctx); err != nil || len(sv.Fetched) != 0 || sv.UnderFactor != 0 {
		t.Errorf("next round: %+v (%v); want the factor met, nothing fetched", sv, err)
	}
	wantPinGauges(t, b, "after the round that finds the factor met", 9, 0)
}

// wantPinGauges checks the pin gauges of n's registry (what its /metrics serves): absent
// before n's first repair round (objects 0), else the last round's object and
// under-factor counts.
func wantPinGauges(t *testing.T, n *Node, when string, objects, under int) {
	t.Helper()
	names := []string{"evalmesh_ledger_objects", "evalmesh_ledger_objects_under_factor"}
	want := ""
	if objects > 0 {
		want = fmt.Sprintf(`
# HELP evalmesh_ledger_objects Objects the stored campaigns and attestations name (bundles, submissions, logs, verdicts, agent images), at the last repair round.
# TYPE evalmesh_ledger_objects gauge
evalmesh_ledger_objects %d
# HELP evalmesh_ledger_objects_under_factor Of those, objects fewer labs hold than the network's pin factor, at the last repair round (before its fetches).
# TYPE evalmesh_ledger_objects_under_factor gauge
evalmesh_ledger_objects_under_factor %d
`, objects, under)
	}
	if err := promtest.GatherAndCompare(n.Metrics(), strings.NewReader(want), names...); err != nil {
		t.Errorf("/metrics %s: %v", when, err)
	}
}

// FetchTogether asks each object of those held by different nodes only of the nodes that
// hold it: lab C's node fetches three small objects only lab A holds and three only lab B
// holds, all six whole from two transfers; asked of both nodes at once, each would be dropped
// for lacking the other's objects and the rest left to the slow path.
func TestFetchTogetherAsksEachObjectOfItsHolders(t *testing.T) {
	ctx := context.Background()
	_, nodes := pinNetwork(t, "laba", "labb", "labc")
	a, b, c := nodes[0], nodes[1], nodes[2]
	holders := map[string][]peer.ID{}
	var objs []protocol.LedgerObject
	for i := range 6 {
		from := a
		if i >= 3 {
			from = b
		}
		dir := filepath.Join(t.TempDir(), fmt.Sprint("object", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data.bin"), randomBytes(uint64(50+i), 300<<10+i), 0o644); err != nil {
			t.Fatal(err)
		}
		root, err := from.Add(ctx, dir, AddOptions{Unchecked: true})
		if err != nil {
			t.Fatal(err)
		}
		holders[root.String()] = []peer.ID{from.ID()}
		objs = append(objs, protocol.LedgerObject{CID: root.String(), What: "bundle"})
	}
	connect(t, c, a)
	connect(t, c, b)
	c.pins.PrefetchRoots(ctx, objs)
	got, rest := c.pins.FetchTogether(ctx, objs, holders)
	if len(got) != len(objs) || len(rest) != 0 {
		t.Fatalf("FetchTogether on C: %d whole, %d left (%v); want all %d whole", len(got), len(rest), rest, len(objs))
	}
}

// pinNetwork starts one real node per lab of a network of those labs (pin factor 2), each
// with its lab's certificate, unconnected.
func pinNetwork(t *testing.T, names ...string) ([]*attestgen.Fixture, []*Node) {
	t.Helper()
	return pinNetworkWith(t, nil, names...)
}

// pinNetworkWith is pinNetwork with tweak (if set) applied to the options of the i-th lab's
// node before it starts.
func pinNetworkWith(t *testing.T, tweak func(i int, o *Options), names ...string) ([]*attestgen.Fixture, []*Node) {
	t.Helper()
	var fs []*attestgen.Fixture
	var labs []protocol.NetworkLab
	for _, name := range names {
		f, err := attestgen.New(name)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
		labs = append(labs, protocol.NetworkLab{Name: name, Key: base64.StdEncoding.EncodeToString(f.Lab.Pub)})
	}
	doc, err := protocol.ParseNetworkDoc((&protocol.NetworkDoc{Version: protocol.NetworkDocVersion, Network: pinNet,
		Labs: labs, Ledger: protocol.LedgerPolicy{Worst: "population"}}).Canonical())
	if err != nil {
		t.Fatal(err)
	}
	trust, err := doc.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	for i, f := range fs {
		h := newHome(t)
		opts := testOptions()
		opts.Trust, opts.Network = trust, doc
		if tweak != nil {
			tweak(i, &opts)
		}
		n := startNodeAt(t, h, opts)
		cert, err := f.Lab.Certify(n.ID().String(), time.Now().Add(-time.Hour), 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.CertPath(), cert.Raw(), 0o644); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	return fs, nodes
}

// storeCampaignOf stores on every node a campaign of f's lab naming tasks, so that they are
// ledger objects.
func storeCampaignOf(t *testing.T, f *attestgen.Fixture, nodes []*Node, title string, tasks []string) {
	t.Helper()
	camp, _, err := protocol.SignCampaign(f.Lab, &protocol.Campaign{Network: pinNet, Title: title, Seeds: 1, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(time.Hour), Tasks: tasks,
		Agents: []protocol.CampaignAgent{protocol.NewCampaignAgent(&agentspec.Spec{Name: "a", Version: "1", Command: []string{"true"}})}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if res, err := n.Store().Campaigns().Add([][]byte{camp}, vstore.SourceLocal, ""); err != nil || res[0].Status == vstore.StatusRefused {
			t.Fatalf("store the campaign: %+v %v", res, err)
		}
	}
}

// pinNet is the network of pinNetwork's document: a fresh home's (internal/home/config.go),
// which the campaign store checks a campaign against.
const pinNet = "evalmesh-dev"

// A lab that holds no grant of a sealed bundle's key does not count toward its factor
// (protocol.LedgerObject.Counting), on real nodes of three labs at factor 2: the bundle is
// granted to labs A and B; A added it, and C — which holds no grant, and may be a dishonest
// lab that keeps the ciphertext to make the factor look met while it cannot (or will not)
// score from it — holds it too and says so. Counted as all labs are, A and C would meet the
// factor and B would never fetch; so B's repair round must fetch and pin it, and then the
// factor is met by A and B, with C listed as not counting. Run under -race.
func TestRepairPinsCountsOnlyKeyHoldersForASealedBundle(t *testing.T) {
	ctx := context.Background()
	fs, nodes := pinNetwork(t, "laba", "labb", "labc")
	a, b, c := nodes[0], nodes[1], nodes[2]
	data := []byte("a sealed bundle's bytes: public/, task.yaml and private.age")
	bundle := putRaw(t, a, data)
	putRaw(t, c, data)
	camp, _, err := protocol.SignCampaign(fs[0].Lab, &protocol.Campaign{Network: pinNet, Title: "sealed", Seeds: 1, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(time.Hour), Tasks: []string{bundle.String()},
		Agents: []protocol.CampaignAgent{protocol.NewCampaignAgent(&agentspec.Spec{Name: "a", Version: "1", Command: []string{"true"}})}})
	if err != nil {
		t.Fatal(err)
	}
	var grants [][]byte
	for _, to := range fs[:2] {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		g, _, err := attest.NewGrant(fs[0].Node, fs[0].Cert, bundle.String(), to.Lab.ID, id.Recipient().String(), id.String(), attestgen.Base)
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, g)
	}
	for _, n := range nodes {
		if res, err := n.Store().Campaigns().Add([][]byte{camp}, vstore.SourceLocal, ""); err != nil || res[0].Status == vstore.StatusRefused {
			t.Fatalf("store the campaign: %+v %v", res, err)
		}
		if res, err := n.Store().Attestations().Add(grants, vstore.SourceLocal, ""); err != nil || res[0].Status == vstore.StatusRefused || res[1].Status == vstore.StatusRefused {
			t.Fatalf("store the grants: %+v %v", res, err)
		}
	}
	connect(t, a, b)
	connect(t, a, c)
	connect(t, b, c)
	for _, n := range []*Node{a, c} {
		sv, err := n.pins.RepairPins(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(sv.Fetched) != 0 || len(sv.Failed) != 0 {
			t.Errorf("a round on %s fetched %v (failed %v): it already holds the bundle", n.ID(), sv.Fetched, sv.Failed)
		}
	}
	sv, err := b.pins.RepairPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sv.Objects != 1 || sv.UnderFactor != 1 || len(sv.Fetched) != 1 || sv.Fetched[0] != bundle.String() {
		t.Fatalf("round on B: %+v; want the sealed bundle under its factor (held by A and keyless C) and fetched by B", sv)
	}
	if ok, err := b.IsPinned(ctx, bundle); err != nil || !ok || !b.pins.HoldsWhole(ctx, bundle) {
		t.Fatalf("B does not hold and pin %s after fetching it (%v)", bundle, err)
	}
	rep, err := c.pins.PinStatus(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fs[0].Lab.ID, fs[1].Lab.ID}
	if !rep.Met || rep.Factor != 2 || !slices.Equal(sortedCopy(rep.Holding), sortedCopy(want)) || !slices.Equal(rep.KeyLabs, sortedCopy(want)) {
		t.Errorf("pin status from C: met %v factor %d holding %v key labs %v; want met by %v", rep.Met, rep.Factor, rep.Holding, rep.KeyLabs, want)
	}
	for _, l := range rep.Labs {
		if wantCounts := l.Lab != fs[2].Lab.ID; l.Counts != wantCounts || !l.Holds {
			t.Errorf("pin status lab %s: holds %v counts %v; want it held, counting %v", l.Name, l.Holds, l.Counts, wantCounts)
		}
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

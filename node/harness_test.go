package node

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/node/vstore"

	"github.com/ipfs/boxo/blockstore"
	chunker "github.com/ipfs/boxo/chunker"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/multiformats/go-multihash"

	"github.com/evalmesh/evalmesh/internal/home"
)

// newHome makes an initialised home in a temp dir.
func newHome(t testing.TB) home.Home {
	t.Helper()
	h := home.Home{Dir: t.TempDir()}
	if _, err := h.Init(); err != nil {
		t.Fatal(err)
	}
	return h
}

// testStore is the blockstore kind the suite runs against: flat, or what
// EVALMESH_TEST_BLOCKSTORE names (TestSuiteOnPackStore reruns the suite with it set to pack).
var testStore = cmp.Or(os.Getenv("EVALMESH_TEST_BLOCKSTORE"), "flat")

// testBlocksDir is where a node in home h under the suite's store kind keeps its blocks.
func testBlocksDir(h home.Home) string {
	if testStore == "pack" {
		return h.PackBlocksDir()
	}
	return h.BlocksDir()
}

// testOptions listen on loopback TCP port 0 only.
func testOptions() Options {
	return Options{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, API: "127.0.0.1:0", StallTimeout: 20 * time.Second, Blockstore: testStore}
}

// startNode starts a real node on 127.0.0.1 in a fresh home; it is closed at test end.
func startNode(t testing.TB, opts Options) *Node {
	t.Helper()
	return startNodeAt(t, newHome(t), opts)
}

func startNodeAt(t testing.TB, h home.Home, opts Options) *Node {
	t.Helper()
	n, err := New(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// connect dials b from a and waits until both see the connection.
func connect(t *testing.T, a, b *Node) {
	t.Helper()
	if err := a.Connect(context.Background(), b.Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "connection", func() bool {
		return len(b.host.Network().ConnsToPeer(a.ID())) > 0
	})
}

// randomBytes is deterministic pseudo-random data.
func randomBytes(seed uint64, n int) []byte { return testutil.RandomBytes(seed, n) }

// importFile adds data as a UnixFS file with the bundle parameters (CIDv1, raw leaves,
// 256 KiB chunks, balanced layout) into dag.
func importFile(t testing.TB, dag ipld.DAGService, data []byte) ipld.Node {
	t.Helper()
	params := helpers.DagBuilderParams{
		Maxlinks:   helpers.DefaultLinksPerBlock,
		RawLeaves:  true,
		CidBuilder: cid.V1Builder{Codec: cid.DagProtobuf, MhType: multihash.SHA2_256},
		Dagserv:    dag,
	}
	db, err := params.New(chunker.NewSizeSplitter(bytes.NewReader(data), 256<<10))
	if err != nil {
		t.Fatal(err)
	}
	nd, err := balanced.Layout(db)
	if err != nil {
		t.Fatal(err)
	}
	return nd
}

// importDir adds a flat directory of named files.
func importDir(t testing.TB, dag ipld.DAGService, files map[string][]byte) cid.Cid {
	t.Helper()
	ctx := context.Background()
	dir, err := uio.NewDirectory(dag)
	if err != nil {
		t.Fatal(err)
	}
	dir.SetCidBuilder(cid.V1Builder{Codec: cid.DagProtobuf, MhType: multihash.SHA2_256})
	for name, data := range files {
		if err := dir.AddChild(ctx, name, importFile(t, dag, data)); err != nil {
			t.Fatal(err)
		}
	}
	nd, err := dir.GetNode()
	if err != nil {
		t.Fatal(err)
	}
	if err := dag.Add(ctx, nd); err != nil {
		t.Fatal(err)
	}
	return nd.Cid()
}

// readFile reads a UnixFS file back from dag.
func readFile(t *testing.T, dag ipld.DAGService, c cid.Cid) []byte {
	t.Helper()
	ctx := context.Background()
	nd, err := dag.Get(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := uio.NewDagReader(ctx, nd, dag)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corruptingStore serves wrong bytes for every block whose CID is in bad (the peer under
// test lies); it stores correctly.
type corruptingStore struct {
	blockstore.Blockstore
	bad func(cid.Cid) bool
}

func (s corruptingStore) Get(ctx context.Context, c cid.Cid) (blocks.Block, error) {
	b, err := s.Blockstore.Get(ctx, c)
	if err != nil || !s.bad(c) {
		return b, err
	}
	data := bytes.Clone(b.RawData())
	data[len(data)/2] ^= 0xff
	return blocks.NewBlockWithCid(data, c)
}

// DefaultTestConfig is the default config (loopback only).
func DefaultTestConfig() home.Config { return home.DefaultConfig() }

// syncLabs are two labs trusted by every node of the sync and heads tests.
type syncLabs struct {
	a, b  *attestgen.Fixture
	trust *attest.TrustStore
}

func newSyncLabs(t *testing.T) syncLabs {
	t.Helper()
	a, b, tr, err := attestgen.TrustedPair()
	if err != nil {
		t.Fatal(err)
	}
	return syncLabs{a, b, tr}
}

func (l syncLabs) options(so syncer.Options) Options {
	o := testOptions()
	o.Trust, o.Sync = l.trust, so
	return o
}

func addLocal(t *testing.T, n *Node, envs [][]byte) {
	t.Helper()
	res, err := n.Store().Attestations().Add(envs, vstore.SourceLocal, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != vstore.StatusNew {
			t.Fatalf("envelope %d of %d: %s, want new", i, len(envs), r.Status)
		}
	}
}

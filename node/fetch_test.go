package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/diskstore"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
)

// seed stores a directory bundle of files on each of the given nodes and pins it there.
func seed(t *testing.T, files map[string][]byte, seeders ...*Node) cid.Cid {
	t.Helper()
	var root cid.Cid
	for _, s := range seeders {
		r := importDir(t, s.LocalDAG(), files)
		if root.Defined() && r != root {
			t.Fatalf("same files gave different roots %s and %s", root, r)
		}
		root = r
		if err := s.pinLocal(context.Background(), root, "seed", false); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// checkFiles reads every file of the bundle from n's local blocks and compares it.
func checkFiles(t *testing.T, n *Node, root cid.Cid, files map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	nd, err := n.LocalDAG().Get(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(nd.Links()) != len(files) {
		t.Fatalf("bundle has %d entries, want %d", len(nd.Links()), len(files))
	}
	for _, l := range nd.Links() {
		got := readFile(t, n.LocalDAG(), l.Cid)
		if !bytes.Equal(got, files[l.Name]) {
			t.Fatalf("file %s: %d bytes differ from the %d seeded", l.Name, len(got), len(files[l.Name]))
		}
	}
}

func testFiles(sizes ...int) map[string][]byte {
	files := map[string][]byte{}
	for i, sz := range sizes {
		files[string(rune('a'+i))+".bin"] = randomBytes(uint64(i+1), sz)
	}
	return files
}

func TestFetchAddOnOneGetOnAnother(t *testing.T) {
	forEachPath(t, func(t *testing.T, testOptions func() Options) {
		a, b := startNode(t, testOptions()), startNode(t, testOptions())
		files := testFiles(3<<20+17, 1000, 0, 256<<10)
		files["dup.bin"] = files["a.bin"] // a repeated subtree is fetched once, counted twice
		root := seed(t, files, a)
		connect(t, b, a)

		var last, total atomic.Int64
		if err := b.Pin(context.Background(), root, "got", func(d, tot int64) { last.Store(d); total.Store(tot) }); err != nil {
			t.Fatal(err)
		}
		checkFiles(t, b, root, files)
		if last.Load() != total.Load() || total.Load() < 6<<20 {
			t.Fatalf("progress ended at %d of %d bytes, want equal and ≥ 6 MiB", last.Load(), total.Load())
		}
		if ok, err := b.IsPinned(context.Background(), root); err != nil || !ok {
			t.Fatalf("fetched bundle not pinned: %v %v", ok, err)
		}
	})
}

func TestFetchFromTwoSeeders(t *testing.T) {
	forEachPath(t, func(t *testing.T, testOptions func() Options) {
		s1, s2, b := startNode(t, testOptions()), startNode(t, testOptions()), startNode(t, testOptions())
		files := testFiles(4<<20, 2<<20, 100<<10)
		root := seed(t, files, s1, s2)
		connect(t, b, s1)
		connect(t, b, s2)
		if err := b.Fetch(context.Background(), root, nil); err != nil {
			t.Fatal(err)
		}
		checkFiles(t, b, root, files)
		for i, s := range []*Node{s1, s2} {
			st, _ := s.bswap.Stat()
			t.Logf("seeder %d sent %d blocks", i+1, st.BlocksSent)
		}
	})
}

func TestFetchSeederLeavesMidTransfer(t *testing.T) {
	forEachPath(t, func(t *testing.T, testOptions func() Options) {
		s1, s2, b := startNode(t, testOptions()), startNode(t, testOptions()), startNode(t, testOptions())
		files := testFiles(8 << 20)
		root := seed(t, files, s1, s2)
		connect(t, b, s1)
		connect(t, b, s2)
		// s1 goes away once a quarter of the bundle has arrived; the receiver waits for that.
		var once sync.Once
		closed := make(chan error, 1)
		err := b.Fetch(context.Background(), root, func(d, tot int64) {
			if d > tot/4 {
				once.Do(func() {
					go func() { closed <- s1.Close() }()
					testutil.WaitFor(t, 10*time.Second, "seeder 1 to stop", func() bool { return len(b.host.Network().ConnsToPeer(s1.ID())) == 0 })
				})
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("close seeder 1: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("seeder 1 was never closed: the test did not exercise a departure")
		}
		checkFiles(t, b, root, files)
	})
}

func TestFetchRejectsCorruptBlocks(t *testing.T) {
	forEachPath(t, func(t *testing.T, testOptions func() Options) {
		liarOpts := testOptions()
		liarOpts.WrapBlockstore = func(bs blockstore.Blockstore) blockstore.Blockstore {
			return corruptingStore{bs, func(c cid.Cid) bool { return c.Type() == cid.Raw }}
		}
		liar, honest, b := startNode(t, liarOpts), startNode(t, testOptions()), startNode(t, testOptions())
		files := testFiles(2<<20, 300<<10)
		root := seed(t, files, liar, honest)

		// From the liar alone, nothing corrupt is accepted: the fetch stalls and says so.
		onlyLiar := testOptions()
		onlyLiar.StallTimeout = 2 * time.Second
		b2 := startNode(t, onlyLiar)
		connect(t, b2, liar)
		err := b2.Fetch(context.Background(), root, nil)
		if err == nil || !strings.Contains(err.Error(), "no connected peer sent") {
			t.Fatalf("fetch from a corrupting peer only: err = %v, want a stall naming the missing block", err)
		}
		bad := 0
		ch, _ := b2.Blockstore().AllKeysChan(context.Background())
		for c := range ch {
			blk, err := b2.Blockstore().Get(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := c.Prefix().Sum(blk.RawData()); !got.Equals(c) {
				bad++
			}
		}
		if bad > 0 {
			t.Fatalf("%d stored blocks do not match their CIDs", bad)
		}

		// With an honest peer too, the fetch completes and every block verifies.
		connect(t, b, liar)
		connect(t, b, honest)
		if err := b.Fetch(context.Background(), root, nil); err != nil {
			t.Fatal(err)
		}
		checkFiles(t, b, root, files)
	})
}

func TestPinSurvivesRestart(t *testing.T) {
	h := newHome(t)
	a := startNodeAt(t, h, testOptions())
	files := testFiles(1<<20, 5)
	root := seed(t, files, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := startNodeAt(t, h, testOptions())
	if ok, err := a2.IsPinned(context.Background(), root); err != nil || !ok {
		t.Fatalf("pin lost across restart: %v %v", ok, err)
	}
	b := startNode(t, testOptions())
	connect(t, b, a2)
	if err := b.Fetch(context.Background(), root, nil); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, b, root, files)
}

func TestFetchRefusesOversizedBundle(t *testing.T) {
	a := startNode(t, testOptions())
	small := testOptions()
	cfg := DefaultTestConfig()
	cfg.MaxBundleSize = 1 << 20
	small.Config = &cfg
	b := startNode(t, small)
	root := seed(t, testFiles(2<<20), a)
	connect(t, b, a)
	err := b.Fetch(context.Background(), root, nil)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

// forEachPath runs a transfer test over the streaming protocol (with bitswap as fallback) and
// over bitswap alone.
func forEachPath(t *testing.T, test func(t *testing.T, testOptions func() Options)) {
	for _, bitswapOnly := range []bool{false, true} {
		name := "xfer"
		if bitswapOnly {
			name = "bitswap"
		}
		t.Run(name, func(t *testing.T) {
			test(t, func() Options {
				o := testOptions()
				o.BitswapOnly = bitswapOnly
				return o
			})
		})
	}
}

// TestPinRefusesIncompleteDAG: the pin's completeness walk checks raw leaves by presence, so
// a missing leaf still stops the pin.
func TestPinRefusesIncompleteDAG(t *testing.T) {
	n := startNode(t, testOptions())
	files := testFiles(1 << 20)
	root := importDir(t, n.LocalDAG(), files)
	file, _ := n.LocalDAG().Get(context.Background(), root)
	leafParent, _ := n.LocalDAG().Get(context.Background(), file.Links()[0].Cid)
	leaf := leafParent.Links()[2].Cid
	if leaf.Type() != cid.Raw {
		t.Fatalf("expected a raw leaf, got %s", leaf)
	}
	if err := n.Blockstore().DeleteBlock(context.Background(), leaf); err != nil {
		t.Fatal(err)
	}
	if err := n.pinLocal(context.Background(), root, "x", false); err == nil {
		t.Fatal("pinned a DAG with a missing leaf")
	}
}

// TestFetchLocalNeedsNoPeer: a DAG already complete here is "fetched" with no peer at all.
func TestFetchLocalNeedsNoPeer(t *testing.T) {
	opts := testOptions()
	opts.StallTimeout = time.Second
	n := startNode(t, opts)
	files := testFiles(1<<20, 10)
	root := importDir(t, n.LocalDAG(), files)
	var last, total int64
	if err := n.Fetch(context.Background(), root, func(d, t int64) { last, total = d, t }); err != nil {
		t.Fatal(err)
	}
	if last != total || total == 0 {
		t.Fatalf("progress %d/%d", last, total)
	}
}

// TestPinRefetchesMissingLeaf: Pin records the pin without the pinner's walk only after
// Fetch established completeness, so a DAG with a leaf gone from the store is not pinned
// while no peer can supply the leaf, and is pinned complete once one can.
func TestPinRefetchesMissingLeaf(t *testing.T) {
	opts := testOptions()
	opts.StallTimeout = 2 * time.Second
	n := startNode(t, opts)
	files := testFiles(1 << 20)
	root := importDir(t, n.LocalDAG(), files)
	file, _ := n.LocalDAG().Get(context.Background(), root)
	leafParent, _ := n.LocalDAG().Get(context.Background(), file.Links()[0].Cid)
	leaf := leafParent.Links()[1].Cid
	if err := n.Blockstore().DeleteBlock(context.Background(), leaf); err != nil {
		t.Fatal(err)
	}
	if err := n.Pin(context.Background(), root, "x", nil); err == nil {
		t.Fatal("pinned a DAG with a missing leaf and no peer to fetch it from")
	}
	if ok, _ := n.IsPinned(context.Background(), root); ok {
		t.Fatal("a failed Pin left a pin")
	}
	seeder := startNode(t, testOptions())
	seed(t, files, seeder)
	connect(t, n, seeder)
	if err := n.Pin(context.Background(), root, "x", nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.Blockstore().Has(context.Background(), leaf); err != nil || !ok {
		t.Fatalf("pinned without the missing leaf: has = %v, %v", ok, err)
	}
	checkFiles(t, n, root, files)
}

// TestImportCARChecksCompleteness: a CAR's blocks need not cover its root's DAG, so its pin
// keeps the pinner's completeness walk: a CAR holding only the root block is refused.
func TestImportCARChecksCompleteness(t *testing.T) {
	a, b := startNode(t, testOptions()), startNode(t, testOptions())
	root := seed(t, testFiles(600<<10), a)
	var car bytes.Buffer
	if err := a.ExportCAR(context.Background(), root, &car); err != nil {
		t.Fatal(err)
	}
	// Keep the CARv1 header and its first section (the root block, written first).
	data := car.Bytes()
	hl, k := binary.Uvarint(data)
	end := k + int(hl)
	sl, k2 := binary.Uvarint(data[end:])
	end += k2 + int(sl)
	if _, err := b.ImportCAR(context.Background(), bytes.NewReader(data[:end])); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("import of a CAR with only the root block: err = %v, want it refused as incomplete", err)
	}
	if ok, _ := b.IsPinned(context.Background(), root); ok {
		t.Fatal("an incomplete CAR was pinned")
	}
}

// TestFetchRepairsTornLeaf: a leaf file of the wrong length (what a power loss before the
// blocks were synced can leave) does not make the local DAG complete: Fetch gets it again
// from a peer and the bundle reads back intact.
func TestFetchRepairsTornLeaf(t *testing.T) {
	if testStore != "flat" {
		t.Skip("flat store only: the pack store never indexes unsynced bytes (TestPackStoreUnsyncedTail)")
	}
	a, b := startNode(t, testOptions()), startNode(t, testOptions())
	files := testFiles(1 << 20)
	root := seed(t, files, a)
	connect(t, b, a)
	if err := b.Fetch(context.Background(), root, nil); err != nil {
		t.Fatal(err)
	}
	file, _ := b.LocalDAG().Get(context.Background(), root)
	leafParent, _ := b.LocalDAG().Get(context.Background(), file.Links()[0].Cid)
	leaf := leafParent.Links()[0].Cid
	if err := os.Truncate(b.store.(*diskstore.Flat).File(leaf), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Fetch(context.Background(), root, nil); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, b, root, files)
}

// wedgedOnceExchange never answers its first request for blocks, as a wedged bitswap session
// does, and serves every later one from src.
type wedgedOnceExchange struct {
	src   blockstore.Blockstore
	calls atomic.Int32
}

func (e *wedgedOnceExchange) GetBlock(ctx context.Context, c cid.Cid) (blocks.Block, error) {
	return e.src.Get(ctx, c)
}

func (e *wedgedOnceExchange) GetBlocks(ctx context.Context, ks []cid.Cid) (<-chan blocks.Block, error) {
	out := make(chan blocks.Block)
	first := e.calls.Add(1) == 1
	go func() {
		defer close(out)
		if first {
			<-ctx.Done()
			return
		}
		for _, k := range ks {
			b, err := e.src.Get(ctx, k)
			if err != nil {
				return
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (e *wedgedOnceExchange) NotifyNewBlocks(context.Context, ...blocks.Block) error { return nil }
func (e *wedgedOnceExchange) Close() error                                           { return nil }

// A session that delivers nothing is replaced once no block came for a quarter of the stall
// timeout, on the node's clock: what is still wanted is asked for again through a new session,
// and arrives, instead of the fetch failing at the stall timeout (see fetchRun.receive).
func TestFetchRenewsAWedgedSession(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
	src := blockstore.NewBlockstore(dssync.MutexWrap(datastore.NewMapDatastore()))
	var ask []cid.Cid
	want := map[cid.Cid]struct{}{}
	for i := range 3 {
		b := blocks.NewBlock(randomBytes(uint64(i), 100))
		if err := src.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		ask = append(ask, b.Cid())
		want[b.Cid()] = struct{}{}
	}
	ex := &wedgedOnceExchange{src: src}
	local := blockstore.NewBlockstore(dssync.MutexWrap(datastore.NewMapDatastore()))
	n := &Node{opts: Options{Clock: fake, Logf: t.Logf}, bserv: blockservice.New(local, ex)}
	f := &fetchRun{n: n, stall: 20 * time.Second}
	f.ctx, f.cancel = context.WithCancelCause(ctx)
	defer f.cancel(nil)
	f.touch()
	f.newSession()
	defer func() { f.endSess() }()

	var got atomic.Int32
	done := make(chan error, 1)
	go func() { done <- f.receive(ask, want, func(blocks.Block) error { got.Add(1); return nil }) }()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // receive's ticker
		t.Fatal(err)
	}
	fake.Advance(6 * time.Second) // past a quarter of the stall timeout, well before all of it
	var err error
	testutil.WaitFor(t, 10*time.Second, "the blocks through a new session", func() bool {
		select {
		case err = <-done:
			return true
		default:
			fake.Advance(2 * time.Second) // the next ticks: the new session asks on one
			return false
		}
	})
	// The fake clock runs on while the new session delivers, so a slow one may be renewed again.
	if err != nil || got.Load() != 3 || len(want) != 0 || ex.calls.Load() < 2 {
		t.Fatalf("receive: err %v, %d blocks, %d still wanted, %d requests to the exchange; want nil, 3, 0, at least 2", err, got.Load(), len(want), ex.calls.Load())
	}
}

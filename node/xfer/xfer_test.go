package xfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/node/xfer/xfertest"
	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"
)

type node struct {
	h   host.Host
	bs  blockstore.Blockstore
	srv *Server
}

func newNode(t *testing.T, bs blockstore.Blockstore) *node {
	t.Helper()
	h, err := xfertest.NewHost()
	if err != nil {
		t.Fatal(err)
	}
	if bs == nil {
		bs = xfertest.MemBlockstore()
	}
	n := &node{h: h, bs: bs, srv: NewServer(h, bs)}
	t.Cleanup(func() {
		n.srv.Close()
		h.Close()
	})
	return n
}

func connect(t *testing.T, a *node, others ...*node) []peer.ID {
	t.Helper()
	var ids []peer.ID
	for _, o := range others {
		if err := xfertest.Connect(context.Background(), a.h, o.h); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.h.ID())
	}
	return ids
}

func randBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	r.Read(b)
	return b
}

// addFile imports n random bytes into every given store and returns the root.
func addFile(t *testing.T, seed uint64, n int, stores ...blockstore.Blockstore) cid.Cid {
	t.Helper()
	data := randBytes(seed, n)
	var root cid.Cid
	for _, bs := range stores {
		c, err := xfertest.AddFile(xfertest.DAGService(bs), bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		root = c
	}
	return root
}

// requireComplete checks that dst holds every block of root's DAG in src, byte for byte.
func requireComplete(t *testing.T, src, dst blockstore.Blockstore, root cid.Cid) {
	t.Helper()
	ctx := context.Background()
	cids, err := xfertest.AllCIDs(ctx, src, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cids {
		want, err := src.Get(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.Get(ctx, c)
		if err != nil {
			t.Fatalf("block %s missing after fetch: %v", c, err)
		}
		if !bytes.Equal(want.RawData(), got.RawData()) {
			t.Fatalf("block %s differs after fetch", c)
		}
	}
}

// requireAllVerified checks that every block in bs hashes to its key: nothing unverified was stored.
func requireAllVerified(t *testing.T, bs blockstore.Blockstore) int {
	t.Helper()
	ctx := context.Background()
	ch, err := bs.AllKeysChan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for c := range ch {
		b, err := bs.Get(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(c, b.RawData()); err != nil {
			t.Fatalf("store holds a bad block: %v", err)
		}
		n++
	}
	return n
}

func TestFetchOnePeer(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T, bs blockstore.Blockstore) cid.Cid
	}{
		{"single raw block", func(t *testing.T, bs blockstore.Blockstore) cid.Cid { return addFile(t, 1, 100, bs) }},
		{"empty file", func(t *testing.T, bs blockstore.Blockstore) cid.Cid { return addFile(t, 1, 0, bs) }},
		{"two-level file", func(t *testing.T, bs blockstore.Blockstore) cid.Cid { return addFile(t, 2, 3<<20+17, bs) }},
		{"three-level file", func(t *testing.T, bs blockstore.Blockstore) cid.Cid { return addFile(t, 3, 175<<18, bs) }},
		{"directory with duplicate files", func(t *testing.T, bs blockstore.Blockstore) cid.Cid {
			return addTree(t, bs, map[string][]byte{
				"a":       randBytes(4, 5000),
				"b/c":     randBytes(4, 5000), // same content as a
				"b/d":     randBytes(5, 600<<10),
				"b/e/f":   randBytes(5, 600<<10),
				"b/empty": nil,
			})
		}},
	}
	for _, tt := range tests {
		for _, streams := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/%d streams", tt.name, streams), func(t *testing.T) {
				fetchOnePeer(t, tt.build, streams)
			})
		}
	}
}

func fetchOnePeer(t *testing.T, build func(t *testing.T, bs blockstore.Blockstore) cid.Cid, streams int) {
	seed, getter := newNode(t, nil), newNode(t, nil)
	root := build(t, seed.bs)
	peers := connect(t, getter, seed)
	var got atomic.Int64
	st, err := FetchWithStats(context.Background(), getter.h, root, peers, getter.bs, func(n int64) {
		if n < got.Load() {
			t.Errorf("progress went from %d to %d", got.Load(), n)
		}
		got.Store(n)
	}, WithStreamsPerPeer(streams), WithBatchBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	requireComplete(t, seed.bs, getter.bs, root)
	if got.Load() != st.Bytes || st.PerPeer[seed.h.ID()].Bytes != st.Bytes {
		t.Fatalf("progress saw %d bytes, stats %+v", got.Load(), st)
	}
}

// addTree imports files (path → content) as a UnixFS directory via a temp dir.
func addTree(t *testing.T, bs blockstore.Blockstore, files map[string][]byte) cid.Cid {
	t.Helper()
	dir := t.TempDir()
	for p, data := range files {
		writeFile(t, dir, p, data)
	}
	c, err := xfertest.AddDir(context.Background(), xfertest.DAGService(bs), dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFetchTwoPeers(t *testing.T) {
	a, b, getter := newNode(t, nil), newNode(t, nil), newNode(t, nil)
	root := addFile(t, 7, 16<<20, a.bs, b.bs)
	peers := connect(t, getter, a, b)
	st, err := FetchWithStats(context.Background(), getter.h, root, peers, getter.bs, nil, WithBatchBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	requireComplete(t, a.bs, getter.bs, root)
	for _, n := range []*node{a, b} {
		if st.PerPeer[n.h.ID()].Blocks == 0 {
			t.Errorf("peer %s delivered nothing; want the DAG split across both: %+v", n.h.ID(), st.PerPeer)
		}
	}
	if len(st.Dropped) != 0 {
		t.Errorf("peers dropped: %v", st.Dropped)
	}
}

func TestPeerDisappearsMidTransfer(t *testing.T) {
	a, b, getter := newNode(t, nil), newNode(t, nil), newNode(t, nil)
	root := addFile(t, 8, 32<<20, a.bs, b.bs)
	peers := connect(t, getter, a, b)
	var once sync.Once
	hook := func(p peer.ID) {
		if p == b.h.ID() {
			// Closing b's host in b's receiving goroutine: the rest of b's stream is lost.
			once.Do(func() { b.h.Close() })
		}
	}
	st, err := FetchWithStats(context.Background(), getter.h, root, peers, getter.bs, nil,
		WithBatchBytes(1<<20), func(c *fetchConfig) { c.onBlock = hook })
	if err != nil {
		t.Fatal(err)
	}
	requireComplete(t, a.bs, getter.bs, root)
	if _, ok := st.Dropped[b.h.ID()]; !ok {
		t.Fatalf("peer b closed mid-transfer but was not dropped: %+v", st)
	}
	if st.PerPeer[b.h.ID()].Blocks == 0 {
		t.Fatalf("b delivered nothing before closing; the test did not exercise a mid-transfer loss")
	}
}

// corruptStore flips a byte of every block it returns for which bad(c) holds.
type corruptStore struct {
	blockstore.Blockstore
	bad func(cid.Cid) bool
}

func (s corruptStore) Get(ctx context.Context, c cid.Cid) (blocks.Block, error) {
	b, err := s.Blockstore.Get(ctx, c)
	if err != nil || !s.bad(c) {
		return b, err
	}
	d := bytes.Clone(b.RawData())
	if len(d) == 0 {
		d = []byte{1}
	} else {
		d[len(d)/2] ^= 0xff
	}
	return blocks.NewBlockWithCid(d, c)
}

func TestCorruptPeerIsDropped(t *testing.T) {
	tests := []struct {
		name string
		bad  func(cid.Cid) bool
	}{
		{"every block", func(cid.Cid) bool { return true }},
		{"leaves only", func(c cid.Cid) bool { return c.Type() == cid.Raw }},
		// Leaves are hashed in pairs (readPair): every other leaf bad puts a bad block first
		// in some pairs and second in others, whatever batches the leaves fall into.
		{"even leaves", func(c cid.Cid) bool { return c.Type() == cid.Raw && leafIndex[c.KeyString()]%2 == 0 }},
		{"odd leaves", func(c cid.Cid) bool { return c.Type() == cid.Raw && leafIndex[c.KeyString()]%2 == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := newNode(t, nil)
			evilBS := xfertest.MemBlockstore()
			evil := newNode(t, corruptStore{evilBS, tt.bad})
			getter := newNode(t, nil)
			root := addFile(t, 9, 8<<20, good.bs, evilBS)
			indexLeaves(t, good.bs, root)
			// The evil peer is first, so it is asked first.
			peers := connect(t, getter, evil, good)
			st, err := FetchWithStats(context.Background(), getter.h, root, peers, getter.bs, nil, WithBatchBytes(1<<20))
			if err != nil {
				t.Fatal(err)
			}
			requireComplete(t, good.bs, getter.bs, root)
			why, ok := st.Dropped[evil.h.ID()]
			if !ok || !strings.Contains(why.Error(), "does not match its CID") {
				t.Fatalf("evil peer not dropped for a bad block: %+v", st.Dropped)
			}
			if st.PerPeer[evil.h.ID()].Bytes != 0 && tt.name == "every block" {
				t.Fatalf("stats credit the evil peer with verified bytes: %+v", st.PerPeer)
			}
			requireAllVerified(t, getter.bs)
		})
	}
}

// leafIndex is each raw leaf's position among the leaves of the DAG indexLeaves last walked.
var leafIndex map[string]int

func indexLeaves(t *testing.T, bs blockstore.Blockstore, root cid.Cid) {
	t.Helper()
	cids, err := xfertest.AllCIDs(context.Background(), bs, root)
	if err != nil {
		t.Fatal(err)
	}
	leafIndex = map[string]int{}
	for _, c := range cids {
		if c.Type() == cid.Raw {
			leafIndex[c.KeyString()] = len(leafIndex)
		}
	}
}

// Full leaves that follow each other in a response are hashed two at a time
// (internal/sha256x2), and what is stored is byte for byte the sender's.
func TestFetchHashesLeavesInPairs(t *testing.T) {
	src, getter := newNode(t, nil), newNode(t, nil)
	root := addFile(t, 12, 8<<20+5, src.bs)
	peers := connect(t, getter, src)
	before := pairsHashed.Load()
	if err := Fetch(context.Background(), getter.h, root, peers, getter.bs, nil); err != nil {
		t.Fatal(err)
	}
	requireComplete(t, src.bs, getter.bs, root)
	requireAllVerified(t, getter.bs)
	// 32 full leaves and a 5-byte one: at least 15 pairs, however they fall into batches.
	if n := pairsHashed.Load() - before; n < 15 {
		t.Fatalf("%d pairs of leaves hashed together, want at least 15 of the 32 full leaves", n)
	}
}

func TestAllPeersBad(t *testing.T) {
	evilBS1, evilBS2 := xfertest.MemBlockstore(), xfertest.MemBlockstore()
	all := func(cid.Cid) bool { return true }
	e1, e2 := newNode(t, corruptStore{evilBS1, all}), newNode(t, corruptStore{evilBS2, all})
	getter := newNode(t, nil)
	root := addFile(t, 10, 2<<20, evilBS1, evilBS2)
	peers := connect(t, getter, e1, e2)
	err := Fetch(context.Background(), getter.h, root, peers, getter.bs, nil)
	if err == nil {
		t.Fatal("fetch from two corrupt peers succeeded")
	}
	for _, want := range []string{root.String(), "does not match its CID", "every peer failed", e1.h.ID().String(), e2.h.ID().String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if n := requireAllVerified(t, getter.bs); n != 0 {
		t.Errorf("%d blocks stored from corrupt peers", n)
	}
	t.Logf("error: %v", err)
}

func TestPeerLacksBlocks(t *testing.T) {
	partial, getter := newNode(t, nil), newNode(t, nil)
	full := xfertest.MemBlockstore()
	root := addFile(t, 11, 1<<20, full)
	// partial has the root only.
	rb, err := full.Get(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if err := partial.bs.Put(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	peers := connect(t, getter, partial)
	err = Fetch(context.Background(), getter.h, root, peers, getter.bs, nil)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("want a not-found error naming the block, got %v", err)
	}
}

func TestNoPeers(t *testing.T) {
	getter := newNode(t, nil)
	c := addFile(t, 12, 10, xfertest.MemBlockstore())
	err := Fetch(context.Background(), getter.h, c, nil, getter.bs, nil)
	if err == nil || !strings.Contains(err.Error(), "no peers") {
		t.Fatalf("got %v", err)
	}
}

// failingStore fails every write, as a full disk does.
type failingStore struct{ blockstore.Blockstore }

var errDiskFull = errors.New("no space left on device")

func (failingStore) Put(context.Context, blocks.Block) error       { return errDiskFull }
func (failingStore) PutMany(context.Context, []blocks.Block) error { return errDiskFull }

func TestStoreFailureStopsFetch(t *testing.T) {
	seed, getter := newNode(t, nil), newNode(t, nil)
	root := addFile(t, 13, 4<<20, seed.bs)
	peers := connect(t, getter, seed)
	st, err := FetchWithStats(context.Background(), getter.h, root, peers, failingStore{getter.bs}, nil)
	if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "storing blocks") {
		t.Fatalf("want the store error, got %v", err)
	}
	if len(st.Dropped) != 0 {
		t.Fatalf("a local store failure must not blame peers: %v", st.Dropped)
	}
}

func TestCancel(t *testing.T) {
	seed, getter := newNode(t, nil), newNode(t, nil)
	root := addFile(t, 14, 8<<20, seed.bs)
	peers := connect(t, getter, seed)
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	err := Fetch(ctx, getter.h, root, peers, getter.bs, func(int64) { once.Do(cancel) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

// TestServerCloseWaits checks that Close returns only after in-flight requests stop, and that
// a closed server no longer answers.
func TestServerClosed(t *testing.T) {
	seed, getter := newNode(t, nil), newNode(t, nil)
	root := addFile(t, 15, 1<<20, seed.bs)
	peers := connect(t, getter, seed)
	if err := seed.srv.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Fetch(ctx, getter.h, root, peers, getter.bs, nil)
	if err == nil || !strings.Contains(err.Error(), "every peer failed") {
		t.Fatalf("want failure from a closed server, got %v", err)
	}
}

func TestVerify(t *testing.T) {
	data := []byte("hello")
	sum, _ := mh.Sum(data, mh.SHA2_256, -1)
	c := cid.NewCidV1(cid.Raw, sum)
	if err := Verify(c, data); err != nil {
		t.Fatal(err)
	}
	if err := Verify(c, []byte("hellp")); err == nil {
		t.Fatal("corrupt data verified")
	}
	id, _ := mh.Sum(data, mh.IDENTITY, -1)
	if err := Verify(cid.NewCidV1(cid.Raw, id), data); err != nil {
		t.Fatal(err)
	}
}

func TestServerReadAhead(t *testing.T) {
	for _, ra := range []int{0, 1, 8} {
		t.Run(fmt.Sprint(ra), func(t *testing.T) {
			h, err := xfertest.NewHost()
			if err != nil {
				t.Fatal(err)
			}
			seed := &node{h: h, bs: xfertest.MemBlockstore()}
			seed.srv = NewServer(h, seed.bs, WithReadAhead(ra))
			t.Cleanup(func() { seed.srv.Close(); h.Close() })
			getter := newNode(t, nil)
			root := addTree(t, seed.bs, map[string][]byte{
				"a":   randBytes(20, 3<<20),
				"b/a": randBytes(20, 3<<20), // same blocks again: sent once per stream
				"c":   randBytes(21, 100),
				"d/e": nil,
			})
			peers := connect(t, getter, seed)
			if err := Fetch(context.Background(), getter.h, root, peers, getter.bs, nil); err != nil {
				t.Fatal(err)
			}
			requireComplete(t, seed.bs, getter.bs, root)
		})
	}
}

// An interrupted fetch left part of the DAG in the store (here: the first blocks in DAG
// order, as a fetch killed part way leaves them); fetching again asks only for the rest.
func TestFetchResumesFromKeptBlocks(t *testing.T) {
	ctx := context.Background()
	for _, keep := range []float64{0.5, 0.9, 1} {
		t.Run(fmt.Sprintf("%.0f%% kept", 100*keep), func(t *testing.T) {
			seed, getter := newNode(t, nil), newNode(t, nil)
			root := addFile(t, 11, 175<<18, seed.bs)
			cids, err := xfertest.AllCIDs(ctx, seed.bs, root)
			if err != nil {
				t.Fatal(err)
			}
			var total, kept int64
			for i, c := range cids {
				b, err := seed.bs.Get(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				total += int64(len(b.RawData()))
				if float64(i) < keep*float64(len(cids)) {
					if err := getter.bs.Put(ctx, b); err != nil {
						t.Fatal(err)
					}
					kept += int64(len(b.RawData()))
				}
			}
			peers := connect(t, getter, seed)
			var last atomic.Int64
			st, err := FetchWithStats(ctx, getter.h, root, peers, getter.bs, func(n int64) { last.Store(n) }, WithBatchBytes(1<<20))
			if err != nil {
				t.Fatal(err)
			}
			requireComplete(t, seed.bs, getter.bs, root)
			if st.KeptBytes != kept {
				t.Fatalf("kept %d bytes, want the %d the store held", st.KeptBytes, kept)
			}
			if keep == 1 && st.Bytes != 0 {
				t.Fatalf("everything was held, yet %d bytes were fetched", st.Bytes)
			}
			if st.Bytes >= total || st.Bytes+st.KeptBytes < total {
				t.Fatalf("fetched %d + kept %d bytes of %d: want only what was missing fetched", st.Bytes, st.KeptBytes, total)
			}
			if last.Load() != st.Bytes+st.KeptBytes {
				t.Fatalf("progress ended at %d, want kept + fetched = %d", last.Load(), st.Bytes+st.KeptBytes)
			}
		})
	}
}

// FetchManyWithStats fetches many DAGs in one transfer: every block of each arrives
// verified, the small ones share requests (fewer requests than DAGs: the point of it), one
// whose root the getter already holds is fetched from below its root, and one it holds whole
// is counted as kept, not asked for again.
func TestFetchManyDAGsTogether(t *testing.T) {
	seed, getter := newNode(t, nil), newNode(t, nil)
	var roots []cid.Cid
	for i := range 40 {
		roots = append(roots, addFile(t, uint64(100+i), 3000+i, seed.bs))
	}
	big := addFile(t, 200, 3<<20+5, seed.bs)
	roots = append(roots, big)
	// The getter holds the big file's root block (a repair round's want list brought it) and
	// the first small file whole.
	rb, err := seed.bs.Get(context.Background(), big)
	if err != nil {
		t.Fatal(err)
	}
	if err := getter.bs.Put(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	kept := addFile(t, 100, 3000, getter.bs)
	peers := connect(t, getter, seed)
	var requests atomic.Int64
	seed.h.SetStreamHandler(ProtocolID, func(st network.Stream) { requests.Add(1); seed.srv.handle(st) })
	st, err := FetchManyWithStats(context.Background(), getter.h, roots, peers, getter.bs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range roots {
		requireComplete(t, seed.bs, getter.bs, r)
	}
	if st.KeptBlocks != 2 {
		t.Errorf("kept %d blocks, want 2 (the big file's root, the small file %s)", st.KeptBlocks, kept)
	}
	t.Logf("%d DAGs in %d requests", len(roots)-1, requests.Load())
	if n := requests.Load(); n == 0 || n >= int64(len(roots)-1) {
		t.Errorf("%d requests for %d DAGs: want them batched", n, len(roots)-1)
	}
}

package diskstore

import (
	"context"
	"os"
	"testing"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

func rawBlock(t *testing.T, data []byte) blocks.Block {
	t.Helper()
	c, err := cid.V1Builder{Codec: cid.Raw, MhType: multihash.SHA2_256}.Sum(data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := blocks.NewBlockWithCid(data, c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFlatStoreRewritesTornBlock: a file of the wrong length under a block's final name (what
// a power loss before Sync can leave) does not count as the block: Put writes it again and
// Sync then covers it.
func TestFlatStoreRewritesTornBlock(t *testing.T) {
	ctx := context.Background()
	s, err := OpenFlat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := rawBlock(t, testutil.RandomBytes(7, 256<<10))
	if err := s.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(s.File(b.Cid()), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if len(s.dirty) != 1 || s.dirty[0] != s.File(b.Cid()) {
		t.Fatalf("rewritten block not queued for Sync: dirty = %v", s.dirty)
	}
	got, err := s.Get(ctx, b.Cid())
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := b.Cid().Prefix().Sum(got.RawData()); !sum.Equals(b.Cid()) {
		t.Fatal("torn block was kept: its bytes do not hash to its CID")
	}
}

// TestFlatStoreSyncCoversWhatWasWritten: Sync flushes exactly the files and directories
// written since the previous Sync (a second Put of a stored block adds nothing), then forgets
// them; a store reopened over them reads every block.
func TestFlatStoreSyncCoversWhatWasWritten(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenFlat(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bs []blocks.Block
	for i := range 40 {
		bs = append(bs, rawBlock(t, testutil.RandomBytes(uint64(i), 1000+i)))
	}
	if err := s.PutMany(ctx, bs); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMany(ctx, bs[:5]); err != nil {
		t.Fatal(err)
	}
	if len(s.dirty) != len(bs) {
		t.Fatalf("dirty files = %d, want %d (one per block written)", len(s.dirty), len(bs))
	}
	if _, ok := s.dirtyDirs[dir]; !ok {
		t.Fatal("new shard directories did not mark the store's root for fsync")
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(s.dirty) != 0 || len(s.dirtyDirs) != 0 {
		t.Fatalf("after Sync: %d files, %d dirs still dirty", len(s.dirty), len(s.dirtyDirs))
	}
	s2, err := OpenFlat(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		got, err := s2.Get(ctx, b.Cid())
		if err != nil || string(got.RawData()) != string(b.RawData()) {
			t.Fatalf("block %s after reopen: %v", b.Cid(), err)
		}
	}
	// Past maxDirty the store stops listing files and Sync falls back to syncfs.
	s.mu.Lock()
	s.overflow = true
	s.mu.Unlock()
	if err := s.Sync(); err != nil || s.overflow {
		t.Fatalf("overflow Sync: err %v, overflow still %v", err, s.overflow)
	}
}

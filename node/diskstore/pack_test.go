package diskstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"golang.org/x/sys/unix"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

func openPackT(t *testing.T, dir string) *Pack {
	t.Helper()
	s, err := OpenPack(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustHave(t *testing.T, s *Pack, bs []blocks.Block) {
	t.Helper()
	for _, b := range bs {
		got, err := s.Get(context.Background(), b.Cid())
		if err != nil || string(got.RawData()) != string(b.RawData()) {
			t.Fatalf("block %s: %v", b.Cid(), err)
		}
		if n, err := s.GetSize(context.Background(), b.Cid()); err != nil || n != len(b.RawData()) {
			t.Fatalf("GetSize %s = %d, %v; want %d", b.Cid(), n, err, len(b.RawData()))
		}
	}
}

func mustMiss(t *testing.T, s *Pack, bs []blocks.Block) {
	t.Helper()
	for _, b := range bs {
		if ok, _ := s.Has(context.Background(), b.Cid()); ok {
			t.Fatalf("block %s present, want missing", b.Cid())
		}
		if _, err := s.Get(context.Background(), b.Cid()); !ipld.IsNotFound(err) {
			t.Fatalf("Get %s: err = %v, want not found", b.Cid(), err)
		}
	}
}

func testBlocks(t *testing.T, seed, n, size int) []blocks.Block {
	var bs []blocks.Block
	for i := range n {
		bs = append(bs, rawBlock(t, testutil.RandomBytes(uint64(seed*1000+i), size+i)))
	}
	return bs
}

// TestPackStoreReopen: blocks synced (and deleted) before Close are all there (and gone) after
// a reopen; segments roll over at packSegmentSize; AllKeysChan lists exactly what is stored;
// puts after reopen append after the old data.
func TestPackStoreReopen(t *testing.T) {
	old := packSegmentSize
	packSegmentSize = 64 << 10
	t.Cleanup(func() { packSegmentSize = old })
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenPack(dir)
	if err != nil {
		t.Fatal(err)
	}
	bs := testBlocks(t, 1, 20, 10<<10)
	if err := s.PutMany(ctx, bs); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMany(ctx, bs[:3]); err != nil { // stored once
		t.Fatal(err)
	}
	if err := s.DeleteBlock(ctx, bs[0].Cid()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 3 {
		t.Fatalf("%d segments for 200 KiB at 64 KiB each, want ≥ 3", len(segs))
	}
	s2 := openPackT(t, dir)
	mustHave(t, s2, bs[1:])
	mustMiss(t, s2, bs[:1])
	more := testBlocks(t, 2, 5, 3<<10)
	if err := s2.PutMany(ctx, more); err != nil {
		t.Fatal(err)
	}
	mustHave(t, s2, append(bs[1:], more...))
	ch, _ := s2.AllKeysChan(ctx)
	seen := map[string]bool{}
	for c := range ch {
		seen[string(c.Hash())] = true
	}
	if len(seen) != len(bs)-1+len(more) || seen[string(bs[0].Cid().Hash())] {
		t.Fatalf("AllKeysChan listed %d keys (deleted one: %v), want %d", len(seen), seen[string(bs[0].Cid().Hash())], len(bs)-1+len(more))
	}
}

// TestPackStoreUnsyncedTail simulates a kill before and during Sync: blocks put after the last
// Sync are gone on reopen (their index records were never written), a segment cut short
// drops the records pointing past its end, and a torn index tail is dropped; what was synced
// before stays, and the store accepts the lost blocks again.
func TestPackStoreUnsyncedTail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenPack(dir)
	if err != nil {
		t.Fatal(err)
	}
	synced := testBlocks(t, 3, 8, 4<<10)
	unsynced := testBlocks(t, 4, 8, 4<<10)
	if err := s.PutMany(ctx, synced); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMany(ctx, unsynced); err != nil {
		t.Fatal(err)
	}
	mustHave(t, s, unsynced) // readable before the crash
	// "Kill": drop the store without Sync or Close.
	s.closeFiles()
	s2 := openPackT(t, dir)
	mustHave(t, s2, synced)
	mustMiss(t, s2, unsynced)
	if fi, _ := os.Stat(s2.segPath(1)); fi.Size() != s2.end {
		t.Fatalf("segment is %d bytes after reopen, want cut back to %d", fi.Size(), s2.end)
	}
	if err := s2.PutMany(ctx, unsynced); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	// Segment tail lost (e.g. the file system kept the index but not the last data): the
	// records past the end are dropped, the ones before kept.
	seg := filepath.Join(dir, "00000001.seg")
	fi, _ := os.Stat(seg)
	if err := os.Truncate(seg, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	// Torn index tail: half a record after the good ones.
	idx := filepath.Join(dir, packIndexName)
	raw, _ := os.ReadFile(idx)
	torn := encodePackRecord(nil, packRecord{mh: unsynced[0].Cid().Hash(), loc: packLoc{seg: 1, off: 0, len: 10}})
	if err := os.WriteFile(idx, append(raw, torn[:len(torn)/2]...), 0o644); err != nil {
		t.Fatal(err)
	}
	s3 := openPackT(t, dir)
	mustHave(t, s3, append(synced, unsynced[:7]...))
	mustMiss(t, s3, unsynced[7:])
	if fi, _ := os.Stat(idx); fi.Size() != int64(len(raw)) {
		t.Fatalf("index is %d bytes after reopen, want the torn tail cut (%d)", fi.Size(), len(raw))
	}
}

// TestPackStoreHashOnRead: with HashOnRead, bytes damaged on disk read as a missing block
// (refetchable), not as data.
func TestPackStoreHashOnRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openPackT(t, dir)
	b := rawBlock(t, testutil.RandomBytes(9, 4096))
	if err := s.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(s.segPath(1), os.O_RDWR, 0)
	f.WriteAt([]byte{^b.RawData()[100]}, 100)
	f.Close()
	s.HashOnRead(true)
	if _, err := s.Get(ctx, b.Cid()); !ipld.IsNotFound(err) {
		t.Fatalf("damaged block with HashOnRead: err = %v, want not found", err)
	}
}

// smallTmpfs mounts a tmpfs of size (mount's size= option) on a new folder for the test, or
// skips it where this process may not mount (not root).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs (%v); TestFetchDiskFull covers the injected case", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestPackStoreDiskFull: on a full tmpfs a Put fails with ErrDiskFull, and what was stored
// before stays readable, also after a reopen.
func TestPackStoreDiskFull(t *testing.T) {
	ctx := context.Background()
	dir := smallTmpfs(t, "1m")
	s, err := OpenPack(dir)
	if err != nil {
		t.Fatal(err)
	}
	first := testBlocks(t, 5, 4, 100<<10)
	if err := s.PutMany(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	var putErr error
	var stored []blocks.Block
	for _, b := range testBlocks(t, 6, 20, 100<<10) {
		if putErr = s.Put(ctx, b); putErr != nil {
			break
		}
		stored = append(stored, b)
	}
	if !errors.Is(putErr, ErrDiskFull) || !strings.Contains(putErr.Error(), "free space") {
		t.Fatalf("put onto a full tmpfs: err = %v, want ErrDiskFull", putErr)
	}
	mustHave(t, s, append(first, stored...))
	s.Close() // may fail to write the index for the last blocks: the disk is full
	s2 := openPackT(t, dir)
	mustHave(t, s2, first)
}

// TestPackStoreReserveUnderConcurrentBatches: writers that PutMany batches at once on a
// small tmpfs, each until its batch is refused, leave the filesystem's free space at or above
// the reserve the store keeps for the node's metadata: a batch's free-space check and its
// writes are one step. (When the check ran before the writers queued for the store, each
// writer waiting passed it on the same free space, and together they took the reserve.)
func TestPackStoreReserveUnderConcurrentBatches(t *testing.T) {
	ctx := context.Background()
	dir := smallTmpfs(t, "16m")
	s, err := OpenPack(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	reserve := min(int64(maxSpaceReserve), int64(st.Blocks)*st.Bsize/20)
	// Blocks of whole pages, so that tmpfs charges exactly the bytes the check counts.
	const writers, batch, size = 4, 8, 32 << 10
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := 0; ; i++ {
				var bs []blocks.Block
				for j := range batch {
					bs = append(bs, rawBlock(t, testutil.RandomBytes(uint64(w<<32|i<<8|j), size)))
				}
				if err := s.PutMany(ctx, bs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range writers {
		if err := <-errs; !errors.Is(err, ErrDiskFull) {
			t.Fatalf("a writer stopped with %v, want ErrDiskFull", err)
		}
	}
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if avail := int64(st.Bavail) * st.Bsize; avail < reserve {
		t.Fatalf("free space %d KiB after the writers stopped, below the reserve of %d KiB", avail>>10, reserve>>10)
	}
}

// TestPackStoreConcurrent: Puts, Gets, Syncs and Deletes from many goroutines (run under
// -race) leave every surviving block readable, before and after a reopen.
func TestPackStoreConcurrent(t *testing.T) {
	old := packSegmentSize
	packSegmentSize = 256 << 10
	t.Cleanup(func() { packSegmentSize = old })
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenPack(dir)
	if err != nil {
		t.Fatal(err)
	}
	const workers = 8
	sets := make([][]blocks.Block, workers)
	for w := range workers {
		sets[w] = testBlocks(t, 10+w, 30, 8<<10)
	}
	var wg sync.WaitGroup
	errc := make(chan error, workers*2)
	for w := range workers {
		wg.Add(2)
		go func() { // writer; every worker also puts its neighbour's first blocks (duplicates)
			defer wg.Done()
			for i, b := range sets[w] {
				if err := s.Put(ctx, b); err != nil {
					errc <- err
					return
				}
				if err := s.Put(ctx, sets[(w+1)%workers][i%3]); err != nil {
					errc <- err
					return
				}
				if i%10 == 9 {
					if err := s.Sync(); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
		go func() { // reader: whatever is present reads back whole
			defer wg.Done()
			for range 3 {
				for _, b := range sets[w] {
					got, err := s.Get(ctx, b.Cid())
					if ipld.IsNotFound(err) {
						continue
					}
					if err != nil || string(got.RawData()) != string(b.RawData()) {
						errc <- errors.New("concurrent Get returned wrong data for " + b.Cid().String())
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if err := s.DeleteBlock(ctx, sets[0][0].Cid()); err != nil {
		t.Fatal(err)
	}
	var all []blocks.Block
	for _, set := range sets {
		all = append(all, set...)
	}
	mustHave(t, s, all[1:])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openPackT(t, dir)
	mustHave(t, s2, all[1:])
	mustMiss(t, s2, all[:1])
}

// FuzzPackIndexRecord: the index decoder never panics on arbitrary bytes, and what it
// accepts encodes back to the same bytes.
func FuzzPackIndexRecord(f *testing.F) {
	c, _ := cid.Decode("bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
	f.Add(encodePackRecord(nil, packRecord{mh: c.Hash(), loc: packLoc{seg: 1, off: 42, len: 7}}))
	f.Add(encodePackRecord(nil, packRecord{del: true, mh: c.Hash()}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, ok := decodePackRecord(b)
		if !ok {
			return
		}
		if got := encodePackRecord(nil, r); string(got) != string(b[:n]) {
			t.Fatalf("round trip: %x != %x", got, b[:n])
		}
	})
}

// A home whose blocks are in one store kind is not opened with the other: its pins would
// point at blocks that look missing. An empty home opens either.
func TestStoreKindMismatchRefused(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ wrote, opens string }{{"flat", "pack"}, {"pack", "flat"}} {
		h := home.Home{Dir: t.TempDir()}
		if _, err := h.Init(); err != nil {
			t.Fatal(err)
		}
		st, err := Open(h, tc.wrote)
		if err != nil {
			t.Fatal(err)
		}
		b := blocks.NewBlock([]byte("a block of " + tc.wrote))
		if err := st.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := st.Sync(); err != nil {
			t.Fatal(err)
		}
		closeStore(st)
		if _, err := Open(h, tc.opens); err == nil || !strings.Contains(err.Error(), "blockstore: "+tc.wrote) {
			t.Fatalf("%s home opened as %s: %v; want a refusal naming blockstore: %s", tc.wrote, tc.opens, err, tc.wrote)
		}
		again, err := Open(h, tc.wrote)
		if err != nil {
			t.Fatalf("reopen as %s: %v", tc.wrote, err)
		}
		if ok, _ := again.Has(ctx, b.Cid()); !ok {
			t.Fatalf("block lost in the %s store", tc.wrote)
		}
		closeStore(again)
		fresh := home.Home{Dir: t.TempDir()}
		if s, err := Open(fresh, tc.opens); err != nil {
			t.Fatalf("empty home as %s: %v", tc.opens, err)
		} else {
			closeStore(s)
		}
	}
}

func closeStore(s Store) {
	if c, ok := s.(interface{ Close() error }); ok {
		c.Close()
	}
}

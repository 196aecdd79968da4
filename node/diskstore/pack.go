package diskstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/multiformats/go-multihash"
	"golang.org/x/sys/unix"

	pool "github.com/libp2p/go-buffer-pool"
)

// Pack appends blocks to large segment files (NNNNNNNN.seg, up to packSegmentSize each)
// and keeps an index multihash → (segment, offset, length) in memory, persisted as an
// append-only log (index.log) that is replayed at open. It exists because the flat store
// spends a third to a half of a receiving daemon's CPU in the filesystem creating one inode
// per 256 KiB block (docs/transfer-protocol.md).
//
// Crash safety rests on one ordering: an index record is written only by Sync, after the
// segment bytes it points at were fdatasynced (and the directory, for a new segment), and the
// index is fdatasynced before Sync returns. So a record on disk never points at bytes that
// were not on stable storage. Blocks put since the last Sync are readable at once (from the
// in-memory index) but are lost by a crash, as in the flat store; the node Syncs before it
// records a pin. At open, a torn record at the index tail (bad CRC, short) and everything
// after it is dropped, records pointing past a segment's end are dropped, and the newest
// segment is cut back to the end of its last indexed block, discarding unsynced bytes.
//
// Every record carries a CRC-32C of itself; block bytes are checked against the CID only
// when HashOnRead is on (a mismatch then reads as a missing block, fetched again).
//
// Writes are serialised (one pwrite into the page cache per block, with writeback started at
// once); reads are preads without a lock on the data. DeleteBlock forgets a block (a
// tombstone record) without reclaiming its space; there is no compaction yet.
type Pack struct {
	dir string

	writeMu sync.Mutex // one writer: appends to the current segment
	cur     uint32     // current segment number
	end     int64      // append offset in the current segment

	mu        sync.RWMutex
	index     map[string]packLoc // key: multihash bytes
	segs      map[uint32]*os.File
	pending   []packRecord        // index records not yet in index.log
	dirtySegs map[uint32]struct{} // segments written since the last Sync
	dirDirty  bool                // the directory gained a segment since the last Sync

	syncMu sync.Mutex // one Sync at a time; guards idx and idxEnd
	idx    *os.File
	idxEnd int64

	hashOnRead atomic.Bool
	closed     atomic.Bool
}

type packLoc struct {
	seg uint32
	off int64
	len uint32
}

type packRecord struct {
	del bool
	mh  []byte
	loc packLoc
}

// packSegmentSize is where a segment stops growing; a block never spans two segments.
var packSegmentSize int64 = 1 << 30

const (
	packIndexName = "index.log"
	packRecPut    = 1
	packRecDel    = 2
	// kind(1) seg(4) off(8) len(4) mhlen(2) ... crc(4)
	packRecFixed = 1 + 4 + 8 + 4 + 2 + 4
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

var _ blockstore.Blockstore = (*Pack)(nil)

func OpenPack(dir string) (*Pack, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("blockstore %s: %w", dir, err)
	}
	s := &Pack{dir: dir, index: map[string]packLoc{}, segs: map[uint32]*os.File{}, dirtySegs: map[uint32]struct{}{}}
	ok := false
	defer func() {
		if !ok {
			s.closeFiles()
		}
	}()
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("blockstore %s: %w (the store is unreadable; move it aside to start empty)", dir, err)
	}
	ok = true
	return s, nil
}

// load replays the index against the segments on disk and cuts both back to what is whole.
func (s *Pack) load() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	sizes := map[uint32]int64{}
	var last uint32
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".seg") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(name, ".seg"), 10, 32)
		if err != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(s.dir, name), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		s.segs[uint32(n)] = f
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		sizes[uint32(n)] = fi.Size()
		last = max(last, uint32(n))
	}

	s.idx, err = os.OpenFile(filepath.Join(s.dir, packIndexName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	raw, err := io.ReadAll(s.idx)
	if err != nil {
		return err
	}
	valid := 0
	segEnd := map[uint32]int64{}
	for valid < len(raw) {
		rec, n, ok := decodePackRecord(raw[valid:])
		if !ok {
			break // torn tail: written by a Sync that did not finish
		}
		valid += n
		key := string(rec.mh)
		if rec.del {
			delete(s.index, key)
			continue
		}
		size, ok := sizes[rec.loc.seg]
		if !ok || rec.loc.off+int64(rec.loc.len) > size {
			continue // its bytes are not there (segment lost or cut): the block is missing
		}
		s.index[key] = rec.loc
		segEnd[rec.loc.seg] = max(segEnd[rec.loc.seg], rec.loc.off+int64(rec.loc.len))
	}
	if valid < len(raw) {
		if err := s.idx.Truncate(int64(valid)); err != nil {
			return err
		}
		if err := unix.Fdatasync(int(s.idx.Fd())); err != nil {
			return err
		}
	}
	s.idxEnd = int64(valid)

	if len(s.segs) == 0 {
		if err := s.newSegment(1); err != nil {
			return err
		}
		s.dirDirty = false
		return fsyncPath(s.dir) // the new index and segment names
	}
	s.cur, s.end = last, segEnd[last]
	if sizes[last] > s.end {
		// Bytes past the last indexed block were never synced and indexed: drop them.
		f := s.segs[last]
		if err := f.Truncate(s.end); err != nil {
			return err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
	}
	return nil
}

func (s *Pack) segPath(n uint32) string {
	return filepath.Join(s.dir, fmt.Sprintf("%08d.seg", n))
}

// newSegment creates segment n and makes it current; writeMu held (or single-threaded open).
func (s *Pack) newSegment(n uint32) error {
	f, err := os.OpenFile(s.segPath(n), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.segs[n] = f
	s.dirDirty = true
	s.mu.Unlock()
	s.cur, s.end = n, 0
	return nil
}

func encodePackRecord(dst []byte, r packRecord) []byte {
	start := len(dst)
	kind := byte(packRecPut)
	if r.del {
		kind = packRecDel
	}
	dst = append(dst, kind)
	dst = binary.LittleEndian.AppendUint32(dst, r.loc.seg)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.loc.off))
	dst = binary.LittleEndian.AppendUint32(dst, r.loc.len)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.mh)))
	dst = append(dst, r.mh...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crc32c))
}

// decodePackRecord parses one index record; ok is false for a short or corrupt one.
func decodePackRecord(b []byte) (r packRecord, n int, ok bool) {
	if len(b) < packRecFixed {
		return r, 0, false
	}
	mhLen := int(binary.LittleEndian.Uint16(b[17:19]))
	n = packRecFixed + mhLen
	if len(b) < n {
		return r, 0, false
	}
	if crc32.Checksum(b[:n-4], crc32c) != binary.LittleEndian.Uint32(b[n-4:n]) {
		return r, 0, false
	}
	switch b[0] {
	case packRecPut:
	case packRecDel:
		r.del = true
	default:
		return r, 0, false
	}
	off := binary.LittleEndian.Uint64(b[5:13])
	if off > 1<<62 {
		return r, 0, false
	}
	r.loc = packLoc{seg: binary.LittleEndian.Uint32(b[1:5]), off: int64(off), len: binary.LittleEndian.Uint32(b[13:17])}
	r.mh = append([]byte(nil), b[19:n-4]...)
	if _, err := multihash.Cast(r.mh); err != nil {
		return r, 0, false
	}
	return r, n, true
}

func (s *Pack) lookup(c cid.Cid) (packLoc, *os.File, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	loc, ok := s.index[string(c.Hash())]
	if !ok {
		return loc, nil, false
	}
	return loc, s.segs[loc.seg], true
}

func (s *Pack) Has(_ context.Context, c cid.Cid) (bool, error) {
	_, _, ok := s.lookup(c)
	return ok, nil
}

func (s *Pack) GetSize(_ context.Context, c cid.Cid) (int, error) {
	loc, _, ok := s.lookup(c)
	if !ok {
		return -1, ipld.ErrNotFound{Cid: c}
	}
	return int(loc.len), nil
}

func (s *Pack) Get(_ context.Context, c cid.Cid) (blocks.Block, error) {
	return s.get(c, func(n int) []byte { return make([]byte, n) }, func([]byte) {})
}

// GetPooled is Get reading into a buffer from go-buffer-pool (xfer.PooledGetter): the xfer
// server returns it once the block is sent. Why: profiled on the sending daemon of a 1 GiB
// fetch, a fresh slice per block made every pread fault in new pages and fed the GC.
func (s *Pack) GetPooled(_ context.Context, c cid.Cid) (blocks.Block, bool, error) {
	blk, err := s.get(c, pool.Get, pool.Put)
	return blk, err == nil, err
}

func (s *Pack) get(c cid.Cid, alloc func(int) []byte, free func([]byte)) (blocks.Block, error) {
	loc, f, ok := s.lookup(c)
	if !ok {
		return nil, ipld.ErrNotFound{Cid: c}
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("blockstore %s: closed", s.dir)
	}
	data := alloc(int(loc.len))
	if _, err := f.ReadAt(data, loc.off); err != nil {
		free(data)
		return nil, fmt.Errorf("blockstore %s: read %s (segment %d at %d): %w", s.dir, c, loc.seg, loc.off, err)
	}
	if s.hashOnRead.Load() {
		sum, err := c.Prefix().Sum(data)
		if err != nil {
			free(data)
			return nil, err
		}
		if !sum.Equals(c) {
			// Damaged on disk: treat as missing so the node fetches it again.
			free(data)
			return nil, ipld.ErrNotFound{Cid: c}
		}
	}
	blk, err := blocks.NewBlockWithCid(data, c)
	if err != nil {
		free(data)
	}
	return blk, err
}

func (s *Pack) Put(_ context.Context, b blocks.Block) error {
	if ok, _ := s.Has(context.Background(), b.Cid()); ok {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.putLocked(b, true)
}

// putLocked stores b under writeMu; checkReserve false: the caller (PutMany) has checked the
// free-space reserve for b and the blocks around it, under the same hold of writeMu.
func (s *Pack) putLocked(b blocks.Block, checkReserve bool) error {
	key := b.Cid().Hash()
	data := b.RawData()
	if int64(len(data)) > packSegmentSize || len(data) > 1<<31 {
		return fmt.Errorf("blockstore %s: block %s is %d bytes, larger than a segment", s.dir, b.Cid(), len(data))
	}
	if s.closed.Load() {
		return fmt.Errorf("blockstore %s: closed", s.dir)
	}
	if ok, _ := s.Has(context.Background(), b.Cid()); ok {
		return nil
	}
	if checkReserve {
		if err := checkSpace(s.dir, int64(len(data))); err != nil {
			return s.writeErr(b.Cid(), err)
		}
	}
	if s.end > 0 && s.end+int64(len(data)) > packSegmentSize {
		if err := s.newSegment(s.cur + 1); err != nil {
			return s.writeErr(b.Cid(), err)
		}
	}
	s.mu.RLock()
	f := s.segs[s.cur]
	s.mu.RUnlock()
	if _, err := f.WriteAt(data, s.end); err != nil {
		// s.end is not advanced and no index record points past it. Whatever part of the
		// block landed is cut off now: on a full disk those bytes are the space the
		// metadata store needs next.
		_ = f.Truncate(s.end)
		return s.writeErr(b.Cid(), err)
	}
	if len(data) > 0 {
		// Start writeback now; Sync then waits for I/O that is mostly done.
		_ = unix.SyncFileRange(int(f.Fd()), s.end, int64(len(data)), unix.SYNC_FILE_RANGE_WRITE)
	}
	loc := packLoc{seg: s.cur, off: s.end, len: uint32(len(data))}
	s.end += int64(len(data))
	s.mu.Lock()
	s.index[string(key)] = loc
	s.pending = append(s.pending, packRecord{mh: key, loc: loc})
	s.dirtySegs[loc.seg] = struct{}{}
	s.mu.Unlock()
	return nil
}

func (s *Pack) writeErr(c cid.Cid, err error) error { return WriteErr(s.dir, c, err) }

// PutMany checks the free-space reserve once for the whole batch (one statfs instead of one
// per block: 2 % of the receiving daemon's CPU on a 1 GiB fetch); a batch that would cross
// it is stored block by block, each checked, so that what fits is stored as Put would. The
// check and the batch's writes hold writeMu together, so concurrent writers of this store
// cannot each pass the check on the same free space and together cross the reserve.
func (s *Pack) PutMany(_ context.Context, bs []blocks.Block) error {
	var need int64
	for _, b := range bs {
		need += int64(len(b.RawData()))
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	checked := len(bs) > 1 && checkSpace(s.dir, need) == nil
	for _, b := range bs {
		if err := s.putLocked(b, !checked); err != nil {
			return err
		}
	}
	return nil
}

// DeleteBlock forgets the block. Its bytes stay in the segment until compaction, except for
// a block at the end of the current segment that was never synced (no index record on disk
// names it): then the segment is cut back at once, so a refused operation that removes
// what it put, newest first, gives its space back.
func (s *Pack) DeleteBlock(_ context.Context, c cid.Cid) error {
	key := c.Hash()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	loc, ok := s.index[string(key)]
	if !ok {
		return nil
	}
	delete(s.index, string(key))
	if n := len(s.pending); n > 0 && !s.pending[n-1].del && string(s.pending[n-1].mh) == string(key) &&
		loc.seg == s.cur && loc.off+int64(loc.len) == s.end && !s.closed.Load() {
		if err := s.segs[s.cur].Truncate(loc.off); err == nil {
			s.pending = s.pending[:n-1]
			s.end = loc.off
			return nil
		}
	}
	s.pending = append(s.pending, packRecord{del: true, mh: key})
	return nil
}

func (s *Pack) AllKeysChan(ctx context.Context) (<-chan cid.Cid, error) {
	s.mu.RLock()
	keys := make([]string, 0, len(s.index))
	for k := range s.index {
		keys = append(keys, k)
	}
	s.mu.RUnlock()
	sort.Strings(keys)
	ch := make(chan cid.Cid, 64)
	go func() {
		defer close(ch)
		for _, k := range keys {
			select {
			case ch <- cid.NewCidV1(cid.Raw, multihash.Multihash(k)):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (s *Pack) HashOnRead(enabled bool) { s.hashOnRead.Store(enabled) }

// Sync makes every block put so far durable and findable after a crash: segments first
// (fdatasync), then the directory if it gained a segment, then the index records for those
// blocks (written and fdatasynced last, so none points at bytes not on stable storage).
func (s *Pack) Sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	recs, segs, dirDirty := s.pending, s.dirtySegs, s.dirDirty
	s.pending, s.dirtySegs, s.dirDirty = nil, map[uint32]struct{}{}, false
	files := make([]*os.File, 0, len(segs))
	for n := range segs {
		files = append(files, s.segs[n])
	}
	s.mu.Unlock()
	if err := s.syncLocked(recs, files, dirDirty); err != nil {
		s.mu.Lock()
		s.pending = append(recs, s.pending...)
		for n := range segs {
			s.dirtySegs[n] = struct{}{}
		}
		s.dirDirty = s.dirDirty || dirDirty
		s.mu.Unlock()
		return err
	}
	return nil
}

func (s *Pack) syncLocked(recs []packRecord, files []*os.File, dirDirty bool) error {
	if len(recs) == 0 && len(files) == 0 && !dirDirty {
		return nil
	}
	for _, f := range files {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return fmt.Errorf("blockstore %s: sync %s: %w", s.dir, f.Name(), err)
		}
	}
	if dirDirty {
		if err := fsyncPath(s.dir); err != nil {
			return fmt.Errorf("blockstore %s: sync: %w", s.dir, err)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	var buf []byte
	for _, r := range recs {
		buf = encodePackRecord(buf, r)
	}
	// Written at idxEnd, which only advances on success: a retry after a failed (torn) write
	// overwrites it.
	if _, err := s.idx.WriteAt(buf, s.idxEnd); err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			return fmt.Errorf("blockstore %s: %w writing the index: free space on that filesystem and retry; blocks already stored are intact: %v", s.dir, ErrDiskFull, err)
		}
		return fmt.Errorf("blockstore %s: write index: %w", s.dir, err)
	}
	if err := unix.Fdatasync(int(s.idx.Fd())); err != nil {
		return fmt.Errorf("blockstore %s: sync index: %w", s.dir, err)
	}
	s.idxEnd += int64(len(buf))
	return nil
}

// Close syncs and closes the files; the store is unusable after.
func (s *Pack) Close() error {
	err := s.Sync()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if !s.closed.Swap(true) {
		s.closeFiles()
	}
	return err
}

func (s *Pack) closeFiles() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.segs {
		f.Close()
	}
	if s.idx != nil {
		s.idx.Close()
	}
}

// maxSpaceReserve is the most free space a block store leaves for the rest of the node.
const maxSpaceReserve = 64 << 20

// errReserve is the cause checkSpace reports; writeErr files it under ErrDiskFull.
var errReserve = fmt.Errorf("%w: the block store leaves the last %d MiB (or 5%%) of the filesystem to the node's metadata", syscall.ENOSPC, maxSpaceReserve>>20)

// checkSpace refuses a block write of need bytes that would leave less free space on dir's
// filesystem than the reserve: min(64 MiB, 5% of the filesystem). Blocks are the node's
// bulk; the metadata store (pins) must always find room for its next write, because a
// metadata write that fails is fatal to it while a refused block is only a failed request.
// One statfs per block costs ~1 µs against the block's 256 KiB write.
func checkSpace(dir string, need int64) error {
	avail, reserve, err := FreeSpace(dir)
	if err != nil {
		return nil // cannot tell: let the write itself report
	}
	if avail-need < reserve {
		return errReserve
	}
	return nil
}

// FreeSpace is the space left to unprivileged writers on dir's filesystem and the reserve
// the block store leaves on it (min(64 MiB, 5% of the filesystem)): with avail under
// reserve, the node refuses every block write (ErrDiskFull).
func FreeSpace(dir string) (avail, reserve int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	total := int64(st.Blocks) * st.Bsize
	return int64(st.Bavail) * st.Bsize, min(maxSpaceReserve, total/20), nil
}

// Compact rewrites the live blocks of every segment that holds dead bytes (blocks deleted,
// or bytes a failed write left) into the current segment (a fresh one when the current
// segment itself is being compacted), makes
// them durable and indexed (Sync), and then removes the old segment file. A crash at any
// point is safe: until the old file is gone its records are still valid, and the newer
// records written by Sync win at replay. dryRun only counts. progress gets segments done.
func (s *Pack) Compact(ctx context.Context, dryRun bool, progress func(done, total int)) (segments int, reclaimed int64, err error) {
	type segInfo struct {
		n          uint32
		size, live int64
	}
	s.mu.RLock()
	live := map[uint32]int64{}
	for _, loc := range s.index {
		live[loc.seg] += int64(loc.len)
	}
	var todo []segInfo
	for n, f := range s.segs {
		fi, err := f.Stat()
		if err != nil {
			s.mu.RUnlock()
			return 0, 0, err
		}
		if fi.Size() > live[n] {
			todo = append(todo, segInfo{n, fi.Size(), live[n]})
		}
	}
	s.mu.RUnlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].n < todo[j].n })
	for i, sg := range todo {
		if err := ctx.Err(); err != nil {
			return segments, reclaimed, err
		}
		if !dryRun {
			if err := s.compactSegment(ctx, sg.n); err != nil {
				return segments, reclaimed, err
			}
		}
		segments++
		reclaimed += sg.size - sg.live
		if progress != nil {
			progress(i+1, len(todo))
		}
	}
	return segments, reclaimed, nil
}

func (s *Pack) compactSegment(ctx context.Context, n uint32) error {
	s.writeMu.Lock()
	if s.cur == n {
		if err := s.newSegment(n + 1); err != nil {
			s.writeMu.Unlock()
			return fmt.Errorf("compact segment %d: %w", n, err)
		}
	}
	s.writeMu.Unlock()
	s.mu.RLock()
	var keys []string
	for k, loc := range s.index {
		if loc.seg == n {
			keys = append(keys, k)
		}
	}
	s.mu.RUnlock()
	for _, k := range keys {
		c := cid.NewCidV1(cid.Raw, multihash.Multihash(k))
		b, err := s.Get(ctx, c)
		if err != nil {
			return fmt.Errorf("compact segment %d: %w", n, err)
		}
		// Forget the old location first so Put writes a fresh copy.
		s.mu.Lock()
		old := s.index[k]
		delete(s.index, k)
		s.mu.Unlock()
		if err := s.Put(ctx, b); err != nil {
			s.mu.Lock()
			if _, ok := s.index[k]; !ok {
				s.index[k] = old
			}
			s.mu.Unlock()
			return fmt.Errorf("compact segment %d: %w", n, err)
		}
	}
	if err := s.Sync(); err != nil {
		return err
	}
	s.mu.Lock()
	for _, loc := range s.index {
		if loc.seg == n {
			s.mu.Unlock()
			return fmt.Errorf("compact segment %d: a block still points into it", n)
		}
	}
	f := s.segs[n]
	delete(s.segs, n)
	s.mu.Unlock()
	f.Close()
	if err := os.Remove(s.segPath(n)); err != nil {
		return err
	}
	return fsyncPath(s.dir)
}

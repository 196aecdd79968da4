package tasks

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	cid "github.com/ipfs/go-cid"
	pool "github.com/libp2p/go-buffer-pool"

	"github.com/evalmesh/evalmesh/internal/rawleaf"
	"github.com/evalmesh/evalmesh/internal/sha256x2"
)

// Parallel leaf hashing (issue 18). boxo's importer hashes each raw leaf when it makes the
// leaf node, on the one goroutine that lays out the file: a 1 GiB pack ran at one core's
// sha256. Here a few workers each take the next chunk of the file, read it with pread
// (ReadAt) into their own buffer and hash it at once, ahead of the importer; the importer
// still receives the chunks in file order and, through prehashedBuilder, takes each leaf's
// CID from its worker instead of hashing it again. The CIDs are computed by the same
// cid.Prefix.Sum over the same bytes — the chunks are cut where boxo's size splitter cuts
// them, every ChunkSize bytes, the last one short — so the DAG (every block, every CID,
// the root) is byte-identical to the one-goroutine pack.
//
// Each worker reads its own chunk (the first version had one reader goroutine handing
// chunks to hashing workers) so that no goroutine and no hand-off stand between the file
// and the hashing, and the bytes are hashed on the core that copied them in. Measured, the
// per-byte sha256 cost is the same either way on the 2-core test machine, and so was the
// wall-clock within the noise; the read-ahead depth is what moved it (newPreadSplitter;
// docs/bundle-format.md, "Pack speed").
// A worker that finds a second full chunk queued takes both and hashes them in one
// interleaved SHA-NI pass (internal/sha256x2, 1.66x crypto/sha256 per core here): 1 GiB
// packed at 2.44-2.47x the one-core sha256 floor, against 1.60-1.71x hashing one chunk at a
// time (3 alternating rounds, quiet 2-core machine).
// Hand-written: boxo has no parallel importer.

// parallelMinChunks is the smallest file, in chunks, that is hashed in parallel: below it
// the goroutines cost more than they save (a folder of many small files stays on the
// one-goroutine path).
var parallelMinChunks int64 = 4 // a var only so a test can compare both paths

// rawLeafPrefix is CidBuilder for raw leaves, what NewRawNodeWPrefix sums with.
var rawLeafPrefix = CidBuilder.WithCodec(cid.Raw)

type leafJob struct {
	off  int64 // where the chunk starts in the file
	n    int   // its length as the size splitter cuts it
	data []byte
	err  error
	sum  cid.Cid
	done chan struct{}
}

// preadSplitter is a chunker.Splitter over a file of known size whose chunks come with
// their CIDs already computed; it hands each CID to builder before returning the chunk.
type preadSplitter struct {
	r       io.Reader // what Reader returns (the importer asks it only for NoCopy)
	jobs    chan *leafJob
	queue   []*leafJob // dispatched, in file order; the importer waits on queue[0]
	next    int64      // offset of the next chunk to dispatch
	size    int64
	stopped atomic.Bool
	closed  bool
	wg      sync.WaitGroup
	builder *prehashedBuilder
	count   func(n int) // called on the importer's goroutine, in file order
	err     error       // once set, NextBytes returns it
	pairs   bool        // leavesSHA256: workers may hash two chunks in one pass
}

// newPreadSplitter cuts the size bytes of ra into ChunkSize chunks. count is told the
// length of each chunk as the importer takes it (progress, in file order). A chunk that
// comes back short (the file was truncated while packed) ends the file there, as the
// size splitter ends at EOF: addFile's before/after check then reports the change.
func newPreadSplitter(ra io.ReaderAt, size int64, r io.Reader, builder *prehashedBuilder, count func(int)) *preadSplitter {
	workers := max(1, runtime.GOMAXPROCS(0))
	// chunks read ahead of the importer: bounds the memory (4 MiB on 2 cores). 8 per worker
	// packed 1 GiB at 1.66-1.78x the one-core sha256 floor, against 1.59-1.69x with 2 per
	// worker (6 alternating rounds) and 1.60-1.63x with 16 (3 rounds; load 1.5-1.8): a
	// worker the scheduler delays no longer stalls the other at once, and 16 spills the cache.
	depth := 8 * workers
	s := &preadSplitter{
		r:       r,
		jobs:    make(chan *leafJob, depth),
		queue:   make([]*leafJob, 0, depth),
		size:    size,
		builder: builder,
		count:   count,
		pairs:   leavesSHA256(),
	}
	s.wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			defer s.wg.Done()
			for j := range s.jobs {
				// Two full chunks are hashed in one interleaved pass (internal/sha256x2):
				// take a second if one is already queued.
				var k *leafJob
				if j.n == ChunkSize && s.pairs {
					select {
					case k = <-s.jobs: // nil once the channel is closed
					default:
					}
				}
				if !s.stopped.Load() {
					s.readAndSum(ra, j, k)
				}
				close(j.done)
				if k != nil {
					close(k.done)
				}
			}
		}()
	}
	for len(s.queue) < depth && s.dispatch() {
	}
	return s
}

// readAndSum reads and hashes chunk j, and k when it is not nil, on the calling worker.
func (s *preadSplitter) readAndSum(ra io.ReaderAt, j, k *leafJob) {
	s.read(ra, j)
	if k == nil {
		j.sumLeaf()
		return
	}
	s.read(ra, k)
	if j.err == nil && k.err == nil && len(j.data) == len(k.data) && len(j.data) > 0 {
		dj, dk := sha256x2.Sum256(j.data, k.data)
		j.sum, k.sum = rawleaf.CID(dj), rawleaf.CID(dk)
		return
	}
	j.sumLeaf()
	k.sumLeaf()
}

// sumLeaf hashes a chunk read whole or in part into its raw leaf's CID.
func (j *leafJob) sumLeaf() {
	if j.err == nil && len(j.data) > 0 {
		j.sum, j.err = rawLeafPrefix.Sum(j.data)
	}
}

// leavesSHA256 says whether raw leaves are CIDv1 with full-length sha2-256, the CIDs
// rawleaf.CID makes; for any other CidBuilder the workers hash one chunk at a time.
func leavesSHA256() bool {
	p, ok := rawLeafPrefix.(cid.Prefix)
	return ok && rawleaf.IsPrefix(p)
}

// read reads one chunk on the calling worker.
func (s *preadSplitter) read(ra io.ReaderAt, j *leafJob) {
	var buf []byte
	if j.n == ChunkSize {
		buf = pool.Get(ChunkSize) // recycleLeaf puts it back once the leaf is stored
	} else {
		buf = make([]byte, j.n) // the last chunk: no 256 KiB buffer kept for a short tail
	}
	n, err := ra.ReadAt(buf, j.off)
	switch {
	case n == j.n:
		// a full read, even if ReadAt also said io.EOF at the end of the file
	case err == io.EOF:
		// truncated under us: the bytes up to the new end, as sequential reads give them
	default:
		if err == nil {
			err = io.ErrNoProgress
		}
		j.err = fmt.Errorf("read at byte %d: %w", j.off+int64(n), err)
		return
	}
	j.data = buf[:n]
}

// dispatch queues the next chunk for the workers; false when the file has none left.
func (s *preadSplitter) dispatch() bool {
	if s.next >= s.size {
		return false
	}
	j := &leafJob{off: s.next, n: int(min(ChunkSize, s.size-s.next)), done: make(chan struct{})}
	s.next += int64(j.n)
	s.queue = append(s.queue, j)
	s.jobs <- j // never blocks: at most cap(jobs) chunks are queued
	return true
}

func (s *preadSplitter) Reader() io.Reader { return s.r }

func (s *preadSplitter) NextBytes() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(s.queue) == 0 {
		s.err = io.EOF
		return nil, io.EOF
	}
	j := s.queue[0]
	s.queue = append(s.queue[:0], s.queue[1:]...) // a few entries: copying is cheaper than a ring
	s.dispatch()
	<-j.done
	switch {
	case j.err != nil:
		s.err = j.err
		return nil, j.err
	case len(j.data) < j.n:
		s.err = io.EOF // the file ends early: nothing after this chunk
		if len(j.data) == 0 {
			return nil, io.EOF
		}
	}
	s.count(len(j.data))
	s.builder.put(j.data, j.sum)
	return j.data, nil
}

// close stops the workers (the importer may stop early, on an error) and waits for them:
// after it nothing reads the file. Chunks not yet read are skipped.
func (s *preadSplitter) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.stopped.Store(true)
	close(s.jobs)
	s.wg.Wait()
}

// prehashedBuilder is CidBuilder, except that a raw leaf whose bytes the splitter already
// hashed gets that CID. Chunks are known by their buffer (address and length): the
// importer sums the very slice the splitter returned, and the entry is dropped on use, so
// a recycled buffer never meets a stale CID.
type prehashedBuilder struct {
	codec uint64
	mu    *sync.Mutex
	sums  map[chunkKey]cid.Cid
}

type chunkKey struct {
	p *byte
	n int
}

func newPrehashedBuilder() *prehashedBuilder {
	return &prehashedBuilder{codec: CidBuilder.GetCodec(), mu: &sync.Mutex{}, sums: map[chunkKey]cid.Cid{}}
}

func (b *prehashedBuilder) put(data []byte, c cid.Cid) {
	b.mu.Lock()
	b.sums[chunkKey{unsafe.SliceData(data), len(data)}] = c
	b.mu.Unlock()
}

func (b *prehashedBuilder) Sum(data []byte) (cid.Cid, error) {
	if b.codec == cid.Raw {
		k := chunkKey{unsafe.SliceData(data), len(data)}
		b.mu.Lock()
		c, ok := b.sums[k]
		delete(b.sums, k)
		b.mu.Unlock()
		if ok {
			return c, nil
		}
	}
	return CidBuilder.WithCodec(b.codec).Sum(data)
}

func (b *prehashedBuilder) GetCodec() uint64 { return b.codec }

// WithCodec keeps the look-up for raw leaves; dag-pb nodes get the plain prefix.
func (b *prehashedBuilder) WithCodec(c uint64) cid.Builder {
	if c != cid.Raw {
		return CidBuilder.WithCodec(c)
	}
	return &prehashedBuilder{codec: c, mu: b.mu, sums: b.sums}
}

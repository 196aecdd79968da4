package tasks

import (
	"io"
	"runtime"
	"sync"
	"unsafe"

	chunker "github.com/ipfs/boxo/chunker"
	cid "github.com/ipfs/go-cid"
)

// Parallel leaf hashing (issue 18). boxo's importer hashes each raw leaf when it makes the
// leaf node, on the one goroutine that lays out the file: a 1 GiB pack ran at one core's
// sha256. Here a reader goroutine takes the chunks off the file in order and a few workers
// hash them ahead of the importer; the importer still receives the chunks in file order
// and, through prehashedBuilder, takes each leaf's CID from its worker instead of hashing
// it again. The CIDs are computed by the same cid.Prefix.Sum over the same bytes, so the
// DAG — every block, every CID, the root — is byte-identical to the one-goroutine pack.
// Hand-written: boxo has no parallel importer.

// parallelMinChunks is the smallest file, in chunks, that is hashed in parallel: below it
// the goroutines cost more than they save (a folder of many small files stays on the
// one-goroutine path).
var parallelMinChunks int64 = 4 // a var only so a test can compare both paths

// rawLeafPrefix is CidBuilder for raw leaves, what NewRawNodeWPrefix sums with.
var rawLeafPrefix = CidBuilder.WithCodec(cid.Raw)

type leafJob struct {
	data []byte
	err  error
	sum  cid.Cid
	done chan struct{}
}

// prehashSplitter is a chunker.Splitter whose chunks come with their CIDs already
// computed; it hands each CID to builder before returning the chunk.
type prehashSplitter struct {
	order   chan *leafJob
	stop    chan struct{}
	wg      sync.WaitGroup
	builder *prehashedBuilder
	src     chunker.Splitter
}

func newPrehashSplitter(src chunker.Splitter, builder *prehashedBuilder) *prehashSplitter {
	workers := max(1, runtime.GOMAXPROCS(0))
	depth := 2 * workers
	s := &prehashSplitter{
		order:   make(chan *leafJob, depth),
		stop:    make(chan struct{}),
		builder: builder,
		src:     src,
	}
	jobs := make(chan *leafJob, depth)
	s.wg.Add(1 + workers)
	go func() { // reader: the file's bytes in order
		defer s.wg.Done()
		defer close(jobs)
		defer close(s.order)
		for {
			data, err := src.NextBytes()
			j := &leafJob{data: data, err: err, done: make(chan struct{})}
			if err != nil {
				close(j.done)
			}
			select {
			case s.order <- j:
			case <-s.stop:
				return
			}
			if err != nil {
				return
			}
			select {
			case jobs <- j:
			case <-s.stop:
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		go func() {
			defer s.wg.Done()
			for j := range jobs {
				j.sum, j.err = rawLeafPrefix.Sum(j.data)
				close(j.done)
			}
		}()
	}
	return s
}

func (s *prehashSplitter) Reader() io.Reader { return s.src.Reader() }

func (s *prehashSplitter) NextBytes() ([]byte, error) {
	j, ok := <-s.order
	if !ok {
		return nil, io.EOF
	}
	<-j.done
	if j.err != nil {
		return nil, j.err
	}
	s.builder.put(j.data, j.sum)
	return j.data, nil
}

// close stops the goroutines (the importer may stop early, on an error) and waits for
// them: after it the reader is no longer reading the file.
func (s *prehashSplitter) close() {
	close(s.stop)
	for range s.order { // unblock the reader and let the workers drain
	}
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

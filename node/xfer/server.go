package xfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	pool "github.com/libp2p/go-buffer-pool"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"golang.org/x/time/rate"
)

// Server answers /evalmesh/xfer/1.0.0 requests from a blockstore.
type Server struct {
	h   host.Host
	bs  blockstore.Blockstore
	cfg serverConfig
	sem chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed and wg.Add against Close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

type serverConfig struct {
	limit          *rate.Limiter
	readAhead      int
	maxStreams     int
	requestTimeout time.Duration
	writeTimeout   time.Duration
}

// ServerOption configures a Server.
type ServerOption func(*serverConfig)

// WithMaxStreams bounds how many requests are served at once (default 16); further streams
// wait for a slot.
func WithMaxStreams(n int) ServerOption {
	return func(c *serverConfig) {
		if n > 0 {
			c.maxStreams = n
		}
	}
}

// WithReadAhead sets how many upcoming blocks a request reads from the blockstore ahead of
// sending them, on two goroutines (default 8; 0 reads each block only when its turn comes).
// A store that reads from disk then overlaps its reads with the network writes.
func WithReadAhead(n int) ServerOption {
	return func(c *serverConfig) {
		if n >= 0 {
			c.readAhead = n
		}
	}
}

// WithSendLimit paces what the server sends: each block waits for its bytes from l (shared
// by every request). The node sets it only for fault tests (--test-controls), which slow a
// transfer down to interrupt it part way. l's burst must be at least MaxBlockSize.
func WithSendLimit(l *rate.Limiter) ServerOption {
	return func(c *serverConfig) { c.limit = l }
}

// WithTimeouts sets how long a requester may take to send its request (default 30 s) and how
// long one buffered write may block on a requester that stopped reading (default 60 s).
func WithTimeouts(request, write time.Duration) ServerOption {
	return func(c *serverConfig) {
		if request > 0 {
			c.requestTimeout = request
		}
		if write > 0 {
			c.writeTimeout = write
		}
	}
}

// serverBufSize is the write buffer: large writes amortize yamux frames and noise records.
const serverBufSize = 1 << 20

// NewServer registers the stream handler on h serving DAGs from bs.
func NewServer(h host.Host, bs blockstore.Blockstore, opts ...ServerOption) *Server {
	cfg := serverConfig{readAhead: 8, maxStreams: 16, requestTimeout: 30 * time.Second, writeTimeout: 60 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{h: h, bs: bs, cfg: cfg, sem: make(chan struct{}, cfg.maxStreams), ctx: ctx, cancel: cancel}
	h.SetStreamHandler(ProtocolID, s.handle)
	return s
}

// Close removes the stream handler and waits for the requests being served to stop.
func (s *Server) Close() error {
	s.h.RemoveStreamHandler(ProtocolID)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Server) handle(st network.Stream) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		st.Reset()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		st.Reset()
		return
	}
	defer func() { <-s.sem }()

	stop := context.AfterFunc(s.ctx, func() { st.Reset() })
	defer stop()

	_ = st.SetReadDeadline(time.Now().Add(s.cfg.requestTimeout)) // wall clock: a stream deadline the kernel enforces
	items, err := ReadRequest(bufio.NewReaderSize(st, 4096))
	if err != nil {
		w := bufio.NewWriter(st)
		_ = writeErrorFrame(w, "bad request: "+err.Error())
		_ = w.Flush()
		_ = st.Close()
		return
	}
	_ = st.SetReadDeadline(time.Time{})
	w := bufio.NewWriterSize(&deadlineWriter{st: st, d: s.cfg.writeTimeout}, serverBufSize)
	if err := serve(s.ctx, s.bs, items, w, s.cfg.readAhead, s.cfg.limit); err != nil {
		var pe *PeerError
		if errors.As(err, &pe) {
			_ = writeErrorFrame(w, pe.Msg)
			_ = w.Flush()
			_ = st.Close()
			return
		}
		st.Reset()
		return
	}
	if err := w.WriteByte(frameEnd); err != nil {
		st.Reset()
		return
	}
	if err := w.Flush(); err != nil {
		st.Reset()
		return
	}
	_ = st.Close()
}

// deadlineWriter arms a write deadline before each (large, buffered) write so that a
// requester that stops reading cannot pin a server slot forever.
type deadlineWriter struct {
	st network.Stream
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.st.SetWriteDeadline(time.Now().Add(w.d)) // wall clock: a stream deadline the kernel enforces
	return w.st.Write(p)
}

// serve writes the blocks for items in protocol order. A block the store cannot produce or
// walk becomes a *PeerError (sent to the requester); write failures are returned as is.
func serve(ctx context.Context, bs blockstore.Blockstore, items []Item, w *bufio.Writer, readAhead int, limit *rate.Limiter) error {
	seen := make(map[string]struct{})
	// stack holds CIDs still to send, top at the end; a dag item pushes its children in
	// reverse so that the first child is sent next.
	type entry struct {
		c   cid.Cid
		dag bool
	}
	stack := make([]entry, 0, len(items))
	for i := len(items) - 1; i >= 0; i-- {
		stack = append(stack, entry{items[i].Cid, items[i].Mode == ModeDAG})
	}
	ra := newReadAhead(ctx, bs, readAhead)
	defer ra.close()
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		k := e.c.KeyString()
		if _, ok := seen[k]; ok {
			continue
		}
		seen[k] = struct{}{}
		var data, pooled []byte
		if isIdentity(e.c) {
			d, err := identityData(e.c)
			if err != nil {
				return &PeerError{Msg: fmt.Sprintf("block %s: %v", e.c, err)}
			}
			data = d
		} else {
			// The blocks on top of the stack are the next ones sent unless this one has
			// children: start reading them now.
			for i := len(stack) - 1; i >= 0 && i >= len(stack)-2*readAhead && ra.room(); i-- {
				if c := stack[i].c; !isIdentity(c) {
					if _, ok := seen[c.KeyString()]; !ok {
						ra.start(c)
					}
				}
			}
			blk, isPooled, err := ra.get(e.c)
			if err != nil {
				if ipld.IsNotFound(err) {
					return &PeerError{Msg: fmt.Sprintf("block %s: not found", e.c)}
				}
				return &PeerError{Msg: fmt.Sprintf("block %s: %v", e.c, err)}
			}
			data = blk.RawData()
			if isPooled {
				pooled = data
			}
			if len(data) > MaxBlockSize {
				return &PeerError{Msg: fmt.Sprintf("block %s: %d bytes, over the %d limit", e.c, len(data), MaxBlockSize)}
			}
			if limit != nil {
				if err := limit.WaitN(ctx, len(data)); err != nil {
					return err
				}
			}
			if err := writeBlockFrame(w, data); err != nil {
				return err
			}
		}
		var links []Link
		var err error
		if e.dag {
			links, err = Links(e.c, data)
		}
		if pooled != nil {
			// Written to the bufio.Writer (copied or sent) and parsed: nothing refers to
			// it any more (link CIDs are copies).
			pool.Put(pooled)
		}
		if err != nil {
			return &PeerError{Msg: err.Error()}
		}
		for i := len(links) - 1; i >= 0; i-- {
			stack = append(stack, entry{links[i].Cid, true})
		}
	}
	return nil
}

// PooledGetter is a blockstore that can read a block into a buffer from go-buffer-pool. The
// server returns such a buffer to the pool once the block is written to the stream, instead
// of leaving a fresh slice per block to the GC. pooled false: the block's bytes are not the
// pool's (e.g. the store fell back to Get) and must not be returned.
type PooledGetter interface {
	GetPooled(ctx context.Context, c cid.Cid) (blk blocks.Block, pooled bool, err error)
}

// getBlock reads c from bs, through GetPooled when bs has it.
func getBlock(ctx context.Context, bs blockstore.Blockstore, c cid.Cid) (blocks.Block, bool, error) {
	if pg, ok := bs.(PooledGetter); ok {
		return pg.GetPooled(ctx, c)
	}
	blk, err := bs.Get(ctx, c)
	return blk, false, err
}

// readAhead reads blocks on two goroutines before their turn; at most n are held at once.
type readAhead struct {
	ctx     context.Context
	bs      blockstore.Blockstore
	n       int
	pending map[string]*pendingGet
	reqs    chan *pendingGet
}

type pendingGet struct {
	c      cid.Cid
	blk    blocks.Block
	pooled bool
	err    error
	done   chan struct{}
}

func newReadAhead(ctx context.Context, bs blockstore.Blockstore, n int) *readAhead {
	ra := &readAhead{ctx: ctx, bs: bs, n: n, pending: map[string]*pendingGet{}}
	if n > 0 {
		ra.reqs = make(chan *pendingGet, n)
		for i := 0; i < 2; i++ {
			go func() {
				for p := range ra.reqs {
					p.blk, p.pooled, p.err = getBlock(ctx, bs, p.c)
					close(p.done)
				}
			}()
		}
	}
	return ra
}

func (ra *readAhead) room() bool { return len(ra.pending) < ra.n }

// start queues a read of c unless one is pending; the channel never blocks: it holds at most
// len(pending) <= n requests.
func (ra *readAhead) start(c cid.Cid) {
	k := c.KeyString()
	if _, ok := ra.pending[k]; ok {
		return
	}
	p := &pendingGet{c: c, done: make(chan struct{})}
	ra.pending[k] = p
	ra.reqs <- p
}

func (ra *readAhead) get(c cid.Cid) (blocks.Block, bool, error) {
	k := c.KeyString()
	if p, ok := ra.pending[k]; ok {
		delete(ra.pending, k)
		<-p.done
		return p.blk, p.pooled, p.err
	}
	return getBlock(ra.ctx, ra.bs, c)
}

func (ra *readAhead) close() {
	if ra.reqs != nil {
		close(ra.reqs)
	}
}

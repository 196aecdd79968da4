package xfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	pool "github.com/libp2p/go-buffer-pool"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/internal/rawleaf"
)

// Stats describes a finished (or failed) Fetch.
type Stats struct {
	Blocks int64
	Bytes  int64
	// KeptBlocks and KeptBytes are what the local store already held of the DAG (an
	// interrupted fetch resumed): those subtrees were not asked for again. Progress counts
	// them; Blocks and Bytes do not.
	KeptBlocks int64
	KeptBytes  int64
	PerPeer    map[peer.ID]PeerStats
	// Dropped holds, for each peer dropped during the transfer, why.
	Dropped map[peer.ID]error
}

// PeerStats counts what one peer delivered (verified blocks only).
type PeerStats struct {
	Blocks, Bytes int64
}

// FetchOption tunes FetchWithStats.
type FetchOption func(*fetchConfig)

type fetchConfig struct {
	batchBytes int64
	streams    int  // concurrent requests per peer
	recycle    bool // block buffers go back to a pool once the store has them
	checkpoint checkpoint
	onBlock    func(peer.ID) // test hook: called after each verified block, in the receiving goroutine
}

// checkpoint is WithCheckpoints' setting.
type checkpoint struct {
	every    time.Duration
	maxBytes int64
	sync     func() error
	now      func() time.Time
}

// WithCheckpoints calls sync (the blockstore's Sync: what it has stored becomes durable and
// findable after a crash) after a PutMany once every interval has passed or maxBytes were
// stored since the last one. A store that indexes blocks only at Sync (the pack store) loses
// every block of a killed fetch without it, and the fetch started again could keep nothing;
// with it, a fetch killed at 90 % resumes from what was stored until the last checkpoint.
// The interval is measured on now (the node's clock; nil: the wall clock).
func WithCheckpoints(every time.Duration, maxBytes int64, sync func() error, now func() time.Time) FetchOption {
	if now == nil {
		now = time.Now // wall clock: the default where no clock is given
	}
	return func(c *fetchConfig) { c.checkpoint = checkpoint{every, maxBytes, sync, now} }
}

// WithRecycledBuffers reads blocks into buffers from a pool and returns each buffer once the
// blockstore's PutMany has returned, instead of allocating every block afresh. Only for a
// store that copies what it is given (writes it to a file) and keeps no reference to a
// block's bytes after PutMany: an in-memory store would see its blocks overwritten.
//
// Why: profiled on a 1 GiB fetch into the pack store, a fresh 256 KiB slice per block made
// the receiving daemon fault in new pages on every copy out of yamux's buffer (memmove
// 1.28 s of 4.89 s CPU, 872 MB allocated), and the GC return them to the OS (madvise).
func WithRecycledBuffers() FetchOption {
	return func(c *fetchConfig) { c.recycle = true }
}

// WithBatchBytes sets the estimated size of the work one request covers when the DAG is split
// across several peers (default: shrinking as the queue drains, see batchQueue.target).
// Smaller batches rebalance faster when peers differ in speed; each costs one round trip.
func WithBatchBytes(n int64) FetchOption {
	return func(c *fetchConfig) { c.batchBytes = n }
}

// WithStreamsPerPeer sets how many requests run at once on each peer (default 2). One stream
// leaves a core idle while the other decrypts or hashes; two keep both sides busy.
func WithStreamsPerPeer(n int) FetchOption {
	return func(c *fetchConfig) { c.streams = n }
}

// Fetch gets every block of the DAG under root from the given peers (split across them),
// verifying each block against its CID as it arrives and writing it to bs. A peer that sends a
// block not matching its CID, lacks a block, or disappears is dropped for this transfer and
// what it still owed is fetched from the others. progress, if not nil, is called after each
// verified block with the total block bytes received so far (as tasks.PackOptions.Progress
// counts), never concurrently.
func Fetch(ctx context.Context, h host.Host, root cid.Cid, peers []peer.ID, bs blockstore.Blockstore, progress func(int64)) error {
	_, err := FetchWithStats(ctx, h, root, peers, bs, progress)
	return err
}

// pend is work not yet received: a subtree root (or a single block) and its estimated size.
type pend struct {
	c    cid.Cid
	mode Mode
	size uint64
}

// fatalError stops the whole transfer: retrying on another peer cannot help.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

type fetcher struct {
	h        host.Host
	cfg      fetchConfig
	progress func(int64)
	store    *storer
	bs       blockstore.Blockstore

	mu       sync.Mutex
	stats    Stats
	received int64 // progress total, under mu
}

// FetchWithStats is Fetch that also reports per-peer figures and why peers were dropped.
func FetchWithStats(ctx context.Context, h host.Host, root cid.Cid, peers []peer.ID, bs blockstore.Blockstore, progress func(int64), opts ...FetchOption) (Stats, error) {
	return FetchManyWithStats(ctx, h, []cid.Cid{root}, peers, bs, progress, opts...)
}

// FetchManyWithStats is FetchWithStats of several DAGs in one transfer: their missing
// subtrees share the batches, so many small DAGs cost a round trip per batch, not one each
// (a pin repair round: node.fetchLedgerObjects). progress counts the bytes of all of them.
func FetchManyWithStats(ctx context.Context, h host.Host, roots []cid.Cid, peers []peer.ID, bs blockstore.Blockstore, progress func(int64), opts ...FetchOption) (Stats, error) {
	f := &fetcher{h: h, progress: progress, stats: Stats{PerPeer: map[peer.ID]PeerStats{}, Dropped: map[peer.ID]error{}}}
	f.cfg.streams = 2
	for _, o := range opts {
		o(&f.cfg)
	}
	f.cfg.streams = max(f.cfg.streams, 1)
	if len(roots) == 0 {
		return f.stats, errors.New("xfer: fetch: no root CID")
	}
	what := roots[0].String()
	if len(roots) > 1 {
		what = fmt.Sprintf("%d DAGs (%s, …)", len(roots), roots[0])
	}
	for _, root := range roots {
		if !root.Defined() {
			return f.stats, errors.New("xfer: fetch: undefined root CID")
		}
	}
	live := dedupPeers(peers, h.ID())
	if len(live) == 0 {
		return f.stats, fmt.Errorf("xfer: fetching %s: no peers to fetch from (connect to a peer that has it first)", what)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f.store = newStorer(ctx, cancel, bs, f.cfg.recycle, f.cfg.checkpoint)
	f.bs = bs
	err := f.run(ctx, roots, live)
	serr := f.store.finish()
	if serr != nil {
		err = fmt.Errorf("xfer: fetching %s: storing blocks: %w", what, serr)
	} else if err != nil {
		err = fmt.Errorf("xfer: fetching %s: %w", what, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, err
}

func dedupPeers(peers []peer.ID, self peer.ID) []peer.ID {
	var out []peer.ID
	seen := map[peer.ID]bool{self: true}
	for _, p := range peers {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func (f *fetcher) drop(p peer.ID, err error) {
	f.mu.Lock()
	f.stats.Dropped[p] = err
	f.mu.Unlock()
}

// run fetches everything; it returns when every DAG is complete or no peer can supply the
// rest.
func (f *fetcher) run(ctx context.Context, roots []cid.Cid, live []peer.ID) error {
	frontier, err := f.missing(ctx, roots)
	if err != nil {
		return err
	}
	if len(frontier) == 0 {
		return nil
	}
	if slots := len(live) * f.cfg.streams; slots > 1 {
		// Fetch the top of the DAG block by block until there are enough subtrees to spread.
		for depth := 0; depth < 4 && len(frontier) > 0 && len(frontier) < 8*slots; depth++ {
			for i := range frontier {
				frontier[i].mode = ModeBlock
			}
			var children []pend
			children, live, err = f.fetchAnywhere(ctx, frontier, live)
			if err != nil {
				return err
			}
			frontier = children
		}
		for i := range frontier {
			frontier[i].mode = ModeDAG
		}
	}
	return f.pool(ctx, frontier, live)
}

// missing walks what the local store already holds of each root's DAG (the blocks an interrupted
// fetch verified and stored) and returns the roots of the subtrees it lacks, in DAG order,
// counting what it holds as kept. A root it lacks is returned alone, at the cost of one Has.
// A held block whose subtree is incomplete is walked into; a lacking one is asked for whole
// (its subtree may be partly here: the server resends those blocks, the store keeps one).
func (f *fetcher) missing(ctx context.Context, roots []cid.Cid) ([]pend, error) {
	var out []pend
	seen := map[cid.Cid]bool{}
	var walk func(c cid.Cid, size uint64) error
	walk = func(c cid.Cid, size uint64) error {
		if seen[c] || isIdentity(c) {
			return nil
		}
		seen[c] = true
		lack := func() error {
			out = append(out, pend{c: c, mode: ModeDAG, size: size})
			return nil
		}
		keep := func(n int) {
			f.mu.Lock()
			f.stats.KeptBlocks++
			f.stats.KeptBytes += int64(n)
			f.received += int64(n)
			f.mu.Unlock()
		}
		if c.Type() == cid.Raw {
			// A raw leaf's declared size is its length: one of another size was torn by a
			// power loss before it was synced, so it is asked for again (as the node's
			// localComplete decides). Leaves are not re-hashed: the store verified them.
			sz, err := f.bs.GetSize(ctx, c)
			if err != nil || (size != 0 && uint64(sz) != size) {
				return lack()
			}
			keep(sz)
			return nil
		}
		blk, err := f.bs.Get(ctx, c)
		if err != nil || Verify(c, blk.RawData()) != nil {
			return lack()
		}
		links, err := Links(c, blk.RawData())
		if err != nil {
			return &fatalError{err}
		}
		keep(len(blk.RawData()))
		for _, l := range links {
			if err := walk(l.Cid, l.Size); err != nil {
				return err
			}
		}
		return nil
	}
	for _, root := range roots {
		if err := walk(root, 0); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	kept := f.received
	f.mu.Unlock()
	if kept > 0 && f.progress != nil {
		f.progress(kept)
	}
	return out, nil
}

// fetchAnywhere gets items from the first live peer that can serve them all, dropping peers
// that fail, and returns the children of ModeBlock items.
func (f *fetcher) fetchAnywhere(ctx context.Context, items []pend, live []peer.ID) ([]pend, []peer.ID, error) {
	var children []pend
	for len(items) > 0 {
		if len(live) == 0 {
			return nil, nil, f.noPeersLeft(items)
		}
		p := live[0]
		kids, rest, err := f.runBatch(ctx, p, items)
		children = append(children, kids...)
		if err == nil {
			break
		}
		var fe *fatalError
		if errors.As(err, &fe) || ctx.Err() != nil {
			return nil, nil, err
		}
		f.drop(p, err)
		live = live[1:]
		items = rest
	}
	return children, live, nil
}

func (f *fetcher) noPeersLeft(items []pend) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var why []string
	for p, err := range f.stats.Dropped {
		why = append(why, fmt.Sprintf("%s: %v", p, err))
	}
	sort.Strings(why)
	more := ""
	if len(items) > 1 {
		more = fmt.Sprintf(" (and %d more subtrees)", len(items)-1)
	}
	return fmt.Errorf("block %s%s not fetched: every peer failed (%s); connect to another peer that has it and retry",
		items[0].c, more, strings.Join(why, "; "))
}

type batchResult struct {
	p    peer.ID
	rest []pend
	err  error
}

// pool hands batches of subtrees to idle stream slots (streams per peer) until the queue
// drains.
func (f *fetcher) pool(ctx context.Context, items []pend, live []peer.ID) error {
	queue := newBatchQueue(items, len(live)*f.cfg.streams, f.cfg.batchBytes)
	// A fatal error (local store, unwalkable block, caller's cancel) stops the other batches.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan batchResult)
	var idle []peer.ID // one entry per free stream slot, peers interleaved
	for i := 0; i < f.cfg.streams; i++ {
		idle = append(idle, live...)
	}
	dropped := map[peer.ID]bool{}
	inflight := 0
	var fatal error
	for {
		for fatal == nil && len(idle) > 0 && len(queue.items) > 0 {
			batch := queue.next()
			p := idle[0]
			idle = idle[1:]
			inflight++
			go func() {
				_, rest, err := f.runBatch(ctx, p, batch)
				results <- batchResult{p, rest, err}
			}()
		}
		if inflight == 0 {
			if fatal != nil {
				return fatal
			}
			if len(queue.items) == 0 {
				return nil
			}
			return f.noPeersLeft(queue.items)
		}
		r := <-results
		inflight--
		if r.err == nil {
			if !dropped[r.p] {
				idle = append(idle, r.p)
			}
			continue
		}
		var fe *fatalError
		if errors.As(r.err, &fe) || ctx.Err() != nil {
			if fatal == nil {
				fatal = r.err
				if ctx.Err() != nil && !errors.As(r.err, &fe) {
					fatal = ctx.Err()
				}
				cancel()
			}
			continue
		}
		if !dropped[r.p] {
			dropped[r.p] = true
			f.drop(r.p, r.err)
			idle = slices.DeleteFunc(idle, func(p peer.ID) bool { return p == r.p })
		}
		queue.pushFront(r.rest)
	}
}

// batchQueue holds the subtree roots not yet handed to a stream, in DAG order, and cuts
// batches off its front. Used by pool's goroutine only.
type batchQueue struct {
	items  []pend
	queued int64 // estimated bytes in items (dag-pb Tsize; 1 for an item of unknown size)
	slots  int   // request streams in all
	fixed  int64 // WithBatchBytes; 0 sizes batches by what is queued
}

func newBatchQueue(items []pend, slots int, fixed int64) *batchQueue {
	q := &batchQueue{slots: slots, fixed: fixed}
	q.pushFront(items)
	return q
}

func estimate(p pend) int64 { return int64(max(p.size, 1)) }

// target is the estimated size of the next batch. Guided self-scheduling: each batch is a
// share of what is still queued (half of an even split over the streams, within 8-256 MiB),
// so batches shrink towards the end and the streams finish together. The fixed size used
// before (a quarter of each stream's share of the whole DAG) left the last large batch on
// one stream while the other idled: 0.26 s of a 2.5 s bundle fetch (bench/transfer's bundle,
// one peer, two streams, the end of each batch traced); TestBatchesShrinkSoStreamsFinishTogether.
// The 8 MiB floor keeps the round trip each batch costs small beside its transfer.
func (q *batchQueue) target() int64 {
	switch {
	case q.slots <= 1:
		return math.MaxInt64
	case q.fixed > 0:
		return q.fixed
	}
	return min(max(q.queued/int64(2*q.slots), 8<<20), 256<<20)
}

// next cuts the next batch: at least one item, then items while they fit the target.
func (q *batchQueue) next() []pend {
	target := q.target()
	n, sum := 0, int64(0)
	for n < len(q.items) && n < MaxRequestItems {
		size := estimate(q.items[n])
		if n > 0 && sum+size > target {
			break
		}
		sum += size
		n++
	}
	batch := q.items[:n:n]
	q.items = q.items[n:]
	q.queued -= sum
	return batch
}

// pushFront puts back what a failed stream still owed, ahead of the rest.
func (q *batchQueue) pushFront(items []pend) {
	for _, p := range items {
		q.queued += estimate(p)
	}
	q.items = append(slices.Clip(items), q.items...)
}

// runBatch requests items from p and receives them in protocol order. It returns the links of
// ModeBlock items, and on failure the items (subtree roots) not yet received.
func (f *fetcher) runBatch(ctx context.Context, p peer.ID, items []pend) (children, rest []pend, err error) {
	type entry struct {
		pend
		dag bool
	}
	stack := make([]entry, 0, len(items))
	for i := len(items) - 1; i >= 0; i-- {
		stack = append(stack, entry{items[i], items[i].mode == ModeDAG})
	}
	remaining := func() []pend {
		out := make([]pend, 0, len(stack))
		for i := len(stack) - 1; i >= 0; i-- {
			e := stack[i].pend
			if stack[i].dag {
				e.mode = ModeDAG
			}
			out = append(out, e)
		}
		return out
	}

	s, err := f.h.NewStream(ctx, p, ProtocolID)
	if err != nil {
		return children, remaining(), fmt.Errorf("opening stream: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	reqItems := make([]Item, len(items))
	for i, it := range items {
		reqItems[i] = Item{Mode: it.mode, Cid: it.c}
	}
	if _, err := s.Write(AppendRequest(nil, reqItems)); err != nil {
		s.Reset()
		return children, remaining(), fmt.Errorf("sending request: %w", err)
	}
	_ = s.CloseWrite()
	// A buffer smaller than a typical block lets bufio read block bodies straight into
	// their final slice instead of copying them through the buffer.
	r := bufio.NewReaderSize(s, 64<<10)
	var alloc func(int) []byte
	if f.cfg.recycle {
		alloc = pool.Get
	}
	seen := make(map[string]struct{})
	// ahead is the next block's frame when it was read early, to be hashed together with
	// the block before it (readPair).
	var ahead *aheadFrame
	var nb, nbytes int64
	defer func() {
		f.mu.Lock()
		ps := f.stats.PerPeer[p]
		ps.Blocks += nb
		ps.Bytes += nbytes
		f.stats.PerPeer[p] = ps
		f.stats.Blocks += nb
		f.stats.Bytes += nbytes
		f.mu.Unlock()
	}()
	for len(stack) > 0 {
		e := stack[len(stack)-1]
		k := e.c.KeyString()
		if _, ok := seen[k]; ok {
			stack = stack[:len(stack)-1]
			continue
		}
		var data []byte
		if isIdentity(e.c) {
			if data, err = identityData(e.c); err != nil {
				return nil, nil, &fatalError{fmt.Errorf("block %s: %w", e.c, err)}
			}
		} else {
			verified := false
			if ahead != nil {
				data, err, verified = ahead.data, ahead.err, ahead.verified
				ahead = nil
			} else {
				data, err = readFrameInto(r, alloc)
				if err == nil && len(stack) >= 2 {
					if next := stack[len(stack)-2].c; pairable(e.c, next, seen) {
						ahead = readPair(r, alloc, e.c, data, next)
						verified = ahead.first
					}
				}
			}
			if err != nil {
				s.Reset()
				if err == errEnd {
					err = errors.New("response ended early")
				}
				return children, remaining(), fmt.Errorf("receiving block %s: %w", e.c, err)
			}
			if !verified {
				if err := Verify(e.c, data); err != nil {
					s.Reset()
					return children, remaining(), fmt.Errorf("sent a block that does not match its CID %s", e.c)
				}
			}
		}
		stack = stack[:len(stack)-1]
		seen[k] = struct{}{}
		if e.dag || e.mode == ModeBlock {
			links, err := Links(e.c, data)
			if err != nil {
				s.Reset()
				return nil, nil, &fatalError{err}
			}
			if e.dag {
				for i := len(links) - 1; i >= 0; i-- {
					stack = append(stack, entry{pend{c: links[i].Cid, mode: ModeDAG, size: links[i].Size}, true})
				}
			} else {
				for _, l := range links {
					children = append(children, pend{c: l.Cid, mode: ModeDAG, size: l.Size})
				}
			}
		}
		if isIdentity(e.c) {
			continue
		}
		blk, _ := blocks.NewBlockWithCid(data, e.c)
		if err := f.store.put(ctx, blk); err != nil {
			s.Reset()
			return nil, nil, &fatalError{err}
		}
		nb++
		nbytes += int64(len(data))
		if f.progress != nil {
			f.mu.Lock()
			f.received += int64(len(data))
			f.progress(f.received)
			f.mu.Unlock()
		}
		if f.cfg.onBlock != nil {
			f.cfg.onBlock(p)
		}
	}
	if _, err := readFrame(r); err != errEnd {
		s.Reset()
		// Everything asked for arrived and was verified, so nothing is owed.
		if err == nil {
			err = errors.New("sent more blocks than asked for")
		}
		return children, nil, fmt.Errorf("after the last block: %w", err)
	}
	_ = s.Close()
	return children, nil, nil
}

// aheadFrame is a block's frame read before its turn, together with the one before it.
type aheadFrame struct {
	data     []byte
	err      error // reading the frame failed: reported at its turn, as if read then
	verified bool  // it matched its CID in the paired pass
	first    bool  // the block before it matched its CID in the paired pass
}

// pairable says whether the block c about to be received and the one the server sends right
// after it, next, can be hashed in one interleaved pass: both raw sha2-256 leaves (the bulk
// of a bundle; a leaf has no links, so next is the very next frame) and next not a block
// the server skips (sent already on this stream, or c itself).
func pairable(c, next cid.Cid, seen map[string]struct{}) bool {
	if !rawleaf.Is(c) || !rawleaf.Is(next) || c.Equals(next) {
		return false
	}
	_, sent := seen[next.KeyString()]
	return !sent
}

// readPair reads next's frame right after c's (data) and, when both are the same length
// (every full 256 KiB leaf), hashes them in one pass (internal/sha256x2: 1.66x
// crypto/sha256 per core on this machine). A block it could not check that way is
// verified at its turn as any other.
func readPair(r *bufio.Reader, alloc func(int) []byte, c cid.Cid, data []byte, next cid.Cid) *aheadFrame {
	a := &aheadFrame{}
	a.data, a.err = readFrameInto(r, alloc)
	if a.err == nil && len(a.data) == len(data) {
		pairsHashed.Add(1)
		a.first, a.verified = rawleaf.Check2(c, next, data, a.data)
	}
	return a
}

// pairsHashed counts the pairs of blocks readPair hashed together (tests read it).
var pairsHashed atomic.Int64

// storer writes verified blocks in batches from one goroutine, so that receiving and hashing
// overlap with the blockstore's work.
type storer struct {
	bs      blockstore.Blockstore
	recycle bool // return each block's bytes to the buffer pool after PutMany
	cp      checkpoint
	ch      chan blocks.Block
	done    chan struct{}
	cancel  context.CancelFunc
	err     error // set before done closes
}

// The storer's batches and queue are small on purpose: a block is written while its bytes are
// still in the CPU caches from the network read and the hash. Profiled on a 1 GiB fetch into
// the pack store on tmpfs (2 cores), 16 MiB batches behind a 256-block queue (up to 80 MiB of
// received blocks waiting) made the receiver's pwrite copy cost 2.9 s of its 5.7 s CPU (the
// copy read every block back from memory, and the pool handed out ever new buffers); with
// 2 MiB and 16 blocks the same pwrites cost 0.43 s and the receiver's peak RSS fell from
// 115-150 to 70-77 MiB.
const (
	storeBatchBytes  = 2 << 20
	storeBatchBlocks = 1024
	storeQueueBlocks = 16
)

func newStorer(ctx context.Context, cancel context.CancelFunc, bs blockstore.Blockstore, recycle bool, cp checkpoint) *storer {
	s := &storer{bs: bs, recycle: recycle, cp: cp, ch: make(chan blocks.Block, storeQueueBlocks), done: make(chan struct{}), cancel: cancel}
	go s.loop(context.WithoutCancel(ctx))
	return s
}

func (s *storer) loop(ctx context.Context) {
	defer close(s.done)
	batch := make([]blocks.Block, 0, storeBatchBlocks)
	var lastSync time.Time
	if s.cp.sync != nil {
		lastSync = s.cp.now()
	}
	unsynced := int64(0)
	for b := range s.ch {
		if s.err != nil {
			continue // drain so senders never block
		}
		batch = append(batch[:0], b)
		size := len(b.RawData())
	fill:
		for size < storeBatchBytes && len(batch) < storeBatchBlocks {
			select {
			case nb, ok := <-s.ch:
				if !ok {
					break fill
				}
				batch = append(batch, nb)
				size += len(nb.RawData())
			default:
				break fill
			}
		}
		if err := s.bs.PutMany(ctx, batch); err != nil {
			s.err = err
			s.cancel()
		} else if unsynced += int64(size); s.cp.sync != nil && (s.cp.now().Sub(lastSync) >= s.cp.every || unsynced >= s.cp.maxBytes) {
			if err := s.cp.sync(); err != nil {
				s.err = err
				s.cancel()
			}
			lastSync, unsynced = s.cp.now(), 0
		}
		if s.recycle {
			for _, b := range batch {
				pool.Put(b.RawData())
			}
		}
		clear(batch)
	}
}

func (s *storer) put(ctx context.Context, b blocks.Block) error {
	select {
	case s.ch <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish waits for every queued block to be written and returns the first store error.
func (s *storer) finish() error {
	close(s.ch)
	<-s.done
	return s.err
}

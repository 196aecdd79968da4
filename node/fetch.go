package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ipfs/boxo/blockservice"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"

	"github.com/evalmesh/evalmesh/node/pins"
	"github.com/evalmesh/evalmesh/node/xfer"
)

// A streaming fetch Syncs the blockstore at least this often (time, stored bytes): a fetch
// killed part way loses at most that much of what it had received. Each Sync waits for
// writeback that Put already started, so 1 GiB costs a handful of fdatasyncs.
const (
	fetchCheckpointEvery = 250 * time.Millisecond
	fetchCheckpointBytes = 64 << 20
)

// maxWantBatch bounds how many CIDs one bitswap session request asks for at once.
const maxWantBatch = 1024

// ErrTooLarge is wrapped when a bundle declares more bytes than max_bundle_size allows.
var ErrTooLarge = errors.New("bundle over max_bundle_size")

// errStalled is the cancel cause when no block arrived for StallTimeout.
var errStalled = errors.New("stalled")

// ErrNotFound is wrapped when no connected peer sent a wanted block within the timeout.
var ErrNotFound = errors.New("not found on any connected peer")

// Fetch makes every block of the DAG under root local, asking connected peers for what is
// missing. Each block is checked against its CID on arrival (bitswap rehashes what it
// receives; a block whose bytes do not hash to a wanted CID is never delivered, so a peer
// serving corrupt data simply does not count as having sent the block and the session asks
// others). progress, if set, gets the bytes made local so far and the declared total.
//
// Fetch refuses a DAG whose declared size exceeds max_bundle_size, and fails with a message
// naming the missing block and the peers asked when no peer sends anything for StallTimeout.
func (n *Node) Fetch(ctx context.Context, root cid.Cid, progress func(done, total int64)) error {
	_, err := n.fetch(ctx, root, progress, n.opts.StallTimeout)
	return err
}

// fetchRun is one Fetch: its phases are the methods below, in the order fetch calls them.
type fetchRun struct {
	n        *Node
	root     cid.Cid
	ctx      context.Context
	cancel   context.CancelCauseFunc
	stall    time.Duration
	last     atomic.Int64 // unix nanos of the last block received
	mark     uint64       // the blockstore's failed-write count at the start
	total    int64        // the declared size
	shown    int64        // progress only moves forward, across the streaming try and bitswap
	local    bool         // everything was already here: no transfer bytes counted
	progress func(done, total int64)
	kept     FetchReport // what the streaming fetch kept
	sess     *blockservice.Session
	sessCtx  context.Context // sess lives while it does
	endSess  context.CancelFunc
}

// fetch is Fetch with the stall timeout given: watch for stalls, get the root and check its
// declared size, stop if everything is local, else try the streaming protocol and then
// bitswap.
func (n *Node) fetch(ctx context.Context, root cid.Cid, progress func(done, total int64), stall time.Duration) (FetchReport, error) {
	f := &fetchRun{n: n, root: root, stall: stall, progress: progress}
	err := f.run(ctx)
	f.kept.Total = f.total
	return f.kept, err
}

func (f *fetchRun) run(ctx context.Context) error {
	n := f.n
	f.ctx, f.cancel = context.WithCancelCause(ctx)
	defer f.cancel(nil)
	f.touch()
	go f.watchStalls()
	f.mark, _ = n.writes.since(0)

	f.newSession()
	defer func() { f.endSess() }()
	rootBlk, err := f.fetchRoot(f.sess)
	if err != nil {
		return err
	}
	if n.localComplete(f.ctx, rootBlk) {
		f.local = true // nothing transferred
		f.report(f.total)
		return nil
	}
	if done, err := f.tryStreaming(); done || err != nil {
		return err
	}
	return f.viaBitswap(rootBlk)
}

// newSession replaces the fetch's bitswap session (ending the one before, which cancels its
// wants) with a fresh one, which starts by asking every connected peer.
func (f *fetchRun) newSession() {
	if f.endSess != nil {
		f.endSess()
	}
	f.sessCtx, f.endSess = context.WithCancel(f.ctx)
	f.sess = blockservice.NewSession(f.sessCtx, f.n.bserv)
}

func (f *fetchRun) touch() { f.last.Store(f.n.opts.Clock.Now().UnixNano()) }

// watchStalls cancels the fetch when no block arrived for f.stall.
func (f *fetchRun) watchStalls() {
	clk := f.n.opts.Clock
	tick := clk.NewTicker(max(f.stall/10, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-tick.Chan():
			if clk.Since(time.Unix(0, f.last.Load())) > f.stall {
				f.cancel(errStalled)
				return
			}
		}
	}
}

func (f *fetchRun) report(d int64) {
	if d <= f.shown {
		return
	}
	if !f.local {
		f.n.metrics.transferBytes.Add(float64(d - f.shown))
	}
	f.shown = d
	if f.progress != nil {
		f.progress(d, f.total)
	}
}

// fail explains why what did not arrive: a failed write (a full disk), a stall (naming the
// peers asked), or err.
func (f *fetchRun) fail(err error, what string) error {
	if _, werr := f.n.writes.since(f.mark); werr != nil {
		return fmt.Errorf("fetch %s: storing blocks failed: %w", f.root, werr)
	}
	if context.Cause(f.ctx) == errStalled {
		peers := f.n.host.Network().Peers()
		asked := "no peers are connected"
		if len(peers) > 0 {
			names := make([]string, len(peers))
			for i, p := range peers {
				names[i] = p.String()
			}
			sort.Strings(names)
			asked = fmt.Sprintf("asked %d connected peers: %s", len(peers), strings.Join(names, ", "))
		}
		return fmt.Errorf("fetch %s: %w: no connected peer sent %s for %s (%s); connect to a node that has it with `evalmesh connect ADDR`", f.root, ErrNotFound, what, f.stall, asked)
	}
	return fmt.Errorf("fetch %s: %s: %w", f.root, what, err)
}

// fetchRoot gets the root block and refuses a DAG that declares more than max_bundle_size.
func (f *fetchRun) fetchRoot(sess *blockservice.Session) (blocks.Block, error) {
	rootBlk, err := sess.GetBlock(f.ctx, f.root)
	if err != nil {
		return nil, f.fail(err, "root block "+f.root.String())
	}
	f.touch()
	if f.total, err = pins.DeclaredSize(rootBlk); err != nil {
		return nil, err
	}
	if max := f.n.cfg.MaxBundleSize; max > 0 && f.total > max {
		return nil, fmt.Errorf("fetch %s: declares %d bytes: %w of %d bytes (raise max_bundle_size in %s to fetch it)", f.root, f.total, ErrTooLarge, max, f.n.home.ConfigPath())
	}
	f.report(int64(len(rootBlk.RawData())))
	return rootBlk, nil
}

// tryStreaming fetches over the streaming protocol (one round trip per batch instead of one
// per block) from the peers that speak it. done is true when the fetch is over (err says
// how); false with a nil error means bitswap should try.
func (f *fetchRun) tryStreaming() (done bool, err error) {
	n := f.n
	peers := n.xferPeers(f.ctx)
	if len(peers) == 0 || n.opts.BitswapOnly {
		return false, nil
	}
	xctx, xcancel := context.WithCancelCause(f.ctx)
	var xopts []xfer.FetchOption
	if n.opts.WrapBlockstore == nil {
		// The pack and flat stores write each block to a file and keep no reference to its
		// bytes, so the transfer may reuse its block buffers (a wrapper might keep them).
		xopts = append(xopts, xfer.WithRecycledBuffers())
	}
	// Checkpoints make what arrived durable and indexed as the fetch goes, so that a daemon
	// killed part way resumes from it (the pack store indexes blocks only at Sync).
	xopts = append(xopts, xfer.WithCheckpoints(fetchCheckpointEvery, fetchCheckpointBytes, n.store.Sync, n.opts.Clock.Now))
	st, err := xfer.FetchWithStats(xctx, n.host, f.root, peers, n.bstore, func(got int64) {
		f.touch()
		if got > f.total {
			xcancel(fmt.Errorf("received more than the %d bytes its root declares", f.total))
			return
		}
		f.report(got)
	}, xopts...)
	cause := context.Cause(xctx)
	xcancel(nil)
	if kept := (FetchReport{KeptBlocks: st.KeptBlocks, KeptBytes: st.KeptBytes}); kept.Resumed() {
		// A fetch interrupted earlier (a kill, a lost peer) left verified blocks: only the
		// rest was asked for, and the progress started from what was kept.
		n.opts.Logf("fetch %s: resumed: kept %d blocks (%d bytes) already here, fetched %d blocks (%d bytes)", f.root, st.KeptBlocks, st.KeptBytes, st.Blocks, st.Bytes)
		f.kept.KeptBlocks, f.kept.KeptBytes = kept.KeptBlocks, kept.KeptBytes
	}
	if err == nil {
		f.report(f.total)
		return true, nil
	}
	if _, werr := n.writes.since(f.mark); f.ctx.Err() != nil || werr != nil {
		return true, f.fail(err, "blocks")
	}
	if cause != nil {
		return true, fmt.Errorf("fetch %s: %w; the DAG is not what its root claims", f.root, cause)
	}
	n.opts.Logf("fetch %s: %s from %d peers failed (%v); trying bitswap", f.root, xfer.ProtocolID, len(peers), err)
	return false, nil
}

// viaBitswap walks the DAG breadth-first from the root, asking the session for each level's
// missing blocks in batches of maxWantBatch, and checks the bytes against the declared size.
func (f *fetchRun) viaBitswap(rootBlk blocks.Block) error {
	n, ctx := f.n, f.ctx
	done := int64(len(rootBlk.RawData()))
	frontier, err := pins.Links(rootBlk)
	if err != nil {
		return err
	}
	// A bundle may hold the same block or subtree twice (identical files); it is fetched once
	// and its declared size counted again, so done ends equal to total.
	seen := map[cid.Cid]struct{}{f.root: {}}
	for len(frontier) > 0 {
		var next, batch []pins.Link
		for start := 0; start < len(frontier); start = start + len(batch) {
			batch = frontier[start:min(start+maxWantBatch, len(frontier))]
			want := make(map[cid.Cid]struct{}, len(batch))
			var ask []cid.Cid
			for _, l := range batch {
				if _, dup := seen[l.Cid]; dup {
					done += int64(l.Tsize)
					continue
				}
				seen[l.Cid] = struct{}{}
				if emptyBlock(l.Cid) {
					// Bitswap servers never send a zero-length block (only HAVE), so an
					// empty file's leaf is made here; its CID proves its content.
					blk, _ := blocks.NewBlockWithCid(nil, l.Cid)
					if err := n.bstore.Put(ctx, blk); err != nil {
						return err
					}
					continue
				}
				if _, dup := want[l.Cid]; !dup {
					want[l.Cid] = struct{}{}
					ask = append(ask, l.Cid)
				}
			}
			if len(ask) == 0 {
				continue
			}
			err := f.receive(ask, want, func(b blocks.Block) error {
				if _, werr := n.writes.since(f.mark); werr != nil {
					return f.fail(werr, "blocks")
				}
				f.touch()
				done += int64(len(b.RawData()))
				if done > f.total {
					return fmt.Errorf("fetch %s: received more than the %d bytes its root declares; the DAG is not what its root claims", f.root, f.total)
				}
				links, err := pins.Links(b)
				if err != nil {
					return err
				}
				next = append(next, links...)
				f.report(done)
				return nil
			})
			if err != nil {
				return err
			}
			if len(want) > 0 {
				var missing cid.Cid
				for c := range want {
					missing = c
					break
				}
				err := ctx.Err()
				if err == nil {
					err = errors.New("session ended")
				}
				return f.fail(err, fmt.Sprintf("block %s (and %d more)", missing, len(want)-1))
			}
		}
		frontier = next
	}
	if done != f.total {
		return fmt.Errorf("fetch %s: got %d bytes but the root declares %d; the DAG is not what its root claims", f.root, done, f.total)
	}
	return nil
}

// receive asks the session for ask and hands each block to got as it arrives, deleting it
// from want, until want is empty or the fetch ends (want then says what did not come).
//
// When no block arrived for a quarter of the stall timeout it ends the session and asks
// again, for what is still wanted, through a new one. Why: a boxo (v0.43) session can wedge
// for good when a peer leaves mid-transfer. A block from that peer processed just after its
// disconnect marks it available again in the session, which then keeps choosing it (it sent
// the most blocks) for want-blocks that the peer manager, with no queue for it, drops; the
// other seeder's HAVEs are never followed up, and rebroadcasts skip CIDs already broadcast.
// The stall timeout then failed a fetch that the remaining seeder could serve
// (TestFetchSeederLeavesMidTransfer/bitswap under load). The new session asks only once the
// ended one's wants are cancelled in the peer manager (or renewAfter later, if another fetch
// wants them too): before that, the peer manager would skip them as already asked for.
func (f *fetchRun) receive(ask []cid.Cid, want map[cid.Cid]struct{}, got func(blocks.Block) error) error {
	clk := f.n.opts.Clock
	renewAfter := max(f.stall/4, time.Millisecond)
	tick := clk.NewTicker(max(f.stall/10, time.Millisecond))
	defer tick.Stop()
	blks := f.sess.GetBlocks(f.sessCtx, ask)
	asked := clk.Now()
	var rest []cid.Cid // set while waiting to ask again: what is still wanted
	var ended time.Time
	for {
		select {
		case <-f.ctx.Done():
			return nil
		case b, ok := <-blks: // a nil channel between sessions
			if !ok {
				return nil
			}
			delete(want, b.Cid())
			if err := got(b); err != nil {
				return err
			}
		case <-tick.Chan():
			switch {
			case rest != nil:
				if f.n.bitswapWants(rest) && clk.Since(ended) <= renewAfter {
					continue
				}
				f.newSession()
				blks, asked, rest = f.sess.GetBlocks(f.sessCtx, rest), clk.Now(), nil
			case clk.Since(asked) > renewAfter && clk.Since(time.Unix(0, f.last.Load())) > renewAfter:
				rest = make([]cid.Cid, 0, len(want))
				for _, c := range ask {
					if _, ok := want[c]; ok {
						rest = append(rest, c)
					}
				}
				f.n.opts.Logf("fetch %s: no block for %s: asking again for %d blocks through a new bitswap session", f.root, renewAfter, len(rest))
				f.endSess()
				blks, ended = nil, clk.Now()
			}
		}
	}
}

// bitswapWants reports whether bitswap still asks its peers for any of cs.
func (n *Node) bitswapWants(cs []cid.Cid) bool {
	if n.bswap == nil {
		return false
	}
	wanted := cid.NewSet()
	for _, c := range n.bswap.GetWantlist() {
		wanted.Add(c)
	}
	for _, c := range cs {
		if wanted.Has(c) {
			return true
		}
	}
	return false
}

// emptyBlock reports whether c is the CID of zero bytes under its own prefix.
func emptyBlock(c cid.Cid) bool {
	if c.Type() != cid.Raw {
		return false
	}
	e, err := c.Prefix().Sum(nil)
	return err == nil && e.Equals(c)
}

// xferPeers returns the connected peers that speak the streaming protocol, waiting briefly for
// identify on fresh connections so a peer dialled a moment ago is not missed.
func (n *Node) xferPeers(ctx context.Context) []peer.ID {
	var out []peer.ID
	ids, _ := n.host.(interface{ IDService() identify.IDService })
	for _, p := range n.host.Network().Peers() {
		if ids != nil {
			for _, c := range n.host.Network().ConnsToPeer(p) {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second) // wall clock: a peer's identify reply
				select {
				case <-ids.IDService().IdentifyWait(c):
				case <-wctx.Done():
				}
				cancel()
			}
		}
		if ok, _ := n.host.Peerstore().SupportsProtocols(p, xfer.ProtocolID); len(ok) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// localComplete reports whether every block under root is already in the blockstore (raw
// leaves checked by presence and size only), so a repeated get does not touch the network.
func (n *Node) localComplete(ctx context.Context, root blocks.Block) bool {
	seen := map[cid.Cid]struct{}{}
	stack := []blocks.Block{root}
	for len(stack) > 0 {
		b := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		links, err := pins.Links(b)
		if err != nil {
			return false
		}
		for _, l := range links {
			if _, ok := seen[l.Cid]; ok {
				continue
			}
			seen[l.Cid] = struct{}{}
			if l.Cid.Type() == cid.Raw {
				// A raw leaf's declared size is its length: a file of another size is a block
				// torn by a power loss before it was synced (never pinned), so fetch again.
				if sz, err := n.bstore.GetSize(ctx, l.Cid); err != nil || (l.Tsize != 0 && uint64(sz) != l.Tsize) {
					return false
				}
				continue
			}
			child, err := n.bstore.Get(ctx, l.Cid)
			if err != nil {
				return false
			}
			stack = append(stack, child)
		}
	}
	return true
}

// fetchMany is one transfer of a repair round's objects (pins.Options.FetchMany): roots from
// peers, at most total bytes, with a single fetch's stall watch (fetchRun); what did not
// come is the caller's to find.
func (n *Node) fetchMany(ctx context.Context, roots []cid.Cid, peers []peer.ID, total int64) {
	f := &fetchRun{n: n, root: roots[0], stall: n.opts.StallTimeout}
	f.ctx, f.cancel = context.WithCancelCause(ctx)
	defer f.cancel(nil)
	f.touch()
	go f.watchStalls()
	var xopts []xfer.FetchOption
	if n.opts.WrapBlockstore == nil {
		xopts = append(xopts, xfer.WithRecycledBuffers()) // as tryStreaming
	}
	xopts = append(xopts, xfer.WithCheckpoints(fetchCheckpointEvery, fetchCheckpointBytes, n.store.Sync, n.opts.Clock.Now))
	var shown int64
	_, err := xfer.FetchManyWithStats(f.ctx, n.host, roots, peers, n.bstore, func(got int64) {
		f.touch()
		if got > total {
			f.cancel(fmt.Errorf("received more than the %d bytes their roots declare", total))
			return
		}
		n.metrics.transferBytes.Add(float64(got - shown))
		shown = got
	}, xopts...)
	if err != nil {
		n.opts.Logf("pins: fetching %d objects together from %d nodes: %v (cause %v); fetching each on its own", len(roots), len(peers), err, context.Cause(f.ctx))
	}
}

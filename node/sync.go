package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"golang.org/x/time/rate"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Anti-entropy: the sync stream protocol /evalmesh/<network>/sync/1.0.0 (docs/protocol-sync.md).
// The initiator reconciles one set with the peer (protocol/recon), fetches what it lacks in
// batches on the same stream, verifying each batch before it is stored (Set.Add), and then
// pushes what the peer lacks. One stream per set; campaigns first, since attestations name
// campaigns.

// SyncProtocol is the stream protocol ID for a network.
func SyncProtocol(network string) protocol.ID {
	return protocol.ID("/evalmesh/" + network + "/sync/1.0.0")
}

// SyncOptions tune anti-entropy; zero fields take the defaults.
type SyncOptions struct {
	// FetchBatch is how many IDs one Fetch asks for (default 1000, at most recon.MaxFetchIDs).
	FetchBatch int
	// BatchBytes caps the envelope bytes of one Envelopes or Push frame (default 4 MiB).
	BatchBytes int
	// PeerBytesPerSecond and PeerBurst cap the bytes read from one peer, over all its
	// streams (default 64 MiB/s, burst 16 MiB): a peer cannot flood us faster.
	PeerBytesPerSecond int
	PeerBurst          int
	// SessionBytes caps the bytes read in one session (default 1 GiB); a larger one is cut
	// and resumes on the next round.
	SessionBytes int64
	// MaxRounds caps reconciliation round trips per session (default 64).
	MaxRounds int
	// Timeout bounds one whole session (default 5 minutes).
	Timeout time.Duration
	// Limits are the reconciliation message limits.
	Limits recon.Limits
	// WrapServe, when set, replaces each envelope this node serves. Tests use it to make a
	// peer that serves forged envelopes or dies half way (an error resets the stream).
	WrapServe func(env []byte) ([]byte, error)
	// NoAutoSync: no session on connect (benchmarks time their sessions themselves).
	NoAutoSync bool
	// Logf receives log lines (default: discard).
	Logf func(format string, args ...any)
}

func (o SyncOptions) withDefaults() SyncOptions {
	if o.FetchBatch <= 0 {
		o.FetchBatch = 1000
	}
	o.FetchBatch = min(o.FetchBatch, recon.MaxFetchIDs)
	if o.BatchBytes <= 0 {
		o.BatchBytes = 4 << 20
	}
	o.BatchBytes = min(o.BatchBytes, recon.MaxFrameSize-attest.MaxEnvelopeSize-1024)
	if o.PeerBytesPerSecond <= 0 {
		o.PeerBytesPerSecond = 64 << 20
	}
	if o.PeerBurst <= 0 {
		o.PeerBurst = 16 << 20
	}
	o.PeerBurst = max(o.PeerBurst, recon.MaxFrameSize)
	if o.SessionBytes <= 0 {
		o.SessionBytes = 1 << 30
	}
	if o.MaxRounds <= 0 {
		o.MaxRounds = 64
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// SyncStats is what one session with one peer did, for one set.
type SyncStats struct {
	Peer   string  `json:"peer_id"`
	Set    SetName `json:"set"`
	Rounds int     `json:"rounds"` // reconciliation round trips
	// Fetches is the number of Fetch round trips.
	Fetches   int           `json:"fetches"`
	BytesSent int64         `json:"bytes_sent"`
	BytesRecv int64         `json:"bytes_received"`
	Need      int           `json:"need"` // IDs the peer had and we lacked
	Have      int           `json:"have"` // IDs we had and the peer lacked (pushed)
	New       int           `json:"new"`
	Known     int           `json:"known"`
	Refused   int           `json:"refused"`
	Verify    time.Duration `json:"verify_ns"` // time spent in Set.Add (verification and commit)
	Wall      time.Duration `json:"wall_ns"`
}

// Syncer runs anti-entropy for a node's store. Safe for concurrent use; at most one
// outbound session per peer runs at a time.
type Syncer struct {
	h     host.Host
	store *Store
	proto protocol.ID
	o     SyncOptions

	mu      sync.Mutex
	running map[peer.ID]bool
	limits  map[peer.ID]*rate.Limiter
	last    map[peer.ID][]SyncStats
	closed  bool
	// onSession, when set, is told each session SyncWith ran (the node's metrics).
	onSession func([]SyncStats, error)
	wg        sync.WaitGroup
	ctx       context.Context
	cancel    context.CancelFunc
}

// NewSyncer serves the sync protocol on h and starts syncing with each peer we dial (the
// dialing side initiates, so a new connection runs one session, not two).
func NewSyncer(h host.Host, store *Store, networkName string, o SyncOptions) *Syncer {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Syncer{h: h, store: store, proto: SyncProtocol(networkName), o: o.withDefaults(),
		running: map[peer.ID]bool{}, limits: map[peer.ID]*rate.Limiter{}, last: map[peer.ID][]SyncStats{},
		ctx: ctx, cancel: cancel}
	h.SetStreamHandler(s.proto, s.serve)
	h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.Stat().Direction == network.DirOutbound && !s.o.NoAutoSync {
			s.Trigger(c.RemotePeer())
		}
	}})
	return s
}

// Syncer returns the node's anti-entropy runner.
func (n *Node) Syncer() *Syncer { return n.syncer }

// Close stops serving and waits for background sessions.
func (s *Syncer) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.h.RemoveStreamHandler(s.proto)
	s.cancel()
	s.wg.Wait()
}

// Trigger starts a session with p in the background unless one is running.
func (s *Syncer) Trigger(p peer.ID) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		if _, err := s.SyncWith(s.ctx, p); err != nil && !errors.Is(err, errBusy) {
			s.o.Logf("sync with %s: %v", p, err)
		}
	}()
}

// Run syncs with one random connected peer every interval until ctx ends.
func (s *Syncer) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			peers := s.h.Network().Peers()
			if len(peers) == 0 {
				continue
			}
			p := peers[rand.IntN(len(peers))]
			if _, err := s.SyncWith(ctx, p); err != nil && !errors.Is(err, errBusy) {
				s.o.Logf("sync with %s: %v", p, err)
			}
		}
	}
}

// LastStats is what the latest session with p did (one entry per set).
func (s *Syncer) LastStats(p peer.ID) []SyncStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SyncStats(nil), s.last[p]...)
}

var errBusy = errors.New("a sync session with this peer is already running")

// SyncWith reconciles both sets with p (campaigns, then attestations), fetching what we
// lack and pushing what p lacks. A session cut half way (p gone, a limit hit) leaves what
// was verified stored; the next session asks only for the rest.
func (s *Syncer) SyncWith(ctx context.Context, p peer.ID) ([]SyncStats, error) {
	s.mu.Lock()
	if s.running[p] {
		s.mu.Unlock()
		return nil, errBusy
	}
	s.running[p] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, p)
		s.mu.Unlock()
	}()
	var out []SyncStats
	for _, set := range []*Set{s.store.Campaigns(), s.store.Attestations()} {
		st, err := s.syncSet(ctx, p, set)
		out = append(out, st)
		if err != nil {
			s.record(p, out, err)
			return out, fmt.Errorf("%s: %w", set.Name(), err)
		}
	}
	s.record(p, out, nil)
	return out, nil
}

func (s *Syncer) record(p peer.ID, st []SyncStats, err error) {
	s.mu.Lock()
	s.last[p] = st
	s.mu.Unlock()
	if s.onSession != nil {
		s.onSession(st, err)
	}
}

// limiter is p's byte bucket, shared by all its streams.
func (s *Syncer) limiter(p peer.ID) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limits[p]
	if !ok {
		l = rate.NewLimiter(rate.Limit(s.o.PeerBytesPerSecond), s.o.PeerBurst)
		s.limits[p] = l
	}
	return l
}

// conn is one sync stream with byte accounting and the peer's rate cap on what is read.
type conn struct {
	str      network.Stream
	r        *bufio.Reader
	ctx      context.Context
	lim      *rate.Limiter
	cap      int64
	sent     int64
	recv     int64
	frameMax int
}

func (s *Syncer) newConn(ctx context.Context, str network.Stream) *conn {
	c := &conn{str: str, ctx: ctx, lim: s.limiter(str.Conn().RemotePeer()), cap: s.o.SessionBytes, frameMax: recon.MaxFrameSize}
	c.r = bufio.NewReaderSize(countingReader{c}, 64<<10)
	return c
}

type countingReader struct{ c *conn }

func (cr countingReader) Read(b []byte) (int, error) {
	c := cr.c
	if c.recv >= c.cap {
		return 0, fmt.Errorf("session read %d bytes, over the cap of %d: cut, resumes next round", c.recv, c.cap)
	}
	n, err := c.str.Read(b)
	if n > 0 {
		c.recv += int64(n)
		if werr := c.lim.WaitN(c.ctx, min(n, c.lim.Burst())); werr != nil {
			return n, werr
		}
	}
	return n, err
}

func (c *conn) write(typ byte, body []byte) error {
	f := recon.AppendFrame(nil, typ, body)
	c.sent += int64(len(f))
	_, err := c.str.Write(f)
	return err
}

func (c *conn) read() (byte, []byte, error) { return recon.ReadFrame(c.r, c.frameMax) }

// expect reads a frame of type want; an Error frame from the peer becomes an error.
func (c *conn) expect(want byte) ([]byte, error) {
	typ, body, err := c.read()
	if err != nil {
		return nil, err
	}
	if typ == recon.FrameError {
		return nil, fmt.Errorf("peer: %s", body)
	}
	if typ != want {
		return nil, fmt.Errorf("%w: got frame type 0x%02x, want 0x%02x", recon.ErrFrame, typ, want)
	}
	return body, nil
}

func (s *Syncer) syncSet(ctx context.Context, p peer.ID, set *Set) (st SyncStats, err error) {
	start := time.Now()
	st = SyncStats{Peer: p.String(), Set: set.Name()}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	str, err := s.h.NewStream(ctx, p, s.proto)
	if err != nil {
		return st, err
	}
	c := s.newConn(ctx, str)
	defer func() {
		st.BytesSent, st.BytesRecv, st.Wall = c.sent, c.recv, time.Since(start)
		if err != nil {
			str.Reset()
		} else {
			str.Close()
		}
	}()
	if dl, ok := ctx.Deadline(); ok {
		str.SetDeadline(dl)
	}
	if err := c.write(recon.FrameHello, []byte(set.Name())); err != nil {
		return st, err
	}

	// Reconcile.
	r := recon.NewInitiator(s.o.Limits)
	var msg []byte
	set.View(func(ix recon.Storage) { msg = r.Initiate(ix) })
	var need, have []recon.ID
	for {
		if err := c.write(recon.FrameRecon, msg); err != nil {
			return st, err
		}
		body, err := c.expect(recon.FrameRecon)
		if err != nil {
			return st, err
		}
		var act recon.Actions
		set.View(func(ix recon.Storage) { act, err = r.Step(ix, body) })
		st.Rounds = r.Rounds()
		if err != nil {
			return st, err
		}
		need, have = append(need, act.Need...), append(have, act.Have...)
		if act.Done {
			break
		}
		if st.Rounds >= s.o.MaxRounds {
			return st, fmt.Errorf("reconciliation did not finish in %d round trips", s.o.MaxRounds)
		}
		msg = act.Send
	}
	st.Need, st.Have = len(need), len(have)
	// Fetch and push in ID order: the store keys records by ID, so a batch of IDs adjacent
	// in that order is one forward sweep over the peer's records (Set.GetMany) instead of a
	// random read per envelope, and its records arrive in key order here. Reconciliation
	// reports them in (time, ID) order, which is random in ID.
	slices.SortFunc(need, func(x, y recon.ID) int { return bytes.Compare(x[:], y[:]) })
	slices.SortFunc(have, func(x, y recon.ID) int { return bytes.Compare(x[:], y[:]) })

	// Fetch what we lack. Up to fetchAhead Fetches are outstanding, and each answer is
	// verified and committed (Set.Add, one batch at a time, in order) by a goroutine of its
	// own while the next answers are read, so the peer's reads, the wire and our commit's
	// fsync overlap the verification instead of taking turns with it.
	const fetchAhead = 2
	queue := need
	var outstanding [][]recon.ID
	send := func() error {
		for len(outstanding) < fetchAhead && len(queue) > 0 {
			k := min(len(queue), s.o.FetchBatch)
			b := queue[:k:k]
			queue = queue[k:]
			if err := c.write(recon.FrameFetch, recon.EncodeIDs(b)); err != nil {
				return err
			}
			outstanding = append(outstanding, b)
		}
		return nil
	}
	type addJob struct {
		envs [][]byte
		ids  []recon.ID
	}
	jobs := make(chan addJob, 1)
	addDone := make(chan error, 1)
	var added SyncStats // the adder's counts, merged once it is done
	var addFailed atomic.Bool
	go func() {
		var first error
		for j := range jobs {
			if first != nil {
				continue
			}
			t0 := time.Now()
			res, err := set.addDigested(j.envs, j.ids, SourceSync, p.String())
			added.Verify += time.Since(t0)
			if err != nil {
				first = err
				addFailed.Store(true)
				continue
			}
			tally(&added, res)
		}
		addDone <- first
	}()
	// finish waits for the adder, so that what was fetched before an error is stored when
	// the session returns and no Add runs after it.
	finish := func(err error) error {
		close(jobs)
		aerr := <-addDone
		st.New, st.Known, st.Refused, st.Verify = added.New, added.Known, added.Refused, added.Verify
		if err != nil {
			return err
		}
		return aerr
	}
	if err := send(); err != nil {
		err = finish(err)
		return st, err
	}
	for len(outstanding) > 0 && !addFailed.Load() {
		body, err := c.expect(recon.FrameEnvelopes)
		if err != nil {
			err = finish(err)
			return st, err
		}
		asked := outstanding[0]
		outstanding = outstanding[1:]
		st.Fetches++
		envs, err := recon.DecodeEnvelopes(body, attest.MaxEnvelopeSize)
		if err != nil {
			err = finish(err)
			return st, err
		}
		// The peer answers in request order, leaves out IDs it no longer has, and may stop
		// early at its byte cap: the IDs after the last one answered go back in the queue,
		// as long as the batch made progress (so a peer answering garbage cannot keep us
		// asking). An envelope whose digest is not one asked for (forged, mutated) is
		// verified and refused like any other.
		pos := make(map[recon.ID]int, len(asked))
		for i, id := range asked {
			pos[id] = i
		}
		last := -1
		progress := false
		ids := make([]recon.ID, len(envs))
		for k, e := range envs {
			ids[k] = DigestOf(e)
			if i, ok := pos[ids[k]]; ok {
				progress = true
				last = max(last, i)
			}
		}
		if progress {
			queue = append(queue, asked[last+1:]...)
		}
		if err := send(); err != nil {
			err = finish(err)
			return st, err
		}
		jobs <- addJob{envs, ids}
	}
	if err = finish(nil); err != nil {
		return st, err
	}

	// Push what the peer lacks.
	pushed := len(have) > 0
	for len(have) > 0 {
		batch, k, err := set.GetMany(have, s.o.BatchBytes)
		if err != nil {
			return st, err
		}
		have = have[max(k, 1):]
		if len(batch) > 0 {
			if err := c.write(recon.FramePush, recon.EncodeEnvelopes(batch)); err != nil {
				return st, err
			}
		}
	}
	if err := c.write(recon.FrameDone, nil); err != nil {
		return st, err
	}
	// Having pushed, wait for the peer's Done: it comes once the peer stored every Push.
	// With nothing pushed there is nothing to wait for, and not waiting saves the
	// session's last round trip (two sets in sync: two round trips, not four).
	if !pushed {
		return st, nil
	}
	if _, err := c.expect(recon.FrameDone); err != nil {
		return st, err
	}
	return st, nil
}

func tally(st *SyncStats, res []AddResult) {
	for _, r := range res {
		switch r.Status {
		case StatusNew:
			st.New++
		case StatusKnown:
			st.Known++
		case StatusRefused:
			st.Refused++
		}
	}
}

// serve answers one peer's session for one set.
func (s *Syncer) serve(str network.Stream) {
	// Tracked like outbound sessions, so Close returns only once no handler can touch the
	// store any more.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		str.Reset()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	p := str.Conn().RemotePeer()
	ctx, cancel := context.WithTimeout(s.ctx, s.o.Timeout)
	defer cancel()
	str.SetDeadline(time.Now().Add(s.o.Timeout))
	c := s.newConn(ctx, str)
	fail := func(err error) {
		s.o.Logf("sync from %s: %v", p, err)
		c.write(recon.FrameError, []byte(err.Error()))
		str.Reset()
	}
	body, err := c.expect(recon.FrameHello)
	if err != nil {
		fail(err)
		return
	}
	if len(body) > recon.MaxSetName {
		fail(fmt.Errorf("%w: set name of %d bytes", recon.ErrFrame, len(body)))
		return
	}
	set := s.store.Set(SetName(body))
	if set == nil {
		fail(fmt.Errorf("no set %q here (sets: %s, %s)", body, SetAttestations, SetCampaigns))
		return
	}
	rounds := 0
	for {
		typ, body, err := c.read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fail(err)
			} else {
				str.Reset()
			}
			return
		}
		switch typ {
		case recon.FrameRecon:
			rounds++
			if rounds > s.o.MaxRounds {
				fail(fmt.Errorf("more than %d reconciliation rounds", s.o.MaxRounds))
				return
			}
			var reply []byte
			set.View(func(ix recon.Storage) { reply, err = recon.Respond(ix, body, s.o.Limits) })
			if err != nil {
				fail(err)
				return
			}
			if err := c.write(recon.FrameRecon, reply); err != nil {
				str.Reset()
				return
			}
		case recon.FrameFetch:
			ids, err := recon.DecodeIDs(body)
			if err != nil {
				fail(err)
				return
			}
			// Stopping at the byte cap: the initiator asks again for the rest.
			envs, _, err := set.GetMany(ids, s.o.BatchBytes)
			if err != nil {
				fail(err)
				return
			}
			if s.o.WrapServe != nil {
				for i := range envs {
					if envs[i], err = s.o.WrapServe(envs[i]); err != nil {
						str.Reset()
						return
					}
				}
			}
			if err := c.write(recon.FrameEnvelopes, recon.EncodeEnvelopes(envs)); err != nil {
				str.Reset()
				return
			}
		case recon.FramePush:
			envs, err := recon.DecodeEnvelopes(body, attest.MaxEnvelopeSize)
			if err != nil {
				fail(err)
				return
			}
			if _, err := set.Add(envs, SourceSync, p.String()); err != nil {
				fail(err)
				return
			}
		case recon.FrameDone:
			c.write(recon.FrameDone, nil)
			str.Close()
			return
		default:
			fail(fmt.Errorf("%w: unexpected frame type 0x%02x", recon.ErrFrame, typ))
			return
		}
	}
}

// Package syncer owns anti-entropy between nodes: the sync stream protocol
// /evalmesh/<network>/sync/1.0.0 (docs/protocol-sync.md), over which two peers reconcile one
// verified set (node/vstore) at a time with range-based reconciliation (protocol/recon), the
// initiator then fetching what it lacks in batches, each verified before it is stored
// (vstore.Set.AddDigested), and pushing what the peer lacks. One stream per set; campaigns
// first, since attestations name campaigns. It works over a libp2p host and a vstore.Store
// and imports neither node nor pubsub: node wires it and tells it when to sync (a new
// outbound connection, the mesh's interval).
//
// Heads (heads.go) are what triggers a sync between those: our signed head for /heads and
// every peer's latest, compared for agreement and staleness; a peer's head that shows
// another set under our network document starts a session with it. The node's pubsub
// hands heads over (Heads.Observe); this package joins no topic.
//
// Concurrency: a Syncer is safe for concurrent use. At most one outbound session per peer
// runs at a time (SyncWith answers ErrBusy to a second); inbound sessions are served each on
// its libp2p stream handler's goroutine; Close stops serving and waits until no session,
// outbound or inbound, can touch the store any more. Within one outbound session a single
// adder goroutine commits the fetched batches in order while the next ones are read. Heads
// is safe for concurrent use; Observe starts a session in the background (Trigger), never
// runs one on the caller's goroutine.
package syncer

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
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Protocol is the stream protocol ID for a network.
func Protocol(network string) protocol.ID {
	return protocol.ID("/evalmesh/" + network + "/sync/1.0.0")
}

// Options tune anti-entropy; zero fields take the defaults.
type Options struct {
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
	// OnSession, when set, is told each session SyncWith ran (the node's metrics).
	OnSession func([]Stats, error)
	// Logf receives log lines (default: discard).
	Logf func(format string, args ...any)
}

func (o Options) withDefaults() Options {
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

// Stats is what one session with one peer did, for one set.
type Stats struct {
	Peer   string         `json:"peer_id"`
	Set    vstore.SetName `json:"set"`
	Rounds int            `json:"rounds"` // reconciliation round trips
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
	store *vstore.Store
	proto protocol.ID
	o     Options

	mu      sync.Mutex
	running map[peer.ID]bool
	limits  map[peer.ID]*rate.Limiter
	last    map[peer.ID][]Stats
	closed  bool
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

// New serves the sync protocol on h and starts syncing with each peer we dial (the
// dialing side initiates, so a new connection runs one session, not two).
func New(h host.Host, store *vstore.Store, networkName string, o Options) *Syncer {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Syncer{h: h, store: store, proto: Protocol(networkName), o: o.withDefaults(),
		running: map[peer.ID]bool{}, limits: map[peer.ID]*rate.Limiter{}, last: map[peer.ID][]Stats{},
		ctx: ctx, cancel: cancel}
	h.SetStreamHandler(s.proto, s.serve)
	h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) {
		if c.Stat().Direction == network.DirOutbound && !s.o.NoAutoSync {
			s.Trigger(c.RemotePeer())
		}
	}})
	return s
}

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
		if _, err := s.SyncWith(s.ctx, p); err != nil && !errors.Is(err, ErrBusy) {
			s.o.Logf("sync with %s: %v", p, err)
		}
	}()
}

// Run syncs with one random connected peer every interval of clk until ctx ends.
func (s *Syncer) Run(ctx context.Context, clk clock.Clock, interval time.Duration) {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			peers := s.h.Network().Peers()
			if len(peers) == 0 {
				continue
			}
			p := peers[rand.IntN(len(peers))]
			if _, err := s.SyncWith(ctx, p); err != nil && !errors.Is(err, ErrBusy) {
				s.o.Logf("sync with %s: %v", p, err)
			}
		}
	}
}

// LastStats is what the latest session with p did (one entry per set).
func (s *Syncer) LastStats(p peer.ID) []Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Stats(nil), s.last[p]...)
}

// ErrBusy is SyncWith's answer while a session with the same peer runs: that session
// brings the sets together, the caller may wait for it and run its own for the rest.
var ErrBusy = errors.New("a sync session with this peer is already running")

// SyncWith reconciles both sets with p (campaigns, then attestations), fetching what we
// lack and pushing what p lacks. A session cut half way (p gone, a limit hit) leaves what
// was verified stored; the next session asks only for the rest.
func (s *Syncer) SyncWith(ctx context.Context, p peer.ID) ([]Stats, error) {
	s.mu.Lock()
	if s.running[p] {
		s.mu.Unlock()
		return nil, ErrBusy
	}
	s.running[p] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, p)
		s.mu.Unlock()
	}()
	var out []Stats
	for _, set := range []*vstore.Set{s.store.Campaigns(), s.store.Attestations()} {
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

func (s *Syncer) record(p peer.ID, st []Stats, err error) {
	s.mu.Lock()
	s.last[p] = st
	s.mu.Unlock()
	if s.o.OnSession != nil {
		s.o.OnSession(st, err)
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

// syncSet runs one session with p for one set on a stream of its own: reconcile, fetch
// what we lack, push what p lacks.
func (s *Syncer) syncSet(ctx context.Context, p peer.ID, set *vstore.Set) (st Stats, err error) {
	start := time.Now() // wall clock: Stats.Wall, measured for logs and metrics
	st = Stats{Peer: p.String(), Set: set.Name()}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout) // wall clock: bounds a session with a peer (stream open and round trips), as its stream deadline does on the other side
	defer cancel()
	str, err := s.h.NewStream(ctx, p, s.proto)
	if err != nil {
		return st, err
	}
	c := s.newConn(ctx, str)
	defer func() {
		st.BytesSent, st.BytesRecv, st.Wall = c.sent, c.recv, time.Since(start) // wall clock: Stats.Wall, measured for logs and metrics
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
	need, have, err := s.reconcile(c, set, &st)
	if err != nil {
		return st, err
	}
	if err := s.fetchMissing(c, p, set, need, &st); err != nil {
		return st, err
	}
	return st, s.pushMissing(c, set, have)
}

// reconcile runs the initiator's reconciliation rounds and returns, each in ID order, the
// IDs the peer has and we lack (need) and those we have and it lacks (have).
func (s *Syncer) reconcile(c *conn, set *vstore.Set, st *Stats) (need, have []recon.ID, err error) {
	r := recon.NewInitiator(s.o.Limits)
	var msg []byte
	set.View(func(ix recon.Storage) { msg = r.Initiate(ix) })
	for {
		if err := c.write(recon.FrameRecon, msg); err != nil {
			return nil, nil, err
		}
		body, err := c.expect(recon.FrameRecon)
		if err != nil {
			return nil, nil, err
		}
		var act recon.Actions
		set.View(func(ix recon.Storage) { act, err = r.Step(ix, body) })
		st.Rounds = r.Rounds()
		if err != nil {
			return nil, nil, err
		}
		need, have = append(need, act.Need...), append(have, act.Have...)
		if act.Done {
			break
		}
		if st.Rounds >= s.o.MaxRounds {
			return nil, nil, fmt.Errorf("reconciliation did not finish in %d round trips", s.o.MaxRounds)
		}
		msg = act.Send
	}
	st.Need, st.Have = len(need), len(have)
	sortByID(need)
	sortByID(have)
	return need, have, nil
}

// sortByID puts ids in ID order. Fetch and push go in that order because the store keys
// records by ID: a batch of IDs adjacent in it is one forward sweep over the peer's records
// (Set.GetMany) instead of a random read per envelope, and its records arrive in key order
// here. Reconciliation reports them in (time, ID) order, which is random in ID.
func sortByID(ids []recon.ID) {
	slices.SortFunc(ids, func(x, y recon.ID) int { return bytes.Compare(x[:], y[:]) })
}

// fetchMissing fetches need from the peer and stores what verifies. Up to fetchAhead
// Fetches are outstanding, and each answer is verified and committed by the adder (Set.Add,
// one batch at a time, in order) while the next answers are read, so the peer's reads, the
// wire and our commit's fsync overlap the verification instead of taking turns with it.
func (s *Syncer) fetchMissing(c *conn, p peer.ID, set *vstore.Set, need []recon.ID, st *Stats) error {
	f := &fetcher{c: c, batch: s.o.FetchBatch, queue: need}
	a := startAdder(set, p.String())
	if err := f.send(); err != nil {
		return a.finish(st, err)
	}
	for len(f.outstanding) > 0 && !a.failed.Load() {
		envs, ids, err := f.receive(st)
		if err != nil {
			return a.finish(st, err)
		}
		if err := f.send(); err != nil {
			return a.finish(st, err)
		}
		a.jobs <- addJob{envs, ids}
	}
	return a.finish(st, nil)
}

// fetchAhead is how many Fetches one session keeps outstanding.
const fetchAhead = 2

// fetcher is the asking side of one session's fetch: the IDs not asked for yet and the
// batches asked for and not answered yet, oldest first.
type fetcher struct {
	c           *conn
	batch       int
	queue       []recon.ID
	outstanding [][]recon.ID
}

// send asks for the next batches of the queue until fetchAhead are outstanding.
func (f *fetcher) send() error {
	for len(f.outstanding) < fetchAhead && len(f.queue) > 0 {
		k := min(len(f.queue), f.batch)
		b := f.queue[:k:k]
		f.queue = f.queue[k:]
		if err := f.c.write(recon.FrameFetch, recon.EncodeIDs(b)); err != nil {
			return err
		}
		f.outstanding = append(f.outstanding, b)
	}
	return nil
}

// receive reads the answer to the oldest outstanding Fetch and returns its envelopes with
// their digests, putting back in the queue the IDs asked for after the last one answered.
// The peer answers in request order, leaves out IDs it no longer has, and may stop early at
// its byte cap: the rest is asked for again as long as the batch made progress (so a peer
// answering garbage cannot keep us asking). An envelope whose digest is not one asked for
// (forged, mutated) is verified and refused like any other.
func (f *fetcher) receive(st *Stats) (envs [][]byte, ids []recon.ID, err error) {
	body, err := f.c.expect(recon.FrameEnvelopes)
	if err != nil {
		return nil, nil, err
	}
	asked := f.outstanding[0]
	f.outstanding = f.outstanding[1:]
	st.Fetches++
	envs, err = recon.DecodeEnvelopes(body, attest.MaxEnvelopeSize)
	if err != nil {
		return nil, nil, err
	}
	pos := make(map[recon.ID]int, len(asked))
	for i, id := range asked {
		pos[id] = i
	}
	last := -1
	progress := false
	ids = make([]recon.ID, len(envs))
	for k, e := range envs {
		ids[k] = vstore.DigestOf(e)
		if i, ok := pos[ids[k]]; ok {
			progress = true
			last = max(last, i)
		}
	}
	if progress {
		f.queue = append(f.queue, asked[last+1:]...)
	}
	return envs, ids, nil
}

// addJob is one fetched batch for the adder: envelopes and their digests.
type addJob struct {
	envs [][]byte
	ids  []recon.ID
}

// adder verifies and commits one session's fetched batches, in order, on a goroutine of its
// own; after its first error it drops the rest.
type adder struct {
	jobs   chan addJob
	done   chan error
	added  Stats // its counts, read once done has answered
	failed atomic.Bool
}

func startAdder(set *vstore.Set, from string) *adder {
	a := &adder{jobs: make(chan addJob, 1), done: make(chan error, 1)}
	go func() {
		var first error
		for j := range a.jobs {
			if first != nil {
				continue
			}
			t0 := time.Now() // wall clock: Stats.Verify, measured for logs and metrics
			res, err := set.AddDigested(j.envs, j.ids, vstore.SourceSync, from)
			a.added.Verify += time.Since(t0) // wall clock: Stats.Verify, measured for logs and metrics
			if err != nil {
				first = err
				a.failed.Store(true)
				continue
			}
			tally(&a.added, res)
		}
		a.done <- first
	}()
	return a
}

// finish waits for the adder, so that what was fetched before an error is stored when the
// session returns and no Add runs after it, and merges its counts into st. It returns err,
// else the adder's error.
func (a *adder) finish(st *Stats, err error) error {
	close(a.jobs)
	aerr := <-a.done
	st.New, st.Known, st.Refused, st.Verify = a.added.New, a.added.Known, a.added.Refused, a.added.Verify
	if err != nil {
		return err
	}
	return aerr
}

// pushMissing sends the peer what it lacks (have, in batches of at most BatchBytes), then
// Done. Having pushed, it waits for the peer's Done: it comes once the peer stored every
// Push. With nothing pushed there is nothing to wait for, and not waiting saves the
// session's last round trip (two sets in sync: two round trips, not four).
func (s *Syncer) pushMissing(c *conn, set *vstore.Set, have []recon.ID) error {
	pushed := len(have) > 0
	for len(have) > 0 {
		batch, k, err := set.GetMany(have, s.o.BatchBytes)
		if err != nil {
			return err
		}
		have = have[max(k, 1):]
		if len(batch) > 0 {
			if err := c.write(recon.FramePush, recon.EncodeEnvelopes(batch)); err != nil {
				return err
			}
		}
	}
	if err := c.write(recon.FrameDone, nil); err != nil {
		return err
	}
	if !pushed {
		return nil
	}
	_, err := c.expect(recon.FrameDone)
	return err
}

func tally(st *Stats, res []vstore.AddResult) {
	for _, r := range res {
		switch r.Status {
		case vstore.StatusNew:
			st.New++
		case vstore.StatusKnown:
			st.Known++
		case vstore.StatusRefused:
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
	ctx, cancel := context.WithTimeout(s.ctx, s.o.Timeout) // wall clock: bounds a peer's session, with the stream deadline below
	defer cancel()
	str.SetDeadline(time.Now().Add(s.o.Timeout)) // wall clock: a stream deadline the kernel enforces
	sv := &served{s: s, c: s.newConn(ctx, str), str: str, p: p}
	fail := func(err error) {
		s.o.Logf("sync from %s: %v", p, err)
		sv.c.write(recon.FrameError, []byte(err.Error()))
		str.Reset()
	}
	var err error
	if sv.set, err = s.readHello(sv.c); err != nil {
		fail(err)
		return
	}
	for {
		typ, body, err := sv.c.read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fail(err)
			} else {
				str.Reset()
			}
			return
		}
		done, err := sv.handle(typ, body)
		switch {
		case errors.Is(err, errReset):
			str.Reset()
			return
		case err != nil:
			fail(err)
			return
		case done:
			return
		}
	}
}

// readHello reads the Hello that opens a session and returns the set it names.
func (s *Syncer) readHello(c *conn) (*vstore.Set, error) {
	body, err := c.expect(recon.FrameHello)
	if err != nil {
		return nil, err
	}
	if len(body) > recon.MaxSetName {
		return nil, fmt.Errorf("%w: set name of %d bytes", recon.ErrFrame, len(body))
	}
	set := s.store.Set(vstore.SetName(body))
	if set == nil {
		return nil, fmt.Errorf("no set %q here (sets: %s, %s)", body, vstore.SetAttestations, vstore.SetCampaigns)
	}
	return set, nil
}

// errReset ends a served session with a bare reset: no Error frame, no log line (the
// stream already failed, or WrapServe asked for it).
var errReset = errors.New("reset the stream")

// served is the answering side of one session, on one stream, for one set.
type served struct {
	s      *Syncer
	c      *conn
	str    network.Stream
	p      peer.ID
	set    *vstore.Set
	rounds int
}

// handle answers one frame of the initiator; done once the session ended well.
func (sv *served) handle(typ byte, body []byte) (done bool, err error) {
	switch typ {
	case recon.FrameRecon:
		return false, sv.answerRecon(body)
	case recon.FrameFetch:
		return false, sv.answerFetch(body)
	case recon.FramePush:
		return false, sv.storePush(body)
	case recon.FrameDone:
		sv.c.write(recon.FrameDone, nil)
		sv.str.Close()
		return true, nil
	default:
		return false, fmt.Errorf("%w: unexpected frame type 0x%02x", recon.ErrFrame, typ)
	}
}

// answerRecon answers one reconciliation round.
func (sv *served) answerRecon(body []byte) error {
	sv.rounds++
	if sv.rounds > sv.s.o.MaxRounds {
		return fmt.Errorf("more than %d reconciliation rounds", sv.s.o.MaxRounds)
	}
	var reply []byte
	var err error
	sv.set.View(func(ix recon.Storage) { reply, err = recon.Respond(ix, body, sv.s.o.Limits) })
	if err != nil {
		return err
	}
	if err := sv.c.write(recon.FrameRecon, reply); err != nil {
		return errReset
	}
	return nil
}

// answerFetch sends the envelopes a Fetch asks for, stopping at the byte cap: the
// initiator asks again for the rest.
func (sv *served) answerFetch(body []byte) error {
	ids, err := recon.DecodeIDs(body)
	if err != nil {
		return err
	}
	envs, _, err := sv.set.GetMany(ids, sv.s.o.BatchBytes)
	if err != nil {
		return err
	}
	if wrap := sv.s.o.WrapServe; wrap != nil {
		for i := range envs {
			if envs[i], err = wrap(envs[i]); err != nil {
				return errReset
			}
		}
	}
	if err := sv.c.write(recon.FrameEnvelopes, recon.EncodeEnvelopes(envs)); err != nil {
		return errReset
	}
	return nil
}

// storePush verifies and stores the envelopes the initiator pushed.
func (sv *served) storePush(body []byte) error {
	envs, err := recon.DecodeEnvelopes(body, attest.MaxEnvelopeSize)
	if err != nil {
		return err
	}
	_, err = sv.set.Add(envs, vstore.SourceSync, sv.p.String())
	return err
}

package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// The mesh is the daemon's part in a network (docs/design.md, "the daemon's main loop"):
// campaigns in, claims out, runs on this node's capacity, attestations and re-scores
// gossiped, the ledger recomputed from the verified store. It decides nothing: the loop
// feeds protocol.Coordinator verified values (campaigns, claims, runs, re-scores, witness
// records, run outcomes, capacity, the time) and carries out the CoordActions it returns
// (publish, start, abort, re-score, witness, recompute); runner runs and re-scores, and
// attest/scoring compute the ledger. Time, timers and tickers come from MeshOptions.Clock.
//
// Concurrency: one goroutine, the loop, owns the coordinator and every table below it;
// everything else (subscriptions, runs, re-scores, the API) hands it closures through do
// and query. Runs, re-scores, fetches and the ledger computation run on their own
// goroutines, so a slow fetch or a big ledger never stalls ingestion.

// MeshOptions configure a node's part in its network.
type MeshOptions struct {
	// Trust lists the network's labs; every message and attestation is checked under it.
	Trust *attest.TrustStore
	// Runner runs won slots and signs runs and re-scores with the node key under its lab
	// certificate (Runner.Cert); it must have one.
	Runner *runner.Runner
	// Capacity is how many runs this node holds at once (GPU count, or runner.max_parallel
	// on a CPU-only node); 0 means 1.
	Capacity int
	// FreeCapacity, when set, is re-read every CapacityEvery (default 5 s; the network
	// document's vote is counted as often) once claiming has
	// opened: capacity becomes the runs this node holds plus the runs a shared cluster can
	// start besides them now (the slurm executor: the partition's free GPUs), so claims
	// never exceed what it can start; on an error capacity stays. mesh_capacity.go.
	FreeCapacity  func() (int, error)
	CapacityEvery time.Duration
	// Claims tunes leases, heartbeats and settling (zero fields: protocol defaults).
	Claims protocol.ClaimConfig
	// MaxInfraStreak: this node's own runs ending by infrastructure failures in a row after
	// which it stops claiming (0: DefaultMaxInfraStreak; mesh_health.go).
	MaxInfraStreak int
	// CertEvery is how often the node certificate file is checked for a renewal (0: 10 s;
	// mesh_cert.go).
	CertEvery time.Duration
	// RescoreTimeout is how long a chosen re-scorer lab may stay silent before the next lab
	// in the order steps in (default 2 minutes).
	RescoreTimeout time.Duration
	// Policy and Scoring are the network's ledger options (its network document): every
	// node of the network must use the same, or their roots differ.
	Policy  attest.AcceptPolicy
	Scoring scoring.Options
	// LedgerDebounce is how long after new attestations the ledger is recomputed (default
	// 250 ms): a burst of arrivals costs one computation.
	LedgerDebounce time.Duration
	// NetworkDoc is the network's document; its hash goes into every head, so a peer on
	// another document is reported as such, never as a disagreeing root. nil: hash "".
	NetworkDoc *protocol.NetworkDoc
	// HeadsInterval is how often the node announces its head on /heads (default 5 s) and
	// SyncInterval how often it reconciles with one random peer (default 30 s).
	HeadsInterval, SyncInterval time.Duration
	// PubSub tunes gossipsub's queues (zero: node defaults).
	PubSub PubSubOptions
	// Clock is the mesh's clock: the time it reads and every timer and ticker it makes
	// (default the wall clock; tests may pass a clock.Fake).
	Clock clock.Clock
	// Now, when set, is what the mesh reads as the time instead of Clock.Now.
	Now func() time.Time
	// Timing holds the mesh's other waits (zero fields: DefaultMeshTiming's).
	Timing MeshTiming
}

// defaultHeadsInterval is MeshOptions.HeadsInterval's default.
const defaultHeadsInterval = 5 * time.Second

// MeshTiming is every wait of the mesh not named by a MeshOptions field of its own.
type MeshTiming struct {
	// Tick is how often the loop ticks the coordinator besides its wake-ups (re-score
	// duties move on with it).
	Tick time.Duration
	// OpenGrace is how long a node with no peer waits before it claims alone; OpenPoll how
	// often it looks for a peer meanwhile; FirstSync bounds its first reconciliation.
	OpenGrace, OpenPoll, FirstSync time.Duration
	// CloseRelease bounds the wait for the loop to release this node's claims at Close;
	// CloseDrain the wait for those releases to leave, polled every CloseDrainPoll.
	CloseRelease, CloseDrain, CloseDrainPoll time.Duration
	// BundleFetch bounds one fetch of a campaign's bundle; a failed fetch is retried after
	// PrepareRetryBase, doubled each try up to PrepareRetryMax.
	BundleFetch, PrepareRetryBase, PrepareRetryMax time.Duration
	// HardLimitGrace is added to a task's wall-clock limit for a slot's hard limit: the
	// time to fetch, evaluate and sign.
	HardLimitGrace time.Duration
	// ObjectFetch bounds the fetch of a submission to re-score.
	ObjectFetch time.Duration
	// WitnessWait bounds a run's wait for its campaign's witness record (this node's own,
	// being stored), polled every WitnessPoll.
	WitnessWait, WitnessPoll time.Duration
}

// DefaultMeshTiming is MeshTiming's defaults.
var DefaultMeshTiming = MeshTiming{
	Tick:      time.Second,
	OpenGrace: 3 * time.Second, OpenPoll: 50 * time.Millisecond, FirstSync: 10 * time.Second,
	CloseRelease: 2 * time.Second, CloseDrain: time.Second, CloseDrainPoll: 5 * time.Millisecond,
	BundleFetch: 2 * time.Minute, PrepareRetryBase: time.Second, PrepareRetryMax: 30 * time.Second,
	HardLimitGrace: 5 * time.Minute, ObjectFetch: time.Minute,
	WitnessWait: 30 * time.Second, WitnessPoll: 50 * time.Millisecond,
}

// withDefaults fills t's zero fields from DefaultMeshTiming.
func (t MeshTiming) withDefaults() MeshTiming {
	d := DefaultMeshTiming
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.Tick, &d.Tick}, {&t.OpenGrace, &d.OpenGrace}, {&t.OpenPoll, &d.OpenPoll}, {&t.FirstSync, &d.FirstSync},
		{&t.CloseRelease, &d.CloseRelease}, {&t.CloseDrain, &d.CloseDrain}, {&t.CloseDrainPoll, &d.CloseDrainPoll},
		{&t.BundleFetch, &d.BundleFetch}, {&t.PrepareRetryBase, &d.PrepareRetryBase}, {&t.PrepareRetryMax, &d.PrepareRetryMax},
		{&t.HardLimitGrace, &d.HardLimitGrace}, {&t.ObjectFetch, &d.ObjectFetch},
		{&t.WitnessWait, &d.WitnessWait}, {&t.WitnessPoll, &d.WitnessPoll},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// Mesh is a running node's part in its network. Start it with StartMesh; Close stops it.
type Mesh struct {
	n     *Node
	opts  MeshOptions
	ps    *PubSub
	store *Store
	lab   string
	self  string
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	events  chan func()
	publish chan protocol.ClaimMessage

	closeOnce sync.Once
	closeErr  error

	// Owned by the loop goroutine. coord decides (protocol.Coordinator); the tables beside
	// it hold what carrying its actions out needs: the prepared campaigns' bundles and
	// agents, the runs' cancel functions, the stored runs' envelopes for re-announcing,
	// re-scoring and the dashboard.
	coord     *protocol.Coordinator
	campaigns map[string]*meshCampaign
	running   map[string]*activeRun
	runs      map[string]*runRecord // run attestation ID -> record
	bySlot    map[string][]string   // slot ID -> run attestation IDs, in arrival order
	rescores  map[string][]rescoreRecord
	labs      []string // the trusted labs' IDs, sorted: the network-document vote's members
	// peerLab: the lab of each peer whose claims passed the validator (its node certificate
	// checked against the trust store): the only peers whose heads vote on the network
	// document (mesh_netdoc.go).
	peerLab map[string]string
	// health: this node's own consecutive run failures; claiming stops at its limit
	// (mesh_health.go).
	health infraStreak
	wake   clock.Timer

	bundleMu sync.Mutex
	bundles  map[string]*sync.Mutex // per-CID fetch lock

	grants *grantIndex // sealed bundles' key grants (mesh_sealed.go)

	ledgerMu    sync.Mutex
	ledgerDirty bool
	ledgerTimer clock.Timer
	ledger      *MeshLedger
	ledgerCount int // computations, for tests
}

type meshCampaign struct {
	v      *protocol.VerifiedCampaign
	tasks  map[string]tasks.Meta // bundle CID -> metadata (after fetching it)
	agents map[string]*agentspec.Spec
	// refused: agent CID -> why this node's policy will not run it (mesh_policy.go).
	refused map[string]string
	// sealed: the campaign's sealed bundles (their keys may not open here; mesh_sealed.go).
	sealed map[string]bool
}

type activeRun struct {
	cancel  context.CancelCauseFunc
	attempt int
	aborted bool
	// abortReason is logged once the aborted run's goroutine has returned: the runner has
	// then killed and removed its tasks (runner.ErrAborted), so the line means it.
	abortReason string
}

type runRecord struct {
	ID, Node, Lab string
	Metric        string
	Witness       string // the witness record the run cites
	Slot          attest.Slot
	SlotID        string
	Attempt       int
	Valid         bool
	Score         *float64
	Envelope      []byte
	FirstSeen     time.Time
	Detail        runDetail // what the dashboard shows (mesh_dashboard.go)
}

type rescoreRecord struct {
	ID, Node, Lab string
	Metric        string
	Score         *float64
	Valid         bool
}

// MeshLedger is the last ledger the mesh computed from its store.
type MeshLedger struct {
	Ledger       *scoring.Ledger      `json:"ledger"`
	Report       *attest.LedgerReport `json:"report"`
	Root         string               `json:"ledger_root"`
	Attestations int                  `json:"attestations"`
	At           time.Time            `json:"at"`
}

// withDefaults fills o's zero fields with their defaults.
func (o MeshOptions) withDefaults() MeshOptions {
	if o.Capacity <= 0 {
		o.Capacity = 1
	}
	if o.RescoreTimeout <= 0 {
		o.RescoreTimeout = 2 * time.Minute
	}
	if o.LedgerDebounce <= 0 {
		o.LedgerDebounce = 250 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Now == nil {
		o.Now = o.Clock.Now
	}
	o.Timing = o.Timing.withDefaults()
	if o.CapacityEvery <= 0 {
		o.CapacityEvery = 5 * time.Second
	}
	if o.HeadsInterval <= 0 {
		o.HeadsInterval = defaultHeadsInterval
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = 30 * time.Second
	}
	return o
}

// StartMesh joins n to its network: gossipsub with the protocol's validators, the verified
// store, and the loop. n must have been started with a store (Node.Store).
func StartMesh(ctx context.Context, n *Node, opts MeshOptions) (*Mesh, error) {
	if opts.Trust == nil {
		return nil, errors.New("mesh: no trust store: list the network's labs (config trust:)")
	}
	if opts.Runner == nil || opts.Runner.Key == nil {
		return nil, errors.New("mesh: no runner with a signing key")
	}
	if opts.Runner.Cert == nil {
		return nil, fmt.Errorf("mesh: this node has no lab certificate (%s): ask the lab for one with `evalmesh lab certify --node %s`", n.home.CertPath(), n.ID())
	}
	opts = opts.withDefaults()
	st := n.Store()
	if st == nil {
		return nil, errors.New("mesh: the node has no attestation store")
	}
	n.setHeadsClock(opts.Now, opts.HeadsInterval)
	st.SetTrust(opts.Trust)
	cert := opts.Runner.Cert
	m := &Mesh{
		n: n, opts: opts, store: st, lab: cert.Lab, self: n.ID().String(),
		events: make(chan func(), 1024), publish: make(chan protocol.ClaimMessage, 4096),
		campaigns: map[string]*meshCampaign{}, running: map[string]*activeRun{},
		runs: map[string]*runRecord{}, bySlot: map[string][]string{}, rescores: map[string][]rescoreRecord{},
		bundles: map[string]*sync.Mutex{}, peerLab: map[string]string{}, health: infraStreak{limit: opts.MaxInfraStreak},
	}

	cc := opts.Claims
	cc.Self, cc.Lab, cc.Cert = m.self, cert.Lab, cert.Raw()
	m.labs = trustedLabIDs(opts.Trust) // the trust store is fixed for the mesh's life
	// No capacity until the store is replayed and one reconciliation has run (or a grace
	// period passed): a restarted node must learn what finished while it was away before it
	// claims anything (docs/protocol-claims.md, "restarts"); openCapacity opens it.
	cc.CertNotAfter = cert.NotAfter // claims only what it can sign (protocol/claim_cert.go)
	if cc.Labs == 0 {
		cc.Labs = len(m.labs) // a slot fails on failures of this many labs at most
	}
	m.coord = protocol.NewCoordinator(protocol.CoordinatorConfig{Claims: cc, Labs: m.labs, RescoreTimeout: opts.RescoreTimeout,
		RequireWitness: opts.Policy.RequireWitness, RequireClaimRecords: opts.Policy.RequireClaimRecords, AwaitingKey: awaitingKeySlots(opts.Runner, n.opts.Logf)})
	m.ctx, m.stop = context.WithCancel(context.Background())

	network := n.cfg.Network
	trust := opts.Trust
	validators := map[string]protocol.ValidatorFunc{
		protocol.TopicCampaigns: protocol.CampaignValidator(trust, network, 0, opts.Now),
		protocol.TopicClaims: func(from peer.ID, data []byte) protocol.Validation {
			return protocol.ValidateClaim(data, from.String(), trust, opts.Now())
		},
		protocol.TopicAttestations: protocol.AttestationValidator(protocol.AttestationCheck{Trust: trust}),
		// Recording a head (and syncing with a peer whose set differs) is the node's.
		protocol.TopicHeads: func(from peer.ID, data []byte) protocol.Validation {
			v := n.ObserveHead(data, from, opts.Now())
			if v.Verdict == protocol.Accept {
				m.peerSeen(from.String()) // liveness for dead-holder detection (claim_dead.go)
			}
			return v
		},
	}
	ps, err := NewPubSub(ctx, n.host, network, validators, opts.PubSub)
	if err != nil {
		return nil, err
	}
	m.ps = ps

	// What enters the store from any source (gossip, sync, a local run, an import) reaches
	// the loop once, after it is on disk; what did not come by gossip is gossiped on.
	st.Attestations().OnNew(func(src Source, envs [][]byte) {
		for _, env := range envs {
			env := env
			if src != SourceGossip {
				m.gossip(protocol.TopicAttestations, env)
			}
			m.do(func() { m.onAttestation(env) })
		}
		m.ledgerChanged()
	})
	st.Campaigns().OnNew(func(src Source, envs [][]byte) {
		for _, env := range envs {
			env := env
			if src != SourceGossip {
				m.gossip(protocol.TopicCampaigns, env)
			}
			m.do(func() { m.onCampaign(env) })
		}
	})

	m.startGrants()

	for _, kind := range []string{protocol.TopicCampaigns, protocol.TopicClaims, protocol.TopicAttestations, protocol.TopicHeads} {
		msgs, cancel, err := ps.Subscribe(m.ctx, kind)
		if err != nil {
			m.stop()
			ps.Close()
			return nil, err
		}
		m.wg.Add(1)
		go m.consume(kind, msgs, cancel)
	}
	m.wake = opts.Clock.NewTimer(time.Hour)
	m.wg.Add(3)
	go m.loop()
	go m.publisher()
	go func() {
		defer m.wg.Done()
		if sy := n.Syncer(); sy != nil {
			sy.Run(m.ctx, opts.SyncInterval)
		}
	}()

	// What the store already holds (a restart) is replayed through the loop, so campaigns
	// resume and finished slots stay finished.
	_ = st.Campaigns().Each(func(_ recon.ID, env []byte) error {
		m.do(func() { m.onCampaign(env) })
		return nil
	})
	_ = st.Attestations().Each(func(_ recon.ID, env []byte) error {
		m.do(func() { m.onAttestation(env) })
		return nil
	})
	m.ledgerChanged()
	m.wg.Add(1)
	go m.openCapacity()
	if opts.FreeCapacity != nil {
		m.wg.Add(1)
		go m.followCapacity()
	}
	if opts.NetworkDoc != nil {
		m.wg.Add(1)
		go m.watchDocument()
	}
	m.wg.Add(1)
	go m.watchCert() // mesh_cert.go
	return m, nil
}

// openCapacity gives the claim machine its capacity once this node has reconciled with a
// peer (so it knows what finished while it was away), or after a grace period when no peer
// is connected (a node alone).
func (m *Mesh) openCapacity() {
	defer m.wg.Done()
	clk, tm := m.opts.Clock, m.opts.Timing
	deadline := clk.Now().Add(tm.OpenGrace)
	t := clk.NewTicker(tm.OpenPoll)
	defer t.Stop()
	for {
		if peers := m.n.host.Network().Peers(); len(peers) > 0 || !clk.Now().Before(deadline) {
			if sy := m.n.Syncer(); sy != nil && len(peers) > 0 {
				ctx, cancel := context.WithTimeout(m.ctx, tm.FirstSync)
				_, err := sy.SyncWith(ctx, peers[0])
				cancel()
				if err != nil && m.ctx.Err() == nil {
					m.n.opts.Logf("mesh: first reconciliation with %s: %v (claiming anyway)", peers[0], err)
				}
			}
			break
		}
		select {
		case <-m.ctx.Done():
			return
		case <-t.Chan():
		}
	}
	m.do(func() { m.apply(m.coord.OpenCapacity(m.opts.Capacity, m.opts.Now())) })
}

// Close releases this node's claims (so others need not wait for the leases), stops the
// loop and its runs' contexts, and leaves gossipsub. Runs' state stays on disk: the next
// start recovers them.
func (m *Mesh) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Mesh) close() error {
	done := make(chan struct{})
	if m.do(func() {
		m.apply(m.coord.Shutdown(m.opts.Now()))
		close(done)
	}) {
		select {
		case <-done:
		case <-m.opts.Clock.After(m.opts.Timing.CloseRelease):
		}
	}
	// Let the releases go out before leaving the topics.
	deadline := m.opts.Clock.Now().Add(m.opts.Timing.CloseDrain)
	for len(m.publish) > 0 && m.opts.Clock.Now().Before(deadline) {
		m.opts.Clock.Sleep(m.opts.Timing.CloseDrainPoll)
	}
	m.stop()
	m.wg.Wait()
	m.ledgerMu.Lock()
	if m.ledgerTimer != nil {
		m.ledgerTimer.Stop()
	}
	m.ledgerMu.Unlock()
	return m.ps.Close()
}

// PubSub returns the mesh's gossipsub (counters for metrics and tests).
func (m *Mesh) PubSub() *PubSub { return m.ps }

// do hands f to the loop; false when the mesh has stopped.
func (m *Mesh) do(f func()) bool {
	select {
	case m.events <- f:
		return true
	case <-m.ctx.Done():
		return false
	}
}

// query runs f on the loop and waits for it.
func (m *Mesh) query(ctx context.Context, f func()) error {
	done := make(chan struct{})
	if !m.do(func() { f(); close(done) }) {
		return errors.New("mesh stopped")
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Mesh) loop() {
	defer m.wg.Done()
	tick := m.opts.Clock.NewTicker(m.opts.Timing.Tick)
	defer tick.Stop()
	headsTick := m.opts.Clock.NewTicker(m.opts.HeadsInterval)
	defer headsTick.Stop()
	for {
		select {
		case <-m.ctx.Done():
			for _, r := range m.running {
				r.cancel(nil) // shutdown, not an abort: a restarted node re-attaches to the run
			}
			return
		case f := <-m.events:
			f()
		case <-m.wake.Chan():
			m.apply(m.coord.Tick(m.opts.Now()))
		case <-tick.Chan():
			m.apply(m.coord.Tick(m.opts.Now()))
		case <-headsTick.Chan():
			m.announceHead()
		}
	}
}

func (m *Mesh) consume(kind string, msgs <-chan Message, cancel func()) {
	defer m.wg.Done()
	defer cancel()
	for {
		select {
		case <-m.ctx.Done():
			return
		case msg, ok := <-msgs:
			if !ok {
				return
			}
			if msg.Local {
				continue
			}
			switch kind {
			case protocol.TopicClaims:
				c, err := protocol.DecodeClaim(msg.Data)
				if err != nil {
					continue
				}
				m.n.metrics.claim("received", c.Kind)
				m.do(func() {
					if len(m.peerLab) < maxVotingPeers || m.peerLab[c.PeerID] != "" {
						m.peerLab[c.PeerID] = c.Lab
					}
					m.apply(m.coord.Claim(c, m.opts.Now()))
				})
			case protocol.TopicAttestations:
				_, _ = m.store.Attestations().Add([][]byte{msg.Data}, SourceGossip, msg.From.String())
			case protocol.TopicCampaigns:
				_, _ = m.store.Campaigns().Add([][]byte{msg.Data}, SourceGossip, msg.From.String())
			case protocol.TopicHeads:
				h, err := protocol.DecodeHead(msg.Data)
				if err != nil {
					continue
				}
				m.do(func() { m.coord.PeerHeard(h.PeerID, h.Lab, m.opts.Now()) })
			}
		}
	}
}

// publisher sends the claim machine's messages in order, off the loop.
func (m *Mesh) publisher() {
	defer m.wg.Done()
	// Start from the clock so a restarted node's messages never repeat earlier bytes.
	seq := uint64(m.opts.Clock.Now().UnixNano())
	for {
		select {
		case <-m.ctx.Done():
			return
		case c := <-m.publish:
			seq++
			c.Seq = seq
			data, err := protocol.EncodeClaim(&c)
			if err != nil {
				m.n.opts.Logf("mesh: encode claim: %v", err)
				continue
			}
			if err := m.ps.Publish(m.ctx, protocol.TopicClaims, data); err != nil && m.ctx.Err() == nil {
				m.n.opts.Logf("mesh: publish claim %s: %v", c.Slot, err)
			} else if err == nil {
				m.n.metrics.claim("sent", c.Kind)
			}
		}
	}
}

func (m *Mesh) gossip(kind string, data []byte) {
	go func() {
		if err := m.ps.Publish(m.ctx, kind, data); err != nil && m.ctx.Err() == nil {
			m.n.opts.Logf("mesh: publish on %s: %v", kind, err)
		}
	}()
}

// apply carries out the coordinator's actions: publish, abort, re-announce, start, then
// re-score, witness and recompute. It decides nothing.
func (m *Mesh) apply(a protocol.CoordActions) {
	for _, r := range a.SignRelease {
		m.signRelease(r) // mesh_claimrec.go
	}
	for _, c := range a.Publish {
		select {
		case m.publish <- c:
		default:
			// A full queue loses a claim message, which the protocol tolerates (claims are
			// soft state); blocking the loop would not.
			m.n.opts.Logf("mesh: claim queue full: dropped %s of %s", c.Kind, c.Slot)
			m.ps.CountDrop("claim_queue_full")
		}
	}
	for _, ab := range a.Abort {
		if r, ok := m.running[ab.SlotID]; ok {
			r.aborted = true
			if ab.Reason == protocol.AbortShutdown {
				r.cancel(nil) // left on disk: the next start recovers it (Close)
			} else {
				r.cancel(runner.ErrAborted) // the runner kills and removes its tasks
			}
			delete(m.running, ab.SlotID)
			if ab.Reason == protocol.AbortFinishedElsewhere && m.signedHere(ab.SlotID, r.attempt) {
				// This run's own attestation finished the slot before the run's goroutine
				// reported back: there was nothing left to cut short.
				continue
			}
			r.abortReason = string(ab.Reason)
		}
	}
	for _, g := range a.GiveUp {
		if r, ok := m.running[g.SlotID]; ok {
			m.n.opts.Warnf("mesh: slot %s attempt %d: %s: giving the attempt up", g.SlotID, g.Attempt, g.Why)
			r.cancel(runner.ErrAborted) // the runner removes its tasks; the run ends as an infrastructure failure: released, and retried elsewhere if need be
		}
	}
	for _, ig := range a.Ignored {
		m.n.opts.Warnf("mesh: ignored from %s on slot %s: %s", ig.Peer, ig.Slot, ig.Why)
	}
	for _, dc := range a.Declined {
		m.n.opts.Logf("mesh: %s %s not taken: %s", dc.Input, dc.ID, dc.Why)
	}
	for _, slotID := range a.Reannounce {
		// Someone claims a slot this node already ran (it restarted, or missed the result):
		// the attestation again, on gossip, finishes it there.
		for _, id := range m.bySlot[slotID] {
			if r := m.runs[id]; r != nil && r.Node == m.self {
				m.gossip(protocol.TopicAttestations, r.Envelope)
			}
		}
	}
	now := m.opts.Now()
	for _, s := range a.Start {
		m.startRun(s, now)
	}
	for _, id := range a.Rescore {
		m.startRescore(id)
	}
	for _, id := range a.Witness {
		m.witness(id)
	}
	for _, id := range a.Handed {
		if mc := m.campaigns[id]; mc != nil {
			m.n.opts.Logf("mesh: campaign %s %q: %d slots", id, mc.v.Campaign.Title, len(mc.v.Campaign.Slots())-m.refusedSlots(mc))
		}
	}
	if a.RecomputeLedger {
		m.ledgerChanged()
	}
	if !a.Wake.IsZero() {
		d := a.Wake.Sub(now)
		if d < 0 {
			d = 0
		}
		if !m.wake.Stop() {
			select {
			case <-m.wake.Chan():
			default:
			}
		}
		m.wake.Reset(d)
	}
}

// onCampaign handles a campaign the store accepted: fetch its bundles (their metadata is a
// ledger input and a node runs only what it holds), then hand it to the claim machine.
func (m *Mesh) onCampaign(env []byte) {
	v, err := protocol.VerifyCampaign(env, m.opts.Trust, protocol.CampaignVerifyOptions{Now: m.opts.Now(), Network: m.n.cfg.Network})
	if err != nil {
		// Expired since it was stored, say: its runs still count, nothing more is claimed.
		if protocol.CampaignReasonOf(err) != protocol.CampaignExpired {
			return
		}
		v, err = protocol.VerifyCampaign(env, m.opts.Trust, protocol.CampaignVerifyOptions{Now: m.campaignCreated(env), Network: m.n.cfg.Network})
		if err != nil {
			return
		}
	}
	if r, ok := m.opts.Trust.LabRetired(v.Lab); ok && !m.opts.Now().Before(r) {
		// Its lab retired from the network: what was run for it before still counts
		// (the ledger reads the stored campaign), nothing more is claimed.
		return
	}
	if !m.coord.CampaignHeard(v.ID) {
		return
	}
	go m.prepareCampaign(v, 0)
}

func (m *Mesh) campaignCreated(env []byte) time.Time {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return time.Time{}
	}
	c, err := protocol.DecodeCampaign(e.Payload)
	if err != nil {
		return time.Time{}
	}
	return c.Created
}

// prepareCampaign fetches a campaign's bundles and parses its agents, retrying while peers
// that hold the bundles are not reachable yet.
func (m *Mesh) prepareCampaign(v *protocol.VerifiedCampaign, try int) {
	mc := &meshCampaign{v: v, tasks: map[string]tasks.Meta{}, agents: map[string]*agentspec.Spec{}, sealed: map[string]bool{}}
	for _, a := range v.Campaign.Agents {
		spec, err := agentspec.Parse(a.Spec)
		if err != nil {
			m.n.opts.Logf("mesh: campaign %s: agent %s: %v", v.ID, a.CID, err)
			return
		}
		mc.agents[a.CID] = spec
	}
	for _, t := range v.Campaign.Tasks {
		ctx, cancel := context.WithTimeout(m.ctx, m.opts.Timing.BundleFetch)
		dir, err := m.BundleDir(ctx, t)
		cancel()
		if err == nil {
			var meta *tasks.Meta
			if meta, err = tasks.LoadMeta(dir); err == nil {
				mc.tasks[t] = *meta
				if tasks.IsSealed(dir) {
					mc.sealed[t] = true
				}
				continue
			}
		}
		if m.ctx.Err() != nil {
			return
		}
		m.n.opts.Logf("mesh: campaign %s: bundle %s: %v (retrying)", v.ID, t, err)
		delay := min(time.Duration(1<<min(try, 5))*m.opts.Timing.PrepareRetryBase, m.opts.Timing.PrepareRetryMax)
		select {
		case <-m.ctx.Done():
		case <-m.opts.Clock.After(delay):
			go m.prepareCampaign(v, try+1)
		}
		return
	}
	m.do(func() { m.addCampaign(mc) })
}

// addCampaign hands a prepared campaign to the coordinator: every slot, with its hard
// limit, whether this node can open its sealed bundle's key, and the agents its policy
// refuses.
func (m *Mesh) addCampaign(mc *meshCampaign) {
	c := mc.v.Campaign
	m.campaigns[mc.v.ID] = mc
	m.refuseByPolicy(mc)
	in := protocol.CoordinatorCampaign{Spec: protocol.CampaignSpec{ID: mc.v.ID, Created: c.Created, Deadline: c.Deadline},
		Lab: mc.v.Lab, Replication: c.Replication, Refused: map[string]bool{}, Unrunnable: m.unrunnable(mc)} // mesh_runnable.go
	for a := range mc.refused {
		in.Refused[a] = true
	}
	// Checked here, on the loop: a grant that keyArrived handled before this campaign was
	// added found nothing to lift, so this is where it counts.
	noKey := map[string]bool{}
	for t := range mc.sealed {
		noKey[t] = !m.opts.Runner.HoldsKey(t)
	}
	for _, s := range c.Slots() {
		limit := time.Duration(0)
		if meta, ok := mc.tasks[s.Task]; ok && meta.Limits.WallClockSeconds > 0 {
			// The runner enforces the task's own limit; the claim's hard limit adds the
			// time to fetch, evaluate and sign.
			limit = time.Duration(meta.Limits.WallClockSeconds)*time.Second + m.opts.Timing.HardLimitGrace
		}
		in.Spec.Slots = append(in.Spec.Slots, protocol.SlotSpec{ID: protocol.SlotID(s), Slot: s, HardLimit: limit, NoKey: noKey[s.Task]})
	}
	a := m.coord.AddCampaign(in, m.opts.Now())
	if !m.coord.Ready(mc.v.ID) {
		m.n.opts.Logf("mesh: campaign %s %q: waiting for another lab to witness it before claiming its slots", mc.v.ID, c.Title)
	}
	m.apply(a)
}

// refusedSlots counts mc's slots of agents this node's policy refuses.
func (m *Mesh) refusedSlots(mc *meshCampaign) int {
	n := 0
	for _, s := range mc.v.Campaign.Slots() {
		if _, no := mc.refused[s.Agent]; no {
			n++
		}
	}
	return n
}

// startRun starts a run the claim machine asked for, on its own goroutine.
func (m *Mesh) startRun(s protocol.StartRun, now time.Time) {
	mc := m.campaigns[s.Campaign]
	if mc == nil {
		m.apply(m.coord.RunEnded(s.Slot.ID, s.Attempt, protocol.RunOutcome{Kind: protocol.RunInfraFailed, Detail: "campaign unknown"}, now))
		return
	}
	ctx, cancel := context.WithCancelCause(m.ctx)
	ar := &activeRun{cancel: cancel, attempt: s.Attempt}
	m.running[s.Slot.ID] = ar
	m.apply(m.coord.RunStarted(s.Slot.ID, now))
	spec := mc.agents[s.Slot.Slot.Agent]
	witness := m.coord.WitnessFor(s.Campaign)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel(nil)
		outcome := m.execute(ctx, s, spec, witness)
		m.do(func() {
			m.n.metrics.runEnded(outcome, ar.aborted)
			m.runOutcome(outcome, ar.aborted)
			if ar.abortReason != "" {
				m.n.opts.Logf("mesh: aborted run of slot %s (%s): its tasks are stopped and removed", s.Slot.ID, ar.abortReason)
			}
			if ar.aborted || m.running[s.Slot.ID] != ar {
				return // the machine already considers the run over
			}
			delete(m.running, s.Slot.ID)
			m.apply(m.coord.RunEnded(s.Slot.ID, ar.attempt, outcome, m.opts.Now()))
		})
	}()
}

// execute runs one slot: bundle, agent, evaluation, signature; then the submission and log
// archive go into the blockstore (peers fetch them by the CIDs in the attestation) and the
// attestation into the store, which gossips it.
func (m *Mesh) execute(ctx context.Context, s protocol.StartRun, spec *agentspec.Spec, witness string) protocol.RunOutcome {
	infra := func(err error) protocol.RunOutcome {
		m.n.opts.Logf("mesh: run of slot %s failed (infrastructure): %v", s.Slot.ID, err)
		return protocol.RunOutcome{Kind: protocol.RunInfraFailed, Detail: err.Error()}
	}
	if spec == nil {
		return infra(fmt.Errorf("agent %s is not in campaign %s", s.Slot.Slot.Agent, s.Campaign))
	}
	if witness == "" && m.opts.Policy.RequireWitness {
		// This node's own witness of another lab's campaign is still being stored: a run
		// signed without one would not count (mesh_witness.go).
		var err error
		if witness, err = m.awaitWitness(ctx, s.Campaign); err != nil {
			return infra(err)
		}
	}
	if err := m.signClaimRecord(ctx, s, witness); err != nil {
		return infra(err)
	}
	dir, err := m.BundleDir(ctx, s.Slot.Slot.Task)
	if err != nil {
		return infra(err)
	}
	if err := m.ensureAgentImage(ctx, spec); err != nil {
		return infra(err)
	}
	o, err := m.opts.Runner.Run(ctx, runner.Request{
		TaskDir: dir, TaskCID: s.Slot.Slot.Task, Agent: spec, Seed: s.Slot.Slot.Seed,
		Campaign: s.Campaign, Attempt: s.Attempt, Witness: witness,
	})
	if d, ok := m.sealedRunOutcome(err); ok {
		return protocol.RunOutcome{Kind: protocol.RunAwaitingKey, Detail: d}
	}
	if err != nil {
		return infra(err)
	}
	if err := m.ingestRun(ctx, o.Envelope); err != nil {
		return infra(err)
	}
	m.n.metrics.signed(o.Predicate)
	if o.Valid {
		return protocol.RunOutcome{Kind: protocol.RunValid}
	}
	return protocol.RunOutcome{Kind: protocol.RunAgentFailed, Detail: o.InvalidReason}
}

// signedHere reports whether this node's attestation of the slot's run attempt is known.
func (m *Mesh) signedHere(slotID string, attempt int) bool {
	for _, id := range m.bySlot[slotID] {
		if r := m.runs[id]; r != nil && r.Node == m.self && r.Attempt == attempt {
			return true
		}
	}
	return false
}

// ingestRun stores the objects a run attestation names (from HOME/objects) as raw blocks,
// then the attestation itself.
func (m *Mesh) ingestRun(ctx context.Context, env []byte) error {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return err
	}
	st, _, _, err := attest.DecodeStatement(e.Payload)
	if err != nil {
		return err
	}
	for _, sub := range st.Subject {
		cs, _ := sub.Annotations[attest.AnnotationCID].(string)
		if cs == "" {
			continue
		}
		if err := m.putObject(ctx, cs); err != nil {
			return err
		}
	}
	res, err := m.store.Attestations().Add([][]byte{env}, SourceLocal, "")
	if err != nil {
		return err
	}
	if len(res) == 1 && res[0].Status == StatusRefused {
		return fmt.Errorf("own attestation %s refused by the store: %s %s", res[0].ID, res[0].Reason, res[0].Detail)
	}
	return nil
}

func (m *Mesh) putObject(ctx context.Context, cs string) error {
	c, err := cid.Decode(cs)
	if err != nil {
		return fmt.Errorf("object CID %q: %w", cs, err)
	}
	data, err := os.ReadFile(filepath.Join(runner.ObjectsDir(m.n.home), cs))
	if err != nil {
		return err
	}
	b, err := blocks.NewBlockWithCid(data, c)
	if err != nil {
		return err
	}
	if err := m.n.bstore.Put(ctx, b); err != nil {
		return err
	}
	return m.n.store.Sync()
}

// BundleDir returns the unpacked bundle of a task CID under HOME/bundles, fetching it from
// peers first if this node does not have it (one fetch per CID at a time).
func (m *Mesh) BundleDir(ctx context.Context, cs string) (string, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return "", fmt.Errorf("task CID %q: %w", cs, err)
	}
	m.bundleMu.Lock()
	mu := m.bundles[c.String()]
	if mu == nil {
		mu = &sync.Mutex{}
		m.bundles[c.String()] = mu
	}
	m.bundleMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	return m.n.bundleDir(ctx, c, 0)
}

// bundleDir returns the unpacked bundle c under HOME/bundles, fetching it from the connected
// peers first (within timeout; 0: the fetch's default) when this home does not have it. It
// unpacks into a temporary folder beside it and renames, so a crash leaves no half bundle;
// callers that may fetch one CID at once serialise (Mesh.BundleDir).
func (n *Node) bundleDir(ctx context.Context, c cid.Cid, timeout time.Duration) (string, error) {
	dir := filepath.Join(n.home.BundlesDir(), c.String())
	if _, err := os.Stat(filepath.Join(dir, tasks.MetaFile)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".unpack-"+c.String()+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	target := filepath.Join(tmp, "b")
	if err := n.Get(ctx, c, target, GetOptions{Timeout: timeout}); err != nil {
		return "", err
	}
	if err := os.Rename(target, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// onAttestation records a run or re-score the store accepted.
func (m *Mesh) onAttestation(env []byte) {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return
	}
	st, run, rs, err := attest.DecodeStatement(e.Payload)
	if err != nil {
		return
	}
	id := attest.EnvelopeID(env)
	now := m.opts.Now()
	switch {
	case run != nil:
		if _, ok := m.runs[id]; ok {
			return
		}
		slotID := protocol.SlotID(run.Slot)
		m.runs[id] = &runRecord{ID: id, Node: run.Node, Lab: run.Lab, Metric: run.Metric, Witness: run.Witness, Slot: run.Slot, SlotID: slotID,
			Attempt: max(run.Attempt, 1), Valid: run.Valid, Score: run.Score, Envelope: env, FirstSeen: now, Detail: runDetailOf(st, run)}
		m.bySlot[slotID] = append(m.bySlot[slotID], id)
		m.apply(m.coord.Run(protocol.RunHeard{ID: id, Node: run.Node, Lab: run.Lab, Slot: run.Slot, SlotID: slotID, Attempt: run.Attempt,
			Metric: run.Metric, Valid: run.Valid, Score: run.Score, Witness: run.Witness}, now))
	case rs != nil:
		for _, r := range m.rescores[rs.Run] {
			if r.ID == id {
				return
			}
		}
		m.rescores[rs.Run] = append(m.rescores[rs.Run], rescoreRecord{ID: id, Node: rs.Node, Lab: rs.Lab, Metric: rs.Metric, Score: rs.Score, Valid: rs.Valid})
		m.apply(m.coord.Rescore(protocol.RescoreHeard{ID: id, Run: rs.Run, Node: rs.Node, Lab: rs.Lab, Metric: rs.Metric, Valid: rs.Valid, Score: rs.Score}, now))
	default:
		if w := witnessOf(st, e.Payload); w != nil {
			a := m.coord.Witness(protocol.WitnessHeard{ID: id, Campaign: w.Campaign, Lab: w.Lab, Node: w.Node}, now)
			if slices.Contains(a.Handed, w.Campaign) {
				m.n.opts.Logf("mesh: campaign %s: witnessed by lab %s; claiming its slots", w.Campaign, w.Lab)
			}
			m.apply(a)
		} else if c := claimRecordOf(st, e.Payload); c != nil {
			m.apply(m.coord.ClaimRecord(claimRecordHeard(id, c), now)) // mesh_claimrec.go
		}
	}
}

func trustedLabIDs(trust *attest.TrustStore) []string {
	var out []string
	for _, l := range trust.Labs() {
		id := l.ID
		if id == "" {
			if pub, err := attest.DecodeBase64(l.Key); err == nil && len(pub) == 32 {
				id = attest.LabID(pub)
			}
		}
		if id != "" {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// startRescore re-scores run id, as the coordinator asked, on its own goroutine.
func (m *Mesh) startRescore(id string) {
	r, ok := m.runs[id]
	if !ok {
		m.coord.RescoreEnded(id)
		return
	}
	rec := *r
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		_, err := m.rescore(m.ctx, &rec)
		if err != nil && m.ctx.Err() == nil {
			m.n.opts.Logf("mesh: re-score of %s: %v (retried later)", rec.ID, err)
		}
		m.do(func() { m.coord.RescoreEnded(rec.ID) })
	}()
}

// Rescore re-scores the run attestation runID: fetch its submission by CID from peers,
// score it against this node's copy of the bundle, sign and store (so gossip) a re-score.
// It returns the re-score's attestation ID.
func (m *Mesh) Rescore(ctx context.Context, runID string) (string, error) {
	var rec *runRecord
	if err := m.query(ctx, func() {
		if r, ok := m.runs[runID]; ok {
			c := *r
			rec = &c
		}
	}); err != nil {
		return "", err
	}
	if rec == nil {
		return "", fmt.Errorf("no run attestation %s in this node's store (see `evalmesh campaign status`)", runID)
	}
	return m.rescore(ctx, rec)
}

func (m *Mesh) rescore(ctx context.Context, r *runRecord) (string, error) {
	e, err := attest.DecodeEnvelope(r.Envelope)
	if err != nil {
		return "", err
	}
	st, run, _, err := attest.DecodeStatement(e.Payload)
	if err != nil || run == nil {
		return "", fmt.Errorf("%s is not a run attestation", r.ID)
	}
	var subName, subCID, subSum string
	for _, s := range st.Subject {
		if role, _ := s.Annotations[attest.AnnotationRole].(string); role == attest.RoleSubmission {
			subName, subSum = s.Name, s.Digest["sha256"]
			subCID, _ = s.Annotations[attest.AnnotationCID].(string)
		}
	}
	dir, err := m.BundleDir(ctx, run.Slot.Task)
	if err != nil {
		return "", err
	}
	var sub []byte
	if subCID != "" {
		if sub, err = m.fetchObject(ctx, subCID, subSum); err != nil {
			return "", err
		}
	}
	var out *runner.Rescored
	if sub == nil {
		// A run without a submission is re-scored as what it is: invalid, nothing to score.
		out, err = m.opts.Runner.RescoreMissing(r.ID, run, r.Envelope, dir)
	} else {
		out, err = m.opts.Runner.RescoreSubmission(ctx, r.ID, run, sub, subName, subCID, dir)
	}
	if err != nil {
		return "", err
	}
	res, err := m.store.Attestations().Add([][]byte{out.Envelope}, SourceLocal, "")
	if err != nil {
		return "", err
	}
	if len(res) == 1 && res[0].Status == StatusRefused {
		return "", fmt.Errorf("own re-score refused by the store: %s %s", res[0].Reason, res[0].Detail)
	}
	return out.AttestationID, nil
}

// fetchObject gets a raw block by CID (locally or from connected peers) and checks it
// against the attested sha256.
func (m *Mesh) fetchObject(ctx context.Context, cs, sum string) ([]byte, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return nil, fmt.Errorf("submission CID %q: %w", cs, err)
	}
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timing.ObjectFetch)
	defer cancel()
	b, err := m.n.bserv.GetBlock(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("fetch submission %s from peers: %w", cs, err)
	}
	got := sha256.Sum256(b.RawData())
	if sum != "" && hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("submission %s does not match its attested sha256", cs)
	}
	return b.RawData(), nil
}

// ledgerChanged schedules a ledger computation after the debounce.
func (m *Mesh) ledgerChanged() {
	m.ledgerMu.Lock()
	defer m.ledgerMu.Unlock()
	m.ledgerDirty = true
	if m.ledgerTimer == nil {
		m.ledgerTimer = m.opts.Clock.AfterFunc(m.opts.LedgerDebounce, m.computeLedger)
	}
}

func (m *Mesh) computeLedger() {
	m.ledgerMu.Lock()
	m.ledgerDirty = false
	m.ledgerMu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	in, ok := m.ledgerInput()
	var ml *MeshLedger
	if ok {
		fp := m.store.Attestations().Fingerprint()
		began := m.opts.Clock.Now()
		l, rep, err := m.store.Ledger(in)
		m.n.metrics.ledgerSeconds.Observe(m.opts.Clock.Since(began).Seconds())
		if err == nil {
			m.n.setHeadRoot(l.Root(), fp)
		}
		if err != nil {
			m.n.opts.Logf("mesh: ledger: %v", err)
		} else {
			ml = &MeshLedger{Ledger: l, Report: rep, Root: l.Root(), Attestations: m.store.Attestations().Len(), At: m.opts.Now()}
		}
	}
	if ml != nil {
		m.do(m.announceHead)
	}
	m.ledgerMu.Lock()
	if ml != nil {
		m.ledger = ml
		m.ledgerCount++
	}
	m.ledgerTimer = nil
	if m.ledgerDirty {
		m.ledgerTimer = m.opts.Clock.AfterFunc(m.opts.LedgerDebounce, m.computeLedger)
	}
	m.ledgerMu.Unlock()
}

// ledgerInput gathers the ledger's inputs besides the attestations: the tasks, agents and
// windows of every campaign this node has prepared (protocol.NamesOf names them).
func (m *Mesh) ledgerInput() (attest.LedgerInput, bool) {
	var in attest.LedgerInput
	err := m.query(m.ctx, func() {
		names := protocol.NamesOf(m.ledgerCampaigns())
		pol := m.opts.Policy
		pol.Tasks, pol.Agents, pol.AgentOwners = names.TaskNames, names.AgentNames, names.AgentOwners
		in.Tasks, in.Campaigns = names.Tasks, names.Windows
		in.Policy, in.Scoring, in.Trust, in.Now = pol, m.opts.Scoring, m.opts.Trust, m.opts.Now()
	})
	return in, err == nil && len(in.Tasks) > 0
}

// ledgerCampaigns is what the ledger takes of each prepared campaign. On the loop.
func (m *Mesh) ledgerCampaigns() []protocol.LedgerCampaign {
	cs := make([]protocol.LedgerCampaign, 0, len(m.campaigns))
	for id, mc := range m.campaigns {
		c := protocol.LedgerCampaign{ID: id, Lab: mc.v.Lab, LabName: mc.v.LabName, Created: mc.v.Campaign.Created, Deadline: mc.v.Campaign.Deadline,
			Tasks: map[string]scoring.TaskInfo{}, Agents: map[string]string{}}
		for cid, meta := range mc.tasks {
			c.Tasks[cid] = scoring.TaskInfo{Name: meta.Name, LowerIsBetter: meta.Metric.LowerIsBetter,
				Optimum: meta.Metric.OptimalScore, SOTA: meta.SOTA.Score, EstimatedWorst: meta.EstimatedWorstScore}
		}
		for cid, spec := range mc.agents {
			c.Agents[cid] = spec.Name
		}
		cs = append(cs, c)
	}
	return cs
}

// Ledger returns the last computed ledger, or nil before the first.
func (m *Mesh) Ledger() *MeshLedger {
	m.ledgerMu.Lock()
	defer m.ledgerMu.Unlock()
	return m.ledger
}

// PublishCampaign stores a campaign envelope (verifying it) and gossips it; it returns the
// campaign ID.
func (m *Mesh) PublishCampaign(env []byte) (string, error) {
	if _, err := protocol.VerifyCampaign(env, m.opts.Trust, protocol.CampaignVerifyOptions{Now: m.opts.Now(), Network: m.n.cfg.Network}); err != nil {
		return "", err
	}
	res, err := m.store.Campaigns().Add([][]byte{env}, SourceLocal, "")
	if err != nil {
		return "", err
	}
	if res[0].Status == StatusRefused {
		return "", fmt.Errorf("campaign refused: %s %s", res[0].Reason, res[0].Detail)
	}
	if res[0].Status == StatusKnown {
		// Already stored: gossip again for peers that missed it.
		m.gossip(protocol.TopicCampaigns, env)
	}
	return attest.EnvelopeID(env), nil
}

// verifyStoredCampaign is the store's campaign verifier: signature, trusted lab, network and
// a well-formed body, as of the campaign's own creation time, so a campaign whose deadline
// has passed still enters the store (its runs count; nobody claims its slots any more).
// The order key is its creation time.
func (n *Node) verifyStoredCampaign(env []byte) (uint64, error) {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return 0, err
	}
	c, err := protocol.DecodeCampaign(e.Payload)
	if err != nil {
		return 0, err
	}
	v, err := protocol.VerifyCampaign(env, n.vstore.Trust(), protocol.CampaignVerifyOptions{Now: c.Created, Network: n.cfg.Network})
	if err != nil {
		return 0, err
	}
	return uint64(max(v.Campaign.Created.Unix(), 0)), nil
}

// ImportLocal puts the run attestations this node's runner left in HOME/attestations (and
// the objects they name) into the store, which gossips the new ones: at start, and after
// the runs a killed daemon left behind have been recovered and attested. It returns how
// many were new.
func (m *Mesh) ImportLocal(ctx context.Context) (int, error) {
	files, refused, err := attest.ReadEnvelopeDir(m.n.home.AttestationsDir())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	for _, r := range refused {
		m.n.opts.Logf("mesh: %s", r)
	}
	before := m.store.Attestations().Len()
	for _, f := range files {
		if err := m.ingestRun(ctx, f.Data); err != nil {
			m.n.opts.Logf("mesh: import %s: %v", f.Name, err)
		}
	}
	return m.store.Attestations().Len() - before, nil
}

// announceHead publishes this node's head on /heads (Node.SignedHead: the root is the one
// this mesh last computed, for the set it computed it over).
func (m *Mesh) announceHead() {
	data, err := m.n.SignedHead(m.lab)
	if err != nil {
		m.n.opts.Logf("mesh: sign head: %v", err)
		return
	}
	m.gossip(protocol.TopicHeads, data)
}

// ClaimToStart returns the claim→start time of every run this node started.
func (m *Mesh) ClaimToStart(ctx context.Context) ([]time.Duration, error) {
	var out []time.Duration
	err := m.query(ctx, func() { out = m.coord.ClaimToStart() })
	return out, err
}

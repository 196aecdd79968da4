package mesh

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// Options configure a node's part in its network.
type Options struct {
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
	// never exceed what it can start; on an error capacity stays. capacity.go.
	FreeCapacity  func() (int, error)
	CapacityEvery time.Duration
	// Claims tunes leases, heartbeats and settling (zero fields: protocol defaults).
	Claims protocol.ClaimConfig
	// MaxInfraStreak: this node's own runs ending by infrastructure failures in a row after
	// which it stops claiming (0: protocol.DefaultMaxInfraStreak; health.go).
	MaxInfraStreak int
	// CertEvery is how often the node certificate file is checked for a renewal, and the
	// trust file and network document for new revocations (0: 10 s; cert.go,
	// revoke.go).
	CertEvery time.Duration
	// TestAuditGate, set only by the daemon's hidden --test-hold-audits (tests), is a file
	// path: while the file exists this node's audits wait before they re-execute, so a test
	// can see what the ledger does before any audit is in (audit.go).
	TestAuditGate string
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
	// Clock is the mesh's clock: the time it reads and every timer, ticker and context
	// timeout it makes (Timing's FirstSync, BundleFetch and ObjectFetch budgets among them;
	// default the wall clock; tests may pass a clock.Fake).
	Clock clock.Clock
	// Now, when set, is what the mesh reads as the time instead of Clock.Now.
	Now func() time.Time
	// Timing holds the mesh's other waits (zero fields: DefaultTiming's).
	Timing Timing

	// The node's values, which the node fills in when it starts the mesh (node.StartMesh).
	// Home is the node's home (its attestations, objects and lab age key); Network the
	// network's name (config network:); AgentPolicy the lab's policy on what it runs
	// (config runner:, runner.PolicyFromConfig).
	Home        home.Home
	Network     string
	AgentPolicy runner.ModelPolicy
	// Logf and Warnf receive the mesh's log lines (default: discard; Warnf: Logf).
	Logf, Warnf func(format string, args ...any)
	// Metrics counts claims, runs and ledger computations (default: nothing).
	Metrics Metrics
}

// DefaultHeadsInterval is Options.HeadsInterval's default.
const DefaultHeadsInterval = 5 * time.Second

// Timing is every wait of the mesh not named by a Options field of its own.
type Timing struct {
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

// DefaultTiming is Timing's defaults.
var DefaultTiming = Timing{
	Tick:      time.Second,
	OpenGrace: 3 * time.Second, OpenPoll: 50 * time.Millisecond, FirstSync: 10 * time.Second,
	CloseRelease: 2 * time.Second, CloseDrain: time.Second, CloseDrainPoll: 5 * time.Millisecond,
	BundleFetch: 2 * time.Minute, PrepareRetryBase: time.Second, PrepareRetryMax: 30 * time.Second,
	HardLimitGrace: 5 * time.Minute, ObjectFetch: time.Minute,
	WitnessWait: 30 * time.Second, WitnessPoll: 50 * time.Millisecond,
}

// withDefaults fills t's zero fields from DefaultTiming.
func (t Timing) withDefaults() Timing {
	d := DefaultTiming
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

// Mesh is a running node's part in its network. node.StartMesh starts it; Close stops it.
// It keeps the loop and the tables that carry the coordinator's actions out; each duty
// with state or a goroutine of its own is a type of its own, held here (the package
// comment says who owns what).
type Mesh struct {
	*shared // set by Start, then only read

	publish chan protocol.ClaimMessage // to the publisher, which owns the claim sequence number

	closeOnce sync.Once
	closeErr  error

	// Owned by the loop goroutine. coord (shared) decides (protocol.Coordinator); the
	// tables beside it hold what carrying its actions out needs: the prepared campaigns'
	// bundles and agents, the runs' cancel functions, the stored runs' envelopes for
	// re-announcing, re-scoring and the dashboard.
	campaigns map[string]*meshCampaign
	running   map[string]*activeRun
	runs      map[string]*runRecord // run attestation ID -> record
	bySlot    map[string][]string   // slot ID -> run attestation IDs, in arrival order
	rescores  map[string][]rescoreRecord
	wake      clock.Timer

	// The duties, each with its own lock or goroutine (set by Start, then only read).
	objects  *objects     // bundles, blocks and the run attestations put here (objects.go)
	grants   *grantIndex  // sealed bundles' key grants (sealed.go)
	ledger   *ledgerCalc  // the debounced ledger computation and its result (ledger.go)
	audits   *auditor     // audits' re-execution (audit.go)
	doc      *docVote     // the network-document vote (netdoc.go)
	records  recordSigner // witness, claim and release records (witness.go, claimrec.go)
	rescorer rescorer     // re-scores (rescore.go)
}

type meshCampaign struct {
	v      *protocol.VerifiedCampaign
	tasks  map[string]tasks.Meta // bundle CID -> metadata (after fetching it)
	agents map[string]*agentspec.Spec
	// refused: agent CID -> why this node's policy will not run it (policy.go).
	refused map[string]string
	// sealed: the campaign's sealed bundles (their keys may not open here; sealed.go).
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
	Detail        runDetail // what the dashboard shows (dashboard.go)
}

type rescoreRecord struct {
	ID, Node, Lab string
	Metric        string
	Score         *float64
	Valid         bool
}

// withDefaults fills o's zero fields with their defaults.
func (o Options) withDefaults() Options {
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
		o.HeadsInterval = DefaultHeadsInterval
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = 30 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Warnf == nil {
		o.Warnf = o.Logf
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	return o
}

// Start joins the node nd, whose verified store is st, to its network: gossipsub with
// the protocol's validators, the store's hooks, and the loop. opts carries the node's
// values (node.StartMesh fills them in).
func Start(ctx context.Context, nd Node, st *vstore.Store, opts Options) (*Mesh, error) {
	if opts.Trust == nil {
		return nil, errors.New("mesh: no trust store: list the network's labs (config trust:)")
	}
	if opts.Runner == nil || opts.Runner.Key == nil {
		return nil, errors.New("mesh: no runner with a signing key")
	}
	if opts.Runner.Cert == nil {
		return nil, fmt.Errorf("mesh: this node has no lab certificate (%s): ask the lab for one with `evalmesh lab certify --node %s`", opts.Home.CertPath(), nd.ID())
	}
	opts = opts.withDefaults()
	if st == nil {
		return nil, errors.New("mesh: the node has no attestation store")
	}
	nd.SetHeadsClock(opts.Now, opts.HeadsInterval)
	st.SetTrust(opts.Trust)
	m := newMesh(nd, st, opts)
	ps, err := nd.JoinGossip(ctx, validators(nd, opts, m.peerSeen), valueValidators(opts))
	if err != nil {
		return nil, err
	}
	m.ps = ps
	m.hookStore()
	m.grants.start() // sealed.go
	if err := m.run(); err != nil {
		return nil, err
	}
	m.replay()
	m.startDuties()
	return m, nil
}

// newMesh makes the mesh of nd, its coordinator and its duties; nothing runs yet.
func newMesh(nd Node, st *vstore.Store, opts Options) *Mesh {
	sh := &shared{node: nd, opts: opts, store: st, lab: opts.Runner.Cert.Lab, self: nd.ID().String(), events: make(chan func(), 1024)}
	m := &Mesh{shared: sh, publish: make(chan protocol.ClaimMessage, 4096),
		campaigns: map[string]*meshCampaign{}, running: map[string]*activeRun{},
		runs: map[string]*runRecord{}, bySlot: map[string][]string{}, rescores: map[string][]rescoreRecord{},
	}
	sh.apply = m.apply
	labs := opts.Trust.LabIDs() // the trust store is fixed for the mesh's life
	sh.coord = newCoordinator(opts, sh.self, labs)
	sh.ctx, sh.stop = context.WithCancel(context.Background())
	m.objects = &objects{shared: sh, bundles: map[string]*sync.Mutex{}}
	m.grants = &grantIndex{shared: sh, objects: m.objects, byCID: map[string][][]byte{}}
	m.ledger = &ledgerCalc{shared: sh, input: m.ledgerInput, held: m.auditHeld}
	m.audits = &auditor{shared: sh, objects: m.objects}
	m.doc = &docVote{shared: sh, labs: labs, peerLab: map[string]string{}}
	m.records = recordSigner{sh}
	m.rescorer = rescorer{shared: sh, objects: m.objects}
	return m
}

// newCoordinator makes the claim machine of this node (self, of the lab its certificate
// names), among the trusted labs.
func newCoordinator(opts Options, self string, labs []string) *protocol.Coordinator {
	cert := opts.Runner.Cert
	cc := opts.Claims
	cc.Self, cc.Lab, cc.Cert = self, cert.Lab, cert.Raw()
	// No capacity until the store is replayed and one reconciliation has run (or a grace
	// period passed): a restarted node must learn what finished while it was away before it
	// claims anything (docs/protocol-claims.md, "restarts"); capacity.open opens it.
	cc.CertNotAfter = cert.NotAfter // claims only what it can sign (protocol/claim_cert.go)
	if cc.Labs == 0 {
		cc.Labs = len(labs) // a slot fails on failures of this many labs at most
	}
	c := protocol.NewCoordinator(protocol.CoordinatorConfig{Claims: cc, Labs: labs, RescoreTimeout: opts.RescoreTimeout,
		RequireWitness: opts.Policy.RequireWitness, RequireClaimRecords: opts.Policy.RequireClaimRecords, AwaitingKey: awaitingKeySlots(opts.Runner, opts.Logf),
		Scorers:         opts.Policy.Scorers,
		MaxAgentsPerLab: opts.Policy.MaxAgentsPerLab, MaxCampaignsPerLab: opts.Policy.MaxCampaignsPerLab,
		RescorerDraw: opts.Policy.RescorerDraw, OwnDraw: ownRescoreDraw(opts.Runner.Drawer()), MaxInfraStreak: opts.MaxInfraStreak})
	if d := opts.NetworkDoc; d != nil && d.AuditsOn() {
		c.EnableAudits(protocol.AuditDutyConfig{Rate: d.AuditRate()}) // audit.go
	}
	return c
}

// validators are the protocol's gossip validators, under opts' trust store, network and
// clock; an accepted head is a sign of life of its peer (peerSeen).
func validators(nd Node, opts Options, peerSeen func(string)) map[string]protocol.ValidatorFunc {
	trust := opts.Trust
	return map[string]protocol.ValidatorFunc{
		protocol.TopicClaims: func(from peer.ID, data []byte) protocol.Validation {
			return protocol.ValidateClaim(data, from.String(), trust, opts.Now())
		},
		// Recording a head (and syncing with a peer whose set differs) is the node's.
		protocol.TopicHeads: func(from peer.ID, data []byte) protocol.Validation {
			v := nd.ObserveHead(data, from, opts.Now())
			if v.Verdict == protocol.Accept {
				peerSeen(from.String()) // liveness for dead-holder detection (claim_dead.go)
			}
			return v
		},
	}
}

// valueValidators are the topics' validators that hand on what they verified (pubsub's
// ValidatorData): the campaigns topic's campaign and the attestations topic's envelope
// with the trust store it was verified under, which the store takes as is (the
// attestation while that trust store is still its own), so a gossiped campaign or
// attestation is verified once.
func valueValidators(opts Options) map[string]protocol.ValueValidatorFunc {
	return map[string]protocol.ValueValidatorFunc{
		protocol.TopicCampaigns:    protocol.CampaignValueValidator(opts.Trust, opts.Network, opts.Now),
		protocol.TopicAttestations: protocol.AttestationValueValidator(protocol.AttestationCheck{Trust: opts.Trust}),
	}
}

// hookStore hands the loop what enters the store from any source (gossip, sync, a local
// run, an import), once, after it is on disk; what did not come by gossip is gossiped on.
// Each comes with the value the store's verification made: nothing below decodes or
// verifies the bytes again.
func (m *Mesh) hookStore() {
	m.store.Attestations().OnNew(func(src vstore.Source, news []vstore.Accepted) {
		for _, a := range news {
			if src != vstore.SourceGossip {
				m.gossip(protocol.TopicAttestations, a.Envelope)
			}
			if v, ok := a.Value.(*attest.Verified); ok {
				m.do(func() { m.onAttestation(v) })
			}
		}
		m.ledger.changed()
	})
	m.store.Campaigns().OnNew(func(src vstore.Source, news []vstore.Accepted) {
		for _, a := range news {
			if src != vstore.SourceGossip {
				m.gossip(protocol.TopicCampaigns, a.Envelope)
			}
			if v, ok := a.Value.(*protocol.VerifiedCampaign); ok {
				m.do(func() { m.onCampaign(v) })
			}
		}
	})
}

// run subscribes a consumer to each topic and starts the loop, the publisher and the sync
// rounds.
func (m *Mesh) run() error {
	for _, kind := range []string{protocol.TopicCampaigns, protocol.TopicClaims, protocol.TopicAttestations, protocol.TopicHeads} {
		msgs, cancel, err := m.ps.Subscribe(m.ctx, kind)
		if err != nil {
			m.stop()
			m.ps.Close()
			return err
		}
		m.wg.Add(1)
		go m.consume(kind, msgs, cancel)
	}
	m.wake = m.opts.Clock.NewTimer(time.Hour)
	m.wg.Add(3)
	go m.loop()
	go m.publisher()
	go func() {
		defer m.wg.Done()
		m.node.RunSync(m.ctx, m.opts.Clock, m.opts.SyncInterval)
	}()
	return nil
}

// replay hands the loop what the store already holds (a restart), so campaigns resume and
// finished slots stay finished. The campaigns are verified again (once each: a restart
// keeps no values), the attestations restored once into the values the ledger recomputes
// from.
func (m *Mesh) replay() {
	_ = m.store.Campaigns().Each(func(_ recon.ID, env []byte) error {
		if v, err := m.node.StoredCampaign(env); err == nil {
			m.do(func() { m.onCampaign(v) })
		}
		return nil
	})
	if vs, _, err := m.store.Values(m.opts.Trust); err == nil {
		for _, v := range vs {
			m.do(func() { m.onAttestation(v) })
		}
	} else {
		m.opts.Logf("mesh: reading the stored attestations: %v", err)
	}
	m.ledger.changed()
}

// startDuties starts the duties' goroutines: capacity, the network-document vote, and the
// certificate's and revocations' pollers.
func (m *Mesh) startDuties() {
	c := capacity{m.shared}
	m.wg.Add(1)
	go c.open()
	if m.opts.FreeCapacity != nil {
		m.wg.Add(1)
		go c.follow()
	}
	if m.opts.NetworkDoc != nil {
		m.wg.Add(1)
		go m.doc.watch() // netdoc.go
	}
	m.wg.Add(1)
	go certWatch{m.shared}.watch() // cert.go
	m.wg.Add(1)
	go revocationPoller{shared: m.shared, voided: m.voided, ledger: m.ledger}.watch() // revoke.go
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
	m.ledger.stopTimers()
	return m.ps.Close()
}

// Lab is the lab this node's certificate names; Runner the runner that runs its slots.
func (m *Mesh) Lab() string            { return m.lab }
func (m *Mesh) Runner() *runner.Runner { return m.opts.Runner }

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
				m.opts.Metrics.Claim("received", c.Kind)
				m.do(func() {
					m.doc.heard(c.PeerID, c.Lab) // netdoc.go
					m.apply(m.coord.Claim(c, m.opts.Now()))
				})
			case protocol.TopicAttestations:
				_, _ = m.store.Attestations().AddVerified([]vstore.Accepted{{Envelope: msg.Data, Value: msg.Value}}, vstore.SourceGossip, msg.From.String())
			case protocol.TopicCampaigns:
				_, _ = m.store.Campaigns().AddVerified([]vstore.Accepted{{Envelope: msg.Data, Value: msg.Value}}, vstore.SourceGossip, msg.From.String())
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
				m.opts.Logf("mesh: encode claim: %v", err)
				continue
			}
			if err := m.ps.Publish(m.ctx, protocol.TopicClaims, data); err != nil && m.ctx.Err() == nil {
				m.opts.Logf("mesh: publish claim %s: %v", c.Slot, err)
			} else if err == nil {
				m.opts.Metrics.Claim("sent", c.Kind)
			}
		}
	}
}

// apply carries out the coordinator's actions: publish, abort, re-announce, start, then
// re-score, witness and recompute. It decides nothing.
func (m *Mesh) apply(a protocol.CoordActions) {
	m.claimingStopped(a) // health.go
	for _, r := range a.SignRelease {
		m.records.signRelease(r) // claimrec.go
	}
	for _, c := range a.Publish {
		select {
		case m.publish <- c:
		default:
			// A full queue loses a claim message, which the protocol tolerates (claims are
			// soft state); blocking the loop would not.
			m.opts.Logf("mesh: claim queue full: dropped %s of %s", c.Kind, c.Slot)
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
			m.opts.Warnf("mesh: slot %s attempt %d: %s: giving the attempt up", g.SlotID, g.Attempt, g.Why)
			r.cancel(runner.ErrAborted) // the runner removes its tasks; the run ends as an infrastructure failure: released, and retried elsewhere if need be
		}
	}
	for _, ig := range a.Ignored {
		m.opts.Warnf("mesh: ignored from %s on slot %s: %s", ig.Peer, ig.Slot, ig.Why)
	}
	for _, dc := range a.Declined {
		m.opts.Logf("mesh: %s %s not taken: %s", dc.Input, dc.ID, dc.Why)
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
	for _, ar := range a.Audit {
		m.startAudit(ar) // audit.go
	}
	for _, id := range a.Witness {
		m.records.witness(id)
	}
	for _, id := range a.Handed {
		if mc := m.campaigns[id]; mc != nil {
			m.opts.Logf("mesh: campaign %s %q: %d slots", id, mc.v.Campaign.Title, len(mc.v.Campaign.Slots())-mc.refusedSlots())
		}
	}
	if a.RecomputeLedger {
		m.ledger.changed()
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

// onCampaign handles a campaign the store accepted (verified there, as of its creation
// time: verifyStoredCampaign): fetch its bundles (their metadata is a ledger input and a
// node runs only what it holds), then hand it to the claim machine. An expired campaign is
// prepared too (its runs still count; the coordinator claims nothing past the deadline).
func (m *Mesh) onCampaign(v *protocol.VerifiedCampaign) {
	if !CampaignTaken(v, m.opts.Trust, m.opts.Now()) {
		return
	}
	if !m.coord.CampaignHeard(v.ID) {
		return
	}
	go m.prepareCampaign(v, 0)
}

// prepareCampaign fetches a campaign's bundles and parses its agents, retrying while peers
// that hold the bundles are not reachable yet.
func (m *Mesh) prepareCampaign(v *protocol.VerifiedCampaign, try int) {
	mc := &meshCampaign{v: v, tasks: map[string]tasks.Meta{}, agents: v.Agents, sealed: map[string]bool{}}
	for _, t := range v.Campaign.Tasks {
		ctx, cancel := clock.WithTimeout(m.ctx, m.opts.Clock, m.opts.Timing.BundleFetch)
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
		m.opts.Logf("mesh: campaign %s: bundle %s: %v (retrying)", v.ID, t, err)
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
	mc.refuseByPolicy(m.opts.AgentPolicy, m.opts.Logf) // policy.go
	in := protocol.CoordinatorCampaign{Spec: protocol.CampaignSpec{ID: mc.v.ID, Created: c.Created, Deadline: c.Deadline},
		Lab: mc.v.Lab, Replication: c.Replication, Refused: map[string]bool{},
		Unrunnable: mc.unrunnable(context.WithoutCancel(m.ctx), m.opts.Runner, m.opts.Logf)} // runnable.go
	for a := range mc.refused {
		in.Refused[a] = true
	}
	for a, spec := range mc.agents {
		if spec.WantsNetwork() {
			if in.Unauditable == nil {
				in.Unauditable = map[string]bool{}
			}
			in.Unauditable[a] = true
		}
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
		m.opts.Logf("mesh: campaign %s %q: waiting for another lab to witness it before claiming its slots", mc.v.ID, c.Title)
	}
	m.apply(a)
}

// refusedSlots counts mc's slots of agents this node's policy refuses.
func (mc *meshCampaign) refusedSlots() int {
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
			m.opts.Metrics.RunEnded(m.coord.GivenUp(s.Slot.ID, ar.attempt, outcome), ar.aborted, ar.abortReason)
			if ar.abortReason != "" {
				m.opts.Logf("mesh: aborted run of slot %s (%s): its tasks are stopped and removed", s.Slot.ID, ar.abortReason)
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
		m.opts.Logf("mesh: run of slot %s failed (infrastructure): %v", s.Slot.ID, err)
		return protocol.RunOutcome{Kind: protocol.RunInfraFailed, Detail: err.Error()}
	}
	if spec == nil {
		return infra(fmt.Errorf("agent %s is not in campaign %s", s.Slot.Slot.Agent, s.Campaign))
	}
	if witness == "" && m.opts.Policy.RequireWitness {
		// This node's own witness of another lab's campaign is still being stored: a run
		// signed without one would not count (witness.go).
		var err error
		if witness, err = m.records.awaitWitness(ctx, s.Campaign); err != nil {
			return infra(err)
		}
	}
	if err := m.records.signClaimRecord(ctx, s, witness); err != nil {
		return infra(err)
	}
	dir, err := m.BundleDir(ctx, s.Slot.Slot.Task)
	if err != nil {
		return infra(err)
	}
	if err := m.node.EnsureAgentImage(ctx, spec); err != nil {
		return infra(err)
	}
	o, err := m.opts.Runner.Run(ctx, runner.Request{
		TaskDir: dir, TaskCID: s.Slot.Slot.Task, Agent: spec, Seed: s.Slot.Slot.Seed,
		Campaign: s.Campaign, Attempt: s.Attempt, Witness: witness,
	})
	if d, ok := sealedRunOutcome(err, m.opts.Logf); ok {
		return protocol.RunOutcome{Kind: protocol.RunAwaitingKey, Detail: d}
	}
	if err != nil {
		return infra(err)
	}
	if err := m.objects.ingestRun(ctx, o.Envelope); err != nil {
		return infra(err)
	}
	m.opts.Metrics.Signed(o.Predicate)
	if o.Valid || o.Predicate.ScoreAbsent {
		// An unscored run (runners without labels, sealed.go) is a result: its
		// scoring labs give its score.
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

// onAttestation records a run or re-score the store accepted.
func (m *Mesh) onAttestation(v *attest.Verified) {
	st, run, rs, env, id := v.Statement, v.Run, v.Rescore, v.Envelope, v.ID
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
		m.auditDraw(id, run) // audit.go
	case rs != nil:
		for _, r := range m.rescores[rs.Run] {
			if r.ID == id {
				return
			}
		}
		m.rescores[rs.Run] = append(m.rescores[rs.Run], rescoreRecord{ID: id, Node: rs.Node, Lab: rs.Lab, Metric: rs.Metric, Score: rs.Score, Valid: rs.Valid})
		m.apply(m.coord.Rescore(protocol.RescoreHeard{ID: id, Run: rs.Run, Node: rs.Node, Lab: rs.Lab, Metric: rs.Metric, Valid: rs.Valid, Score: rs.Score, Draw: rs.Draw}, now))
	default:
		if w := v.Witness; w != nil {
			a := m.coord.Witness(protocol.WitnessHeard{ID: id, Campaign: w.Campaign, Lab: w.Lab, Node: w.Node, Time: w.Time}, now)
			if slices.Contains(a.Handed, w.Campaign) {
				m.opts.Logf("mesh: campaign %s: witnessed by lab %s; claiming its slots", w.Campaign, w.Lab)
			}
			m.apply(a)
		} else if c := v.Claim; c != nil {
			m.apply(m.coord.ClaimRecord(claimRecordHeard(id, c), now)) // claimrec.go
		} else if au := v.Audit; au != nil {
			m.apply(m.coord.Audit(protocol.AuditHeard{ID: id, Run: au.Run, Lab: au.Lab, Verdict: au.Verdict}, now)) // audit.go
		}
	}
}

// ownRescoreDraw is this node's re-scorer draw for a run, with its key (the coordinator
// decides with it; attest.RescoreDraw computes it).
func ownRescoreDraw(key crypto.PrivKey) func(*attest.RunPredicate) (float64, error) {
	return func(run *attest.RunPredicate) (float64, error) {
		_, beta, err := attest.RescoreDraw(key, run)
		return attest.DrawFraction(beta), err
	}
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
		_, err := m.rescorer.rescore(m.ctx, &rec)
		if err != nil && m.ctx.Err() == nil {
			m.opts.Logf("mesh: re-score of %s: %v (retried later)", rec.ID, err)
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
	return m.rescorer.rescore(ctx, rec)
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
	for _, mc := range m.campaigns {
		cs = append(cs, LedgerCampaign(mc.v, mc.tasks, mc.agents))
	}
	return cs
}

// LedgerCampaign is campaign v as the ledger reads it: each task's name, metric and SOTA
// from its own bundle's metadata (metas, by bundle CID; a campaign lists CIDs only, so it
// cannot change them), and its agents' specs. The daemon and verify-ledger both build
// campaigns here, so their roots cannot drift apart over a copy. Callers hold every
// bundle's metadata first (a task not in metas is left out).
func LedgerCampaign(v *protocol.VerifiedCampaign, metas map[string]tasks.Meta, agents map[string]*agentspec.Spec) protocol.LedgerCampaign {
	lc := protocol.LedgerCampaign{ID: v.ID, Lab: v.Lab, LabName: v.LabName, Created: v.Campaign.Created, Deadline: v.Campaign.Deadline,
		Tasks: map[string]scoring.TaskInfo{}, Agents: map[string]string{}}
	for _, t := range v.Campaign.Tasks {
		if meta, ok := metas[t]; ok {
			lc.Tasks[t] = scoring.TaskInfo{Name: meta.Name, LowerIsBetter: meta.Metric.LowerIsBetter,
				Optimum: meta.Metric.OptimalScore, SOTA: meta.SOTA.Score, EstimatedWorst: meta.EstimatedWorstScore}
		}
	}
	for cid, spec := range agents {
		lc.AddAgent(cid, spec)
	}
	return lc
}

// Ledger returns the last computed ledger, or nil before the first.
func (m *Mesh) Ledger() *api.MeshLedger {
	return m.ledger.current()
}

// PublishCampaign stores a campaign envelope (verifying it) and gossips it; it returns the
// campaign ID.
func (m *Mesh) PublishCampaign(env []byte) (string, error) {
	if _, err := protocol.VerifyCampaign(env, m.opts.Trust, protocol.CampaignVerifyOptions{Now: m.opts.Now(), Network: m.opts.Network}); err != nil {
		return "", err
	}
	res, err := m.store.Campaigns().Add([][]byte{env}, vstore.SourceLocal, "")
	if err != nil {
		return "", err
	}
	if res[0].Status == vstore.StatusRefused {
		return "", fmt.Errorf("campaign refused: %s %s", res[0].Reason, res[0].Detail)
	}
	if res[0].Status == vstore.StatusKnown {
		// Already stored: gossip again for peers that missed it.
		m.gossip(protocol.TopicCampaigns, env)
	}
	return attest.EnvelopeID(env), nil
}

// CampaignTaken says whether a campaign verified as of its creation time is taken at now:
// not created in now's future (protocol.CampaignNotYetValid there), and its lab not retired
// by now (what was run for it before still counts: the ledger reads the stored campaign;
// nothing more is claimed).
func CampaignTaken(v *protocol.VerifiedCampaign, trust *attest.TrustStore, now time.Time) bool {
	if v.Campaign.Created.After(now.Add(protocol.CampaignClockSkew)) {
		return false
	}
	r, retired := trust.LabRetired(v.Lab)
	return !retired || now.Before(r)
}

// ImportLocal puts the run attestations this node's runner left in HOME/attestations (and
// the objects they name) into the store, which gossips the new ones: at start, and after
// the runs a killed daemon left behind have been recovered and attested. It returns how
// many were new.
func (m *Mesh) ImportLocal(ctx context.Context) (int, error) {
	files, refused, err := attest.ReadEnvelopeDir(m.opts.Home.AttestationsDir())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	for _, r := range refused {
		m.opts.Logf("mesh: %s", r)
	}
	before := m.store.Attestations().Len()
	for _, f := range files {
		if err := m.objects.ingestRun(ctx, f.Data); err != nil {
			m.opts.Logf("mesh: import %s: %v", f.Name, err)
		}
	}
	return m.store.Attestations().Len() - before, nil
}

// ClaimingIdle says whether the claim machine has its capacity (open) and this node holds
// no claim and runs nothing (idle), as the loop sees it now.
func (m *Mesh) ClaimingIdle(ctx context.Context) (open, idle bool, err error) {
	err = m.query(ctx, func() { open, idle = m.coord.Open(), len(m.coord.Held()) == 0 && len(m.running) == 0 })
	return open, idle, err
}

// ClaimToStart returns the claim→start time of every run this node started.
func (m *Mesh) ClaimToStart(ctx context.Context) ([]time.Duration, error) {
	var out []time.Duration
	err := m.query(ctx, func() { out = m.coord.ClaimToStart() })
	return out, err
}

// BundleDir returns the unpacked bundle of a task CID under HOME/bundles, fetching it from
// peers first if this node does not have it (one fetch per CID at a time).
func (m *Mesh) BundleDir(ctx context.Context, cs string) (string, error) {
	return m.objects.bundleDir(ctx, cs)
}

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
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// The mesh is the daemon's part in a network (docs/design.md, "the daemon's main loop"):
// campaigns in, claims out, runs on this node's capacity, attestations and re-scores
// gossiped, the ledger recomputed from the verified store. The decisions are made in
// protocol (the claim machine, the re-scorer order), runner (runs and re-scores) and
// attest/scoring (the ledger); this file only carries them out.
//
// Concurrency: one goroutine, the loop, owns the claim machine and every table below it;
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
	// FreeCapacity, when set, is re-read every CapacityEvery (default 5 s) once claiming has
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
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// defaultHeadsInterval is MeshOptions.HeadsInterval's default.
const defaultHeadsInterval = 5 * time.Second

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

	// Owned by the loop goroutine.
	cm        *protocol.ClaimMachine
	campaigns map[string]*meshCampaign
	slots     map[string]slotRef // slot ID -> where it is
	running   map[string]*activeRun
	runs      map[string]*runRecord // run attestation ID -> record
	bySlot    map[string][]string   // slot ID -> run attestation IDs, in arrival order
	rescores  map[string][]rescoreRecord
	rescoring map[string]bool      // run IDs this node is re-scoring now
	labPeers  map[string]time.Time // nodes of our lab heard from, for the re-score split
	labs      []string             // the trusted labs' IDs, sorted: the re-scorer order's members
	pending   map[string]bool      // campaigns whose bundles are being fetched
	// early: claims heard for a pending campaign, replayed once it is added, so a node that
	// was still fetching the bundles does not claim slots it heard others hold.
	early   map[string][]*protocol.ClaimMessage
	clock   claimClock // claim→start per run (mesh_claimclock.go)
	capOpen bool       // openCapacity has given the claim machine its capacity
	// peerLab: the lab of each peer whose claims passed the validator (its node certificate
	// checked against the trust store): the only peers whose heads vote on the network
	// document (mesh_netdoc.go). docHalt: a majority of the labs announce another document,
	// so this node claims nothing.
	peerLab map[string]string
	docHalt bool
	// health: this node's own consecutive run failures; claiming stops at its limit
	// (mesh_health.go).
	health infraStreak
	// awaitingKey: slot IDs whose run here waits for a sealed bundle's key, to the attempt
	// that run signed (mesh_sealed.go).
	awaitingKey map[string]int
	wake        *time.Timer

	bundleMu sync.Mutex
	bundles  map[string]*sync.Mutex // per-CID fetch lock

	grants *grantIndex // sealed bundles' key grants (mesh_sealed.go)

	// witnesses: the witness records held, by campaign; witnessed: the campaigns this node
	// has signed one of (mesh_witness.go).
	witnesses map[string][]witnessRef
	witnessed map[string]bool

	ledgerMu    sync.Mutex
	ledgerDirty bool
	ledgerTimer *time.Timer
	ledger      *MeshLedger
	ledgerCount int // computations, for tests
}

type meshCampaign struct {
	v      *protocol.VerifiedCampaign
	spec   protocol.CampaignSpec // its slots, as handed to the claim machine
	tasks  map[string]tasks.Meta // bundle CID -> metadata (after fetching it)
	agents map[string]*agentspec.Spec
	added  bool // handed to the claim machine
	// refused: agent CID -> why this node's policy will not run it (mesh_policy.go).
	refused map[string]string
	// noKey: sealed bundles of the campaign whose key this node cannot open yet; their
	// slots are left to key holders first (protocol.SlotSpec.NoKey, mesh_sealed.go).
	noKey map[string]bool
	// awaitingWitness: this node's lab's campaign, held back from the claim machine until
	// another lab witnesses it (mesh_witness.go).
	awaitingWitness bool
}

type slotRef struct {
	campaign string
	slot     attest.Slot
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
	if opts.Capacity <= 0 {
		opts.Capacity = 1
	}
	if opts.RescoreTimeout <= 0 {
		opts.RescoreTimeout = 2 * time.Minute
	}
	if opts.LedgerDebounce <= 0 {
		opts.LedgerDebounce = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HeadsInterval <= 0 {
		opts.HeadsInterval = defaultHeadsInterval
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = 30 * time.Second
	}
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
		campaigns: map[string]*meshCampaign{}, slots: map[string]slotRef{}, running: map[string]*activeRun{},
		runs: map[string]*runRecord{}, bySlot: map[string][]string{}, rescores: map[string][]rescoreRecord{},
		rescoring: map[string]bool{}, labPeers: map[string]time.Time{}, pending: map[string]bool{}, early: map[string][]*protocol.ClaimMessage{},
		bundles: map[string]*sync.Mutex{}, awaitingKey: awaitingKeySlots(opts.Runner, n.opts.Logf),
		witnesses: map[string][]witnessRef{}, witnessed: map[string]bool{},
		peerLab: map[string]string{}, health: infraStreak{limit: opts.MaxInfraStreak},
	}

	cc := opts.Claims
	// No capacity until the store is replayed and one reconciliation has run (or a grace
	// period passed): a restarted node must learn what finished while it was away before it
	// claims anything (docs/protocol-claims.md, "restarts").
	cc.Self, cc.Lab, cc.Cert, cc.Capacity = m.self, cert.Lab, cert.Raw(), 0
	cc.CertNotAfter = cert.NotAfter    // claims only what it can sign (protocol/claim_cert.go)
	m.labs = trustedLabIDs(opts.Trust) // the trust store is fixed for the mesh's life
	if cc.Labs == 0 {
		cc.Labs = len(m.labs) // a slot fails on failures of this many labs at most
	}
	m.cm = protocol.NewClaimMachine(cc)
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
	m.wake = time.NewTimer(time.Hour)
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
	const grace = 3 * time.Second
	deadline := time.Now().Add(grace)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if peers := m.n.host.Network().Peers(); len(peers) > 0 || !time.Now().Before(deadline) {
			if sy := m.n.Syncer(); sy != nil && len(peers) > 0 {
				ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
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
		case <-t.C:
		}
	}
	m.do(func() {
		now := m.opts.Now()
		m.clock.reset(m.opts.Capacity, now)
		m.capOpen = true
		m.apply(m.cm.SetCapacity(m.claimCapacity(), now))
	})
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
		m.apply(m.cm.Shutdown(m.opts.Now()))
		close(done)
	}) {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
	}
	// Let the releases go out before leaving the topics.
	deadline := time.Now().Add(time.Second)
	for len(m.publish) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
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
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	headsTick := time.NewTicker(m.opts.HeadsInterval)
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
		case <-m.wake.C:
			m.apply(m.cm.Tick(m.opts.Now()))
		case <-tick.C:
			now := m.opts.Now()
			m.apply(m.cm.Tick(now))
			m.rescoreDuties(now)
		case <-headsTick.C:
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
					if c.Lab == m.lab {
						m.labPeers[c.PeerID] = m.opts.Now()
					}
					if len(m.peerLab) < maxVotingPeers || m.peerLab[c.PeerID] != "" {
						m.peerLab[c.PeerID] = c.Lab
					}
					if m.pending[c.Campaign] {
						if len(m.early[c.Campaign]) < maxEarlyClaims {
							m.early[c.Campaign] = append(m.early[c.Campaign], c)
						}
						return
					}
					m.apply(m.cm.Receive(c, m.opts.Now()))
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
				m.do(func() {
					if h.Lab == m.lab {
						m.labPeers[h.PeerID] = m.opts.Now()
					}
				})
			}
		}
	}
}

// publisher sends the claim machine's messages in order, off the loop.
func (m *Mesh) publisher() {
	defer m.wg.Done()
	// Start from the clock so a restarted node's messages never repeat earlier bytes.
	seq := uint64(time.Now().UnixNano())
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

// apply carries out the claim machine's actions: publish, abort, start (in that order).
func (m *Mesh) apply(a protocol.Actions) {
	m.clock.observe(m.cm.Held(), a, m.cm.FreeSince, m.opts.Now())
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
			m.clock.unitFreed(m.opts.Now())
			if ab.Reason == protocol.AbortFinishedElsewhere && m.signedHere(ab.SlotID, r.attempt) {
				// This run's own attestation finished the slot before the run's goroutine
				// reported back: there was nothing left to cut short.
				continue
			}
			r.abortReason = string(ab.Reason)
		}
	}
	for _, ig := range a.Ignored {
		m.n.opts.Warnf("mesh: ignored from %s on slot %s: %s", ig.Peer, ig.Slot, ig.Why)
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
	if !a.Wake.IsZero() {
		d := a.Wake.Sub(now)
		if d < 0 {
			d = 0
		}
		if !m.wake.Stop() {
			select {
			case <-m.wake.C:
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
	if _, ok := m.campaigns[v.ID]; ok || m.pending[v.ID] {
		return
	}
	m.pending[v.ID] = true
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
	mc := &meshCampaign{v: v, tasks: map[string]tasks.Meta{}, agents: map[string]*agentspec.Spec{}, noKey: map[string]bool{}}
	for _, a := range v.Campaign.Agents {
		spec, err := agentspec.Parse(a.Spec)
		if err != nil {
			m.n.opts.Logf("mesh: campaign %s: agent %s: %v", v.ID, a.CID, err)
			return
		}
		mc.agents[a.CID] = spec
	}
	for _, t := range v.Campaign.Tasks {
		ctx, cancel := context.WithTimeout(m.ctx, 2*time.Minute)
		dir, err := m.BundleDir(ctx, t)
		cancel()
		if err == nil {
			var meta *tasks.Meta
			if meta, err = tasks.LoadMeta(dir); err == nil {
				mc.tasks[t] = *meta
				if tasks.IsSealed(dir) {
					mc.noKey[t] = true // until addCampaign finds the key
				}
				continue
			}
		}
		if m.ctx.Err() != nil {
			return
		}
		m.n.opts.Logf("mesh: campaign %s: bundle %s: %v (retrying)", v.ID, t, err)
		delay := min(time.Duration(1<<min(try, 5))*time.Second, 30*time.Second)
		select {
		case <-m.ctx.Done():
		case <-time.After(delay):
			go m.prepareCampaign(v, try+1)
		}
		return
	}
	m.do(func() { m.addCampaign(mc) })
}

// maxEarlyClaims bounds the claims kept for one campaign being prepared: a few per slot of a
// large campaign; past it the rest are dropped, as they were before any were kept (the
// settle and the tie-break still resolve what is missed).
const maxEarlyClaims = 1 << 16

func (m *Mesh) addCampaign(mc *meshCampaign) {
	c := mc.v.Campaign
	m.campaigns[mc.v.ID] = mc
	spec := protocol.CampaignSpec{ID: mc.v.ID, Created: c.Created, Deadline: c.Deadline}
	m.refuseByPolicy(mc)
	cannot := m.unrunnable(mc) // mesh_runnable.go
	// Checked here, on the loop: a grant that keyArrived handled before this campaign was
	// added found nothing to lift, so this is where it counts.
	for t := range mc.noKey {
		if m.opts.Runner.HoldsKey(t) {
			delete(mc.noKey, t)
		}
	}
	for _, s := range c.Slots() {
		id := protocol.SlotID(s)
		m.slots[id] = slotRef{campaign: mc.v.ID, slot: s}
		if _, no := mc.refused[s.Agent]; no || cannot[id] != "" {
			continue // never claimed here
		}
		limit := time.Duration(0)
		if meta, ok := mc.tasks[s.Task]; ok && meta.Limits.WallClockSeconds > 0 {
			// The runner enforces the task's own limit; the claim's hard limit adds the
			// time to fetch, evaluate and sign.
			limit = time.Duration(meta.Limits.WallClockSeconds)*time.Second + 5*time.Minute
		}
		spec.Slots = append(spec.Slots, protocol.SlotSpec{ID: id, Slot: s, HardLimit: limit, AwaitingKey: m.awaitingKey[id] > 0, AwaitingKeyAttempt: m.awaitingKey[id], NoKey: mc.noKey[s.Task]})
	}
	mc.spec = spec
	if m.opts.Policy.RequireWitness && mc.v.Lab != m.lab {
		m.witness(mc)
	}
	if m.needsWitness(mc) {
		// Runs signed before another lab has seen the campaign would not count: claim
		// nothing until a witness comes (the claims heard meanwhile are kept, as while the
		// bundles were fetched).
		mc.awaitingWitness = true
		m.n.opts.Logf("mesh: campaign %s %q: waiting for another lab to witness it before claiming its slots", mc.v.ID, c.Title)
		m.ledgerChanged()
		return
	}
	m.handToMachine(mc)
}

// handToMachine gives a prepared campaign's slots to the claim machine.
func (m *Mesh) handToMachine(mc *meshCampaign) {
	delete(m.pending, mc.v.ID)
	mc.awaitingWitness = false
	spec := mc.spec
	mc.added = true
	now := m.opts.Now()
	m.apply(m.cm.AddCampaign(spec, now))
	// The claims heard while the bundles were fetched, before any claim made just now can
	// settle: a pending claim of ours yields to a live or earlier one among them.
	for _, c := range m.early[mc.v.ID] {
		m.apply(m.cm.Receive(c, now))
	}
	delete(m.early, mc.v.ID)
	// Runs that arrived before the campaign finish their slots now.
	for id, refs := range m.bySlot {
		if _, ok := m.slots[id]; ok && slices.ContainsFunc(refs, func(r string) bool { return m.finishesSlot(m.runs[r]) }) {
			m.apply(m.cm.SlotFinished(id, "", now)) // heard before the campaign: no claim could be
		}
	}
	m.n.opts.Logf("mesh: campaign %s %q: %d slots", mc.v.ID, mc.v.Campaign.Title, len(spec.Slots))
	m.ledgerChanged()
}

// startRun starts a run the claim machine asked for, on its own goroutine.
func (m *Mesh) startRun(s protocol.StartRun, now time.Time) {
	mc := m.campaigns[s.Campaign]
	if mc == nil {
		m.apply(m.cm.RunEnded(s.Slot.ID, protocol.RunOutcome{Kind: protocol.RunInfraFailed, Detail: "campaign unknown"}, now))
		return
	}
	m.clock.started(s.Slot.ID, now)
	ctx, cancel := context.WithCancelCause(m.ctx)
	ar := &activeRun{cancel: cancel, attempt: s.Attempt}
	m.running[s.Slot.ID] = ar
	m.apply(m.cm.RunStarted(s.Slot.ID, now))
	spec := mc.agents[s.Slot.Slot.Agent]
	witness := m.witnessFor(s.Campaign)
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
			if outcome.Kind == protocol.RunAwaitingKey {
				m.awaitingKey[s.Slot.ID] = ar.attempt
			}
			m.clock.unitFreed(m.opts.Now())
			m.apply(m.cm.RunEnded(s.Slot.ID, outcome, m.opts.Now()))
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
	dir := filepath.Join(m.n.home.BundlesDir(), c.String())
	m.bundleMu.Lock()
	mu := m.bundles[c.String()]
	if mu == nil {
		mu = &sync.Mutex{}
		m.bundles[c.String()] = mu
	}
	m.bundleMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
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
	if err := m.n.Get(ctx, c, target, GetOptions{}); err != nil {
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
		if _, ok := m.slots[slotID]; ok && m.finishesSlot(m.runs[id]) {
			m.apply(m.cm.SlotFinished(slotID, run.Node, now))
		}
		m.rescoreDuty(m.runs[id], now)
	case rs != nil:
		for _, r := range m.rescores[rs.Run] {
			if r.ID == id {
				return
			}
		}
		m.rescores[rs.Run] = append(m.rescores[rs.Run], rescoreRecord{ID: id, Node: rs.Node, Lab: rs.Lab, Metric: rs.Metric, Score: rs.Score, Valid: rs.Valid})
		if r, ok := m.runs[rs.Run]; ok {
			m.rescoreDuty(r, now) // a contradiction may bring this lab in (protocol.EscalatedReplication)
		}
	default:
		if w := witnessOf(st, e.Payload); w != nil {
			m.onWitness(id, w)
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

func (m *Mesh) rescoreDuties(now time.Time) {
	for _, r := range m.runs {
		m.rescoreDuty(r, now)
	}
}

// rescoreDuty starts a re-score of run when this node's lab is among the labs due to
// re-score it (protocol.RescorersDue) and this node is the one of its lab that does it.
func (m *Mesh) rescoreDuty(r *runRecord, now time.Time) {
	if r.Lab == m.lab || m.rescoring[r.ID] {
		return
	}
	ref, ok := m.slots[r.SlotID]
	if !ok {
		return
	}
	done := map[string]bool{}
	against := map[string]bool{}
	runP := &attest.RunPredicate{Metric: r.Metric, Valid: r.Valid, Score: r.Score}
	for _, rs := range m.rescores[r.ID] {
		done[rs.Lab] = true
		if rs.Lab != r.Lab && !attest.Confirms(runP, &attest.RescorePredicate{Metric: rs.Metric, Valid: rs.Valid, Score: rs.Score}, attest.Agree) {
			against[rs.Lab] = true
		}
	}
	replication := protocol.EscalatedReplication(m.campaigns[ref.campaign].v.Campaign.Replication, len(against))
	if replication <= 0 {
		return
	}
	if done[m.lab] {
		return
	}
	due := protocol.RescorersDue(r.ID, r.Lab, m.labs, replication, done, now.Sub(r.FirstSeen), m.opts.RescoreTimeout)
	if !slices.Contains(due, m.lab) || !m.designated(r.ID, now) {
		return
	}
	m.rescoring[r.ID] = true
	rec := *r
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		_, err := m.rescore(m.ctx, &rec)
		if err != nil && m.ctx.Err() == nil {
			m.n.opts.Logf("mesh: re-score of %s: %v (retried later)", rec.ID, err)
		}
		m.do(func() { delete(m.rescoring, rec.ID) })
	}()
}

// designated says whether this node is the one of its lab that re-scores runID: the first
// in rendezvous order among the lab's nodes heard from recently, so a lab of many nodes
// re-scores each run once.
func (m *Mesh) designated(runID string, now time.Time) bool {
	best, bestScore := m.self, protocol.RendezvousScore(runID, m.self)
	lease := m.cm.Config().Lease
	for p, seen := range m.labPeers {
		if p == m.self || now.Sub(seen) > 2*lease {
			continue
		}
		if s := protocol.RendezvousScore(runID, p); s > bestScore || (s == bestScore && p < best) {
			best, bestScore = p, s
		}
	}
	return best == m.self
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
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
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
		m.ledgerTimer = time.AfterFunc(m.opts.LedgerDebounce, m.computeLedger)
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
		began := time.Now()
		l, rep, err := m.store.Ledger(in)
		m.n.metrics.ledgerSeconds.Observe(time.Since(began).Seconds())
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
		m.ledgerTimer = time.AfterFunc(m.opts.LedgerDebounce, m.computeLedger)
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
	err := m.query(ctx, func() { out = slices.Clone(m.clock.samples) })
	return out, err
}

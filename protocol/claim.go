package protocol

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// SlotSpec is one slot of a campaign as the claim machine sees it.
type SlotSpec struct {
	// ID names the slot in claim messages; unique across campaigns (it is derived from
	// the campaign ID).
	ID   string
	Slot attest.Slot
	// HardLimit is the task's wall-clock limit plus grace: a run of the slot still going
	// after it is aborted by its holder, and other nodes stop honouring the claim however
	// often it is renewed.
	HardLimit time.Duration
	// AwaitingKey: this node already ran the slot and its run waits for the key of the
	// sealed bundle (a restart after RunAwaitingKey): the node never claims the slot, and
	// Status counts it awaiting a key until a result is known.
	AwaitingKey bool
	// AwaitingKeyAttempt is the attempt that waiting run signed (0: not known). With
	// AwaitingKey, the machine publishes that run's awaiting-key release again when the
	// campaign is added, and at each heartbeat for a lease and one heartbeat more, as
	// after RunAwaitingKey: the node may have gone down before any copy reached the others,
	// who then see its claim lapse and count an infrastructure failure that only such a
	// copy takes back.
	AwaitingKeyAttempt int
	// NoKey: the slot's task bundle is sealed and this node's lab could not open its key
	// when the campaign was added. The node leaves the slot to key holders, who can score
	// it at once, for ClaimConfig.KeyHolderHeadStart after it is free, and then claims it
	// only when it has nothing else to do (its run would wait for a grant). KeyArrived
	// lifts it.
	NoKey bool
	// RecordedAttempt is the highest attempt a claim record heard before the campaign was
	// added names (Coordinator.ClaimRecord): the first claim of the slot takes a later one,
	// as after AttemptClaimed.
	RecordedAttempt int
}

// CampaignSpec is what the claim machine needs of a verified campaign.
type CampaignSpec struct {
	ID                string
	Created, Deadline time.Time
	Slots             []SlotSpec
}

// Defaults of ClaimConfig; docs/protocol-claims.md gives the simulator runs behind them.
const (
	DefaultLease            = 10 * time.Minute
	DefaultHeartbeat        = DefaultLease / 3
	DefaultSettle           = 300 * time.Millisecond
	DefaultMaxInfraAttempts = 3
	// DefaultDeadAfter: see ClaimConfig.DeadAfter; the simulator runs behind it are in
	// docs/protocol-claims.md ("Dead holders").
	DefaultDeadAfter = 2 * time.Minute
	// DefaultCertMargin: see ClaimConfig.CertNotAfter.
	DefaultCertMargin = 10 * time.Minute
	// DefaultHardLimit applies to a slot whose SlotSpec.HardLimit is 0.
	DefaultHardLimit = 24 * time.Hour
)

// ClaimConfig configures a node's claim machine.
type ClaimConfig struct {
	// Self is the node's peer ID, Lab its lab ID, Cert its node certificate envelope
	// (copied into every message it publishes).
	Self, Lab string
	Cert      json.RawMessage
	// Lease is how long others hold a slot for this node after each claim or renew
	// (DefaultLease). Heartbeat is how often a live run's claim is renewed and
	// re-announced (DefaultHeartbeat); it must be well under Lease, so that one or two
	// lost renews do not lapse a live claim.
	Lease, Heartbeat time.Duration
	// Settle is how long a claim waits for a conflicting claim that beats it before its
	// run starts (DefaultSettle): a few message delays. Longer settles cost claim→start
	// latency on every run; shorter ones cost duplicate runs when messages are slow.
	Settle time.Duration
	// MaxInfraAttempts caps the attempts of a slot (DefaultMaxInfraAttempts): after that
	// many runs ended by infrastructure failures (crash, hung past the hard limit, executor
	// error), on that many distinct labs (see Labs), nobody claims it again and Status
	// counts it failed.
	MaxInfraAttempts int
	// Labs is how many labs the network has (0: unknown). A slot is failed only when its
	// infrastructure failures come from MaxInfraAttempts distinct labs, or from all Labs
	// when fewer; a lab whose nodes failed it MaxInfraAttempts times claims it no more.
	Labs int
	// CertNotAfter is when this node's certificate expires (zero: not checked). The node
	// claims a slot only while the certificate outlasts the slot's hard limit plus
	// CertMargin (default DefaultCertMargin): a run signed under an expired certificate
	// counts nowhere, and the preflight that refuses it costs the slot an attempt
	// (claim_cert.go). SetCertificate takes a renewed one.
	CertNotAfter time.Time
	CertMargin   time.Duration
	// DeadAfter: a running claim whose node has not been heard for DeadAfter (no claim
	// message of any slot, no PeerSeen), while other nodes were heard well after it fell
	// silent, lapses then instead of at its lease's end (claim_dead.go). Default
	// DefaultDeadAfter; negative: only the lease.
	DeadAfter time.Duration
	// KeyHolderHeadStart is how long a free SlotSpec.NoKey slot is left to nodes that hold
	// its key before this node claims it (default: Lease). A key holder that is up and has
	// room claims a free slot within a settle, so a lease's wait costs a keyless node little
	// when none is, and saves it a run whose result it cannot score when one is.
	KeyHolderHeadStart time.Duration
	// Capacity is how many runs the node can hold at once (SetCapacity changes it).
	Capacity int
}

func (c ClaimConfig) withDefaults() ClaimConfig {
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = c.Lease / 3
	}
	if c.Settle <= 0 {
		c.Settle = DefaultSettle
	}
	if c.MaxInfraAttempts <= 0 {
		c.MaxInfraAttempts = DefaultMaxInfraAttempts
	}
	if c.KeyHolderHeadStart <= 0 {
		c.KeyHolderHeadStart = c.Lease
	}
	if c.CertMargin <= 0 {
		c.CertMargin = DefaultCertMargin
	}
	switch {
	case c.DeadAfter == 0:
		c.DeadAfter = DefaultDeadAfter
	case c.DeadAfter < 0:
		c.DeadAfter = 0
	}
	return c
}

// StartRun asks the caller to start a run of Slot, signing Attempt into its attestation.
type StartRun struct {
	Campaign string
	Slot     SlotSpec
	Attempt  int
}

// Reasons of AbortRun.
const (
	AbortHardLimit         = "hard_limit"         // ran past SlotSpec.HardLimit
	AbortCampaignDeadline  = "campaign_deadline"  // the campaign closed: the run could not count
	AbortFinishedElsewhere = "finished_elsewhere" // another node's valid run is known
	AbortShutdown          = "shutdown"
)

// AbortRun asks the caller to stop a run it started; the machine already considers it over
// (the caller need not call RunEnded for it).
type AbortRun struct {
	Campaign string
	SlotID   string
	Attempt  int
	Reason   string
}

// Actions is what one input asks the caller to do, in order: abort the runs, publish the
// messages on the claims topic, re-publish the run attestations, then start the runs. Wake,
// when not zero, is when the machine next needs a Tick: never later than the next time a
// Tick would change something, sometimes earlier (a Tick that changes nothing is cheap). The
// latest Actions' Wake replaces earlier ones.
type Actions struct {
	Publish []ClaimMessage
	Start   []StartRun
	Abort   []AbortRun
	// Reannounce lists slots whose run attestation, produced by this node, should be
	// published again on the attestations topic: another node claimed the slot, so it has
	// not heard that it is finished.
	Reannounce []string
	// Ignored lists messages and results the machine refused to act on because their sender
	// had no standing for them (docs/protocol-claims.md rules 6 and 7): the daemon logs each,
	// since a node sending them is broken or dishonest.
	Ignored []Ignored
	Wake    time.Time
}

// Ignored is one message or result the machine did not act on, and why.
type Ignored struct {
	Slot string
	Peer string
	Why  string
}

// RunOutcomeKind says how a run ended.
type RunOutcomeKind int

const (
	// RunValid: the run produced a result (its attestation is being published).
	RunValid RunOutcomeKind = iota + 1
	// RunAgentFailed: the agent lost (crashed, timed out, wrote nothing valid): a valid
	// result scored as failed, never retried.
	RunAgentFailed
	// RunInfraFailed: the node, not the agent, failed (executor error, lost GPU, fetch
	// failed): the slot is freed for another node, up to MaxInfraAttempts.
	RunInfraFailed
	// RunAwaitingKey: the agent ran, but the bundle is sealed and this node's lab holds no
	// grant of its key, so the submission waits here to be scored. The slot is released
	// (ReleaseAwaitingKey) for a node that can score it now, without consuming the attempt
	// (the run may yet produce the result), and this node does not claim it again: a
	// second run here would wait for the same key.
	RunAwaitingKey
	// RunGivenUp: another node holds the run's attempt by the signed claim records
	// (Coordinator.RunEnded turns such an infrastructure failure into this): the attempt is
	// the holder's, not a failure here, so it counts towards no retry cap — the ledger
	// charges it to the holder's lab if the holder never answers it — and the slot is freed
	// for the next attempt (ReleaseStale: peers count no failure either). A lab that takes
	// attempts it outranks by claiming them, and never runs them, cannot so fail a slot.
	RunGivenUp
)

// RunOutcome is how a run ended, with a detail for logs.
type RunOutcome struct {
	Kind   RunOutcomeKind
	Detail string
}

// CampaignStatus counts a campaign's slots as this node sees them (`campaign status`).
type CampaignStatus struct {
	Campaign  string `json:"campaign"`
	Slots     int    `json:"slots"`
	Unclaimed int    `json:"unclaimed"`
	Claimed   int    `json:"claimed"` // held by a live claim not yet known to be running
	Running   int    `json:"running"` // held by a live renewed claim (ours or another node's)
	Done      int    `json:"done"`    // a run attestation is known (valid or agent-failed)
	Failed    int    `json:"failed"`  // attempts exhausted by infrastructure failures
	// AwaitingKey: free slots whose run (here or elsewhere) waits for a sealed bundle's key.
	AwaitingKey int  `json:"awaiting_key"`
	Closed      bool `json:"closed"` // the deadline has passed: nobody claims any more
	// Withdrawn: this node claims none of the campaign's slots any more: the caps at
	// admission refused it after it was added (ClaimMachine.WithdrawCampaign).
	Withdrawn bool `json:"withdrawn,omitempty"`
	// NotHere counts the campaign's slots this node never runs, outside Slots: its lab
	// scores their task (ledger.scorers), its policy refuses their agent, or it cannot run
	// them. Other labs' runs of them reach the ledger all the same.
	NotHere int `json:"not_here,omitempty"`
}

type claimPhase int

const (
	phasePending claimPhase = iota // claimed, settling
	phaseRunning                   // Start emitted
)

// claimRef is a claim as its tie-break sees it.
type claimRef struct {
	peer    string
	lab     string
	lamport uint64
	attempt int
	running bool
	slot    string // for the hash, computed only when a tie needs it
}

// hash is RendezvousScore(slot, peer), the second key of the tie-break.
func (a claimRef) hash() uint64 { return RendezvousScore(a.slot, a.peer) }

// beats is the deterministic tie-break of DESIGN §6, extended by one rule: a claim whose run
// is live (renewed) beats one still settling, so a node that missed a claim and claims the
// slot later yields to the live run instead of starting a duplicate. Otherwise the earlier
// Lamport time wins, then the smaller hash, then the smaller peer ID.
func (a claimRef) beats(b claimRef) bool {
	if a.running != b.running {
		return a.running
	}
	if a.lamport != b.lamport {
		return a.lamport < b.lamport
	}
	if ha, hb := a.hash(), b.hash(); ha != hb {
		return ha < hb
	}
	return a.peer < b.peer
}

func (a claimRef) same(b claimRef) bool { return a.peer == b.peer && a.lamport == b.lamport }

// remoteClaim is another node's claim as this node holds it.
type remoteClaim struct {
	claimRef
	firstSeen time.Time
	expires   time.Time
}

// myClaim is this node's claim.
type myClaim struct {
	claimRef
	phase     claimPhase
	settleAt  time.Time
	startedAt time.Time
	nextRenew time.Time
}

type slotState struct {
	spec     *SlotSpec // read-only
	camp     *campaignState
	score    uint64 // RendezvousScore(slot, self): this node's preference
	finished bool
	// maxAttempt is the highest attempt number seen in any claim of the slot: a new claim
	// takes the next, so a retry, or a second run after a lapse, signs a new attempt.
	maxAttempt int
	// failedAttempts are the attempts known to have ended by an infrastructure failure (a
	// release with reason infra, a live run whose claim lapsed, our own), with the lab of
	// the node that ran each (failedLabs[i]). The slot is failed once MaxInfraAttempts of
	// them came from that many distinct labs (failed): one lab's broken node must not use
	// up a slot for the network.
	failedAttempts []int
	failedLabs     []string
	// touched: a claim for the slot was seen or made at some time. Untouched slots are
	// tried before lapsed or released ones, whose holder may be alive behind a partition.
	touched    bool
	holder     *remoteClaim
	mine       *myClaim
	avoidUntil time.Time // after our own infrastructure failure: let another node retry first
	freeSince  time.Time // when the campaign was added, or a claim last lapsed or was dropped
	ranResult  bool      // this machine's run produced the slot's result
	// declined: this node ran the slot and its run waits for a key; it never claims it.
	declined bool
	// barred: labs whose nodes never claim the slot again (ReopenSlot, coordinator_revoke.go).
	barred []string
	// awaitingKey: a run of the slot (this node's or, by its release, another's) waits for
	// a key, so its result may still come although nobody holds the slot.
	awaitingKey bool
	// noKey: SlotSpec.NoKey until KeyArrived. The slot is never in the untouched-first
	// scan; it waits in freed, where pick gives key holders a head start.
	noKey bool
	// lapsedBy: the claimer of each attempt counted failed because its live claim lapsed.
	lapsedBy map[int]string
	// heard: the (attempt, peer) of the renews heard for the slot (runs that were live), at
	// most maxHeard of them. With the holder, they are the nodes with standing on the slot:
	// only they can release an attempt as failed or cut a live run of it short.
	heard []heardClaim
}

type heardClaim struct {
	attempt int
	peer    string
}

// maxHeard bounds the claims remembered per slot: a slot rarely sees more than a few, and a
// flood of claims must not grow a node's memory per slot without bound.
const maxHeard = 16

func (s *slotState) hear(attempt int, peer string) {
	h := heardClaim{attempt, peer}
	if !slices.Contains(s.heard, h) && len(s.heard) < maxHeard {
		s.heard = append(s.heard, h)
	}
}

// standing reports whether peer holds the slot here or was heard running it: for attempt,
// or for any attempt when attempt is 0. A node that claimed and yielded has none.
func (s *slotState) standing(peer string, attempt int) bool {
	if h := s.holder; h != nil && h.peer == peer && (attempt == 0 || h.attempt == attempt) {
		return true
	}
	return slices.ContainsFunc(s.heard, func(h heardClaim) bool {
		return h.peer == peer && (attempt == 0 || h.attempt == attempt)
	})
}

// repeatedRelease is this node's awaiting-key release of a slot, published again at `at`
// until `left` more copies are out. Kept beside the slots, not in slotState: a node tracks
// every slot of every campaign, and few ever have one.
type repeatedRelease struct {
	slot *slotState
	msg  ClaimMessage
	at   time.Time
	left int
}

func (s *slotState) hardLimit() time.Duration {
	if s.spec.HardLimit <= 0 {
		return DefaultHardLimit
	}
	return s.spec.HardLimit
}

// failed reports whether the slot is failed for the network: at least cap infrastructure
// failures, on at least cap distinct labs, or on every lab of the network when it has
// fewer (labs, 0: unknown). A lab's own repeated failures count once.
func (s *slotState) failed(cap, labs int) bool {
	if s.finished || len(s.failedAttempts) < cap {
		return false
	}
	need := cap
	if labs > 0 {
		need = min(need, labs)
	}
	distinct := 0
	for i, l := range s.failedLabs {
		if !slices.Contains(s.failedLabs[:i], l) {
			distinct++
		}
	}
	return distinct >= need
}

// labFailures counts the slot's infrastructure failures on nodes of lab.
func (s *slotState) labFailures(lab string) int {
	n := 0
	for _, l := range s.failedLabs {
		if l == lab {
			n++
		}
	}
	return n
}

// infraFailed records that attempt, run by a node of lab, ended by an infrastructure
// failure.
func (s *slotState) infraFailed(attempt int, lab string) {
	s.maxAttempt = max(s.maxAttempt, attempt)
	if !slices.Contains(s.failedAttempts, attempt) {
		s.failedAttempts = append(s.failedAttempts, attempt)
		s.failedLabs = append(s.failedLabs, lab)
	}
}

// forgetFailure takes back attempt's failure (its run waits for a key after all).
func (s *slotState) forgetFailure(attempt int) {
	if i := slices.Index(s.failedAttempts, attempt); i >= 0 {
		s.failedAttempts = slices.Delete(s.failedAttempts, i, i+1)
		s.failedLabs = slices.Delete(s.failedLabs, i, i+1)
	}
}

type campaignState struct {
	spec   CampaignSpec
	order  []*slotState // by this node's score, highest first
	cursor int          // order[:cursor] are all touched or finished
	// withdrawn: the node claims none of its slots (WithdrawCampaign).
	withdrawn bool
}

// ClaimMachine is one node's view of the claims of every campaign it knows, in the shape of
// etcd's raft: each input (a message, a tick of the caller's clock, a capacity change, a run
// starting or ending) returns the Actions to take; it does no I/O and reads no clock. Not
// safe for concurrent use: the caller serialises inputs.
type ClaimMachine struct {
	cfg       ClaimConfig
	lamport   uint64
	capacity  int
	campaigns map[string]*campaignState
	slots     map[string]*slotState
	held      map[string]*slotState       // slots with mine != nil
	watched   map[string]*slotState       // slots with holder != nil
	freed     map[string]*slotState       // touched slots that may be free again (lapsed, released)
	releasing map[string]*repeatedRelease // by slot ID
	// holderMin is at or before the earliest holderEnd in watched: the watched set is
	// scanned only once it passes, so an input costs O(held), not O(claims known).
	holderMin time.Time
	// headStartEnd is the earliest end of a key holders' head start the last full pick
	// passed by: when a Tick may find a noKey slot to claim.
	headStartEnd time.Time
	shutdown     bool
	now          time.Time // of the input being handled
	out          Actions
	// live: when each peer was last heard (claim_dead.go); deadCheck: the next scan for
	// running holders gone silent.
	live      map[string]time.Time
	deadCheck time.Time
}

// NewClaimMachine returns a machine holding no claims; a restarted node starts from a new
// one, so it never acts on claims it held before (it releases them if it hears them).
func NewClaimMachine(cfg ClaimConfig) *ClaimMachine {
	cfg = cfg.withDefaults()
	return &ClaimMachine{
		cfg:       cfg,
		capacity:  cfg.Capacity,
		campaigns: map[string]*campaignState{},
		slots:     map[string]*slotState{},
		held:      map[string]*slotState{},
		watched:   map[string]*slotState{},
		freed:     map[string]*slotState{},
		releasing: map[string]*repeatedRelease{},
		live:      map[string]time.Time{},
	}
}

// Config returns the configuration with defaults filled in.
func (m *ClaimMachine) Config() ClaimConfig { return m.cfg }

// AddCampaign starts tracking a verified campaign; claiming begins if there is capacity.
// Adding a known campaign again does nothing; a slot ID already known from another
// campaign is skipped.
func (m *ClaimMachine) AddCampaign(c CampaignSpec, now time.Time) Actions {
	m.now = now
	if _, ok := m.campaigns[c.ID]; !ok {
		cs := &campaignState{spec: c}
		for i := range cs.spec.Slots {
			// A pointer into the campaign's slots, not a copy: a node tracks every slot of
			// every campaign it knows, and the simulator hundreds of nodes' worth.
			sp := &cs.spec.Slots[i]
			if _, dup := m.slots[sp.ID]; dup {
				continue
			}
			// A slot this node ran before a restart was claimed by it then: touched, so the
			// untouched-first scan passes it by, and declined, so it is never picked.
			s := &slotState{spec: sp, camp: cs, score: RendezvousScore(sp.ID, m.cfg.Self), freeSince: now,
				touched: sp.AwaitingKey, declined: sp.AwaitingKey, awaitingKey: sp.AwaitingKey,
				noKey: sp.NoKey && !sp.AwaitingKey, maxAttempt: sp.RecordedAttempt}
			m.slots[sp.ID] = s
			cs.order = append(cs.order, s)
			if s.noKey {
				m.freed[sp.ID] = s
			}
			if sp.AwaitingKey && sp.AwaitingKeyAttempt > 0 {
				m.repeatAwaitingKeyRelease(s, sp.AwaitingKeyAttempt, now)
			}
		}
		slices.SortFunc(cs.order, func(a, b *slotState) int {
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return cmp.Compare(a.spec.ID, b.spec.ID)
		})
		m.campaigns[c.ID] = cs
	}
	return m.finish(now)
}

// WithdrawCampaign stops this node claiming the campaign's slots: its pending claims are
// released (no run started, no attempt consumed) and no slot of it is claimed again until
// RestoreCampaign. Runs of it already started go on and end as they would. The coordinator
// withdraws a campaign the caps at admission refuse after it was added (coordinator_caps.go).
func (m *ClaimMachine) WithdrawCampaign(id string, now time.Time) Actions {
	m.now = now
	c, ok := m.campaigns[id]
	if !ok || c.withdrawn {
		return m.finish(now)
	}
	c.withdrawn = true
	for _, s := range m.sortedHeld() {
		if s.camp != c || s.mine.phase != phasePending {
			continue
		}
		m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: id, Slot: s.spec.ID,
			Lamport: s.mine.lamport, Attempt: s.mine.attempt, Reason: ReleaseShutdown})
		m.dropMine(s)
	}
	return m.finish(now)
}

// RestoreCampaign lets this node claim a withdrawn campaign's slots again.
func (m *ClaimMachine) RestoreCampaign(id string, now time.Time) Actions {
	m.now = now
	if c, ok := m.campaigns[id]; ok && c.withdrawn {
		c.withdrawn = false
		for _, s := range c.order {
			// The freed scan dropped them while withdrawn; untouched ones are still ahead
			// of the cursor.
			if (s.touched || s.noKey) && !s.finished && s.mine == nil {
				m.freed[s.spec.ID] = s
			}
		}
	}
	return m.finish(now)
}

// SetCapacity sets how many runs this node can hold at once (pending claims and live runs
// together), e.g. its free GPUs divided by the GPUs a run takes. Lowering it does not abort
// runs; it stops new claims until enough end.
func (m *ClaimMachine) SetCapacity(slots int, now time.Time) Actions {
	m.now = now
	m.capacity = max(0, slots)
	return m.finish(now)
}

// Tick advances the machine's clock to now: settled claims start, live runs renew,
// expired leases lapse, runs past their hard limit and campaigns past their deadline end.
func (m *ClaimMachine) Tick(now time.Time) Actions {
	m.now = now
	return m.finish(now)
}

// Receive takes a claim message another node published (already validated). Messages for
// unknown campaigns or slots are ignored.
func (m *ClaimMachine) Receive(msg *ClaimMessage, now time.Time) Actions {
	m.now = now
	m.heard(msg.PeerID, now)
	m.lamport = max(m.lamport, msg.Lamport)
	s, ok := m.slots[msg.Slot]
	if !ok || s.camp.spec.ID != msg.Campaign {
		return m.finish(now)
	}
	if !s.touched && !s.finished {
		// Out of the untouched-first scan for good, so into freed: a release heard without
		// its claim (a node restarted or joined late) must leave the slot claimable. The
		// freed scan drops it while a claim holds it.
		m.freed[s.spec.ID] = s
	}
	s.touched = true
	s.maxAttempt = max(s.maxAttempt, msg.Attempt)
	if msg.Kind != ClaimKindRelease && msg.PeerID != m.cfg.Self && s.labFailures(msg.Lab) >= m.cfg.MaxInfraAttempts {
		// Rule 6 read on others' claims: a lab that failed the slot MaxInfraAttempts times
		// claims it no more, and a node of it that does anyway (a dishonest lab keeping a
		// slot from the network by claiming and failing it for ever) is neither waited
		// for nor given standing. Its attempt number still raises ours, so no attempt of
		// ours shares a number with its claim.
		m.out.Ignored = append(m.out.Ignored, Ignored{Slot: s.spec.ID, Peer: msg.PeerID,
			Why: fmt.Sprintf("%s of attempt %d by lab %s, which failed the slot %d times: its nodes claim it no more (rule 6)", msg.Kind, msg.Attempt, msg.Lab, s.labFailures(msg.Lab))})
		return m.finish(now)
	}
	if msg.Kind == ClaimKindRenew {
		s.hear(msg.Attempt, msg.PeerID)
	}
	if msg.Kind == ClaimKindRelease {
		switch msg.Reason {
		case ReleaseInfra:
			// Only the holder of an attempt can fail it: three forged releases for attempts
			// their sender never claimed would otherwise fail the slot for good. A genuine
			// release whose claim we missed costs at most a retry more.
			if msg.PeerID == m.cfg.Self || s.standing(msg.PeerID, msg.Attempt) {
				s.infraFailed(msg.Attempt, msg.Lab)
			} else {
				m.out.Ignored = append(m.out.Ignored, Ignored{Slot: s.spec.ID, Peer: msg.PeerID,
					Why: fmt.Sprintf("infra release of attempt %d, which it neither holds here nor was heard running", msg.Attempt)})
			}
		case ReleaseAwaitingKey:
			s.awaitingKey = true
			// Its run waits for a key; it did not fail. A copy that arrives after the
			// claim lapsed here (the first release lost) takes back the failure the lapse
			// counted, so lost releases do not use up a sealed slot's attempts. Only the
			// claimer whose lapse counted it can: no node undoes another's failures.
			if peer, ok := s.lapsedBy[msg.Attempt]; ok && peer == msg.PeerID {
				delete(s.lapsedBy, msg.Attempt)
				s.forgetFailure(msg.Attempt)
				m.freed[s.spec.ID] = s // a failed slot left freed when a pick passed it
			}
		}
	}
	ref := claimRef{peer: msg.PeerID, lab: msg.Lab, lamport: msg.Lamport, attempt: msg.Attempt,
		running: msg.Kind == ClaimKindRenew, slot: s.spec.ID}
	if msg.PeerID == m.cfg.Self {
		if s.mine == nil || !s.mine.same(ref) {
			m.receiveStale(s, msg)
		}
		return m.finish(now)
	}
	if s.finished {
		if s.ranResult && msg.Kind == ClaimKindClaim {
			m.out.Reannounce = append(m.out.Reannounce, s.spec.ID)
		}
		return m.finish(now)
	}
	if msg.Kind == ClaimKindRelease {
		if s.holder != nil && s.holder.same(ref) {
			m.dropHolder(s)
		}
		return m.finish(now)
	}
	lease := time.Duration(msg.LeaseMS) * time.Millisecond
	mine := s.mine
	switch {
	case mine == nil:
		m.noteClaim(s, ref, now, lease)
	case ref.beats(mine.claimRef):
		m.noteClaim(s, ref, now, lease)
		if mine.phase == phasePending {
			m.dropMine(s) // yield: the winner knows it wins; nothing to publish
		}
		// A live run does not yield: the duplicate has happened, and the ledger counts one
		// of the two runs (docs/protocol.md).
	default:
		// Tell the loser at once rather than at our next heartbeat, while it settles.
		m.publishMine(s, now)
		if ref.running {
			// A duplicate run: should ours end without a result, theirs holds the slot.
			m.noteClaim(s, ref, now, lease)
		}
	}
	return m.finish(now)
}

// receiveStale answers a message signed by this node for a claim it does not hold: a claim
// made before a restart (a new machine holds nothing). It must not act on it; it releases
// it so others need not wait for the lease. A renewed one had started its run, which the
// restart ended: its attempt is consumed, unless it is the run that waits for a key
// (SlotSpec.AwaitingKeyAttempt), which did not fail and is released as awaiting the key.
func (m *ClaimMachine) receiveStale(s *slotState, msg *ClaimMessage) {
	if msg.Kind == ClaimKindRelease || s.finished {
		return
	}
	if msg.Kind == ClaimKindRenew && s.spec.AwaitingKey && msg.Attempt == s.spec.AwaitingKeyAttempt {
		// The old claim's own Lamport time: a node still holding it drops it at once.
		m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: msg.Campaign, Slot: msg.Slot,
			Lamport: msg.Lamport, Attempt: msg.Attempt, Reason: ReleaseAwaitingKey})
		return
	}
	reason := ReleaseStale
	if msg.Kind == ClaimKindRenew {
		reason = ReleaseInfra
		s.infraFailed(msg.Attempt, m.cfg.Lab)
	}
	m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: msg.Campaign, Slot: msg.Slot,
		Lamport: msg.Lamport, Attempt: msg.Attempt, Reason: reason})
}

// noteClaim records another node's claim if it is the best known for the slot.
func (m *ClaimMachine) noteClaim(s *slotState, ref claimRef, now time.Time, lease time.Duration) {
	if h := s.holder; h != nil {
		if h.same(ref) {
			h.running = h.running || ref.running
			h.expires = now.Add(lease)
			// A renew may name a shorter lease than the last (rule 4: the lease runs from
			// the latest message, for its length): holderMin must stay a lower bound.
			if end := m.holderEnd(s); m.holderMin.IsZero() || end.Before(m.holderMin) {
				m.holderMin = end
			}
			return
		}
		if !ref.beats(h.claimRef) {
			return
		}
	}
	s.holder = &remoteClaim{claimRef: ref, firstSeen: now, expires: now.Add(lease)}
	m.watched[s.spec.ID] = s
	if end := m.holderEnd(s); m.holderMin.IsZero() || end.Before(m.holderMin) {
		m.holderMin = end
	}
}

func (m *ClaimMachine) dropHolder(s *slotState) {
	s.holder = nil
	s.freeSince = m.now
	delete(m.watched, s.spec.ID)
	if !s.finished {
		m.freed[s.spec.ID] = s
	}
}

func (m *ClaimMachine) dropMine(s *slotState) {
	s.mine = nil
	s.freeSince = m.now
	delete(m.held, s.spec.ID)
	if !s.finished {
		m.freed[s.spec.ID] = s
	}
}

// SlotFinished records that a valid run attestation for the slot, signed by node by, is
// known: the slot is done for everyone. A run of it here is aborted (its result could not
// count twice) unless by neither holds the slot here nor was heard running it (rule 7); a
// pending claim is dropped. by "" (a run whose signer is not known, as when a restarted daemon replays its
// store) is taken as a holder.
func (m *ClaimMachine) SlotFinished(slotID, by string, now time.Time) Actions {
	m.now = now
	s, ok := m.slots[slotID]
	if !ok {
		return m.finish(now)
	}
	if mine := s.mine; mine != nil && mine.phase == phaseRunning && by != "" && by != m.cfg.Self && !s.standing(by, 0) {
		// A result from a node without standing on the slot does not cut our live run
		// short: a dishonest lab could otherwise abort every honest run by publishing a
		// run of each slot. Our run goes on and finishes the slot with its own result.
		m.out.Ignored = append(m.out.Ignored, Ignored{Slot: slotID, Peer: by,
			Why: "a result of the slot by a node that neither holds it here nor was heard running it; the live run here goes on"})
		return m.finish(now)
	}
	s.finished = true
	s.touched = true
	delete(m.freed, slotID)
	if s.holder != nil {
		m.dropHolder(s)
	}
	if mine := s.mine; mine != nil {
		if mine.phase == phaseRunning {
			m.abort(s, AbortFinishedElsewhere)
		}
		m.dropMine(s)
	}
	return m.finish(now)
}

// AttemptClaimed records that attempt of slotID was claimed by a signed claim record
// (Coordinator.ClaimRecord), so this node's next claim of the slot takes a later attempt
// (rule 6). The record can reach a node whose gossip copy of that claim and its renews were
// lost (loss, a partition); a claim of the same attempt would then compete with the
// holder's by claim rank, and where it outranks it, the holder's result already out no
// longer counts (docs/design.md §9 "Pre-emption") while, for a node without the sealed
// bundle's key, its own run only waits: nothing would ever finish the slot.
func (m *ClaimMachine) AttemptClaimed(slotID string, attempt int) {
	if s, ok := m.slots[slotID]; ok {
		s.maxAttempt = max(s.maxAttempt, attempt)
	}
}

// SlotReopened records that the results that finished the slot here no longer do: a
// claim record heard since gives their attempt to another node (Coordinator.ClaimRecord),
// and the ledger counts a run only from its attempt's holder. The slot is free again, from
// now, and the next claim takes a later attempt. Without this, a key holder whose run
// finished a sealed slot just before it heard a keyless node's better-ranked record of the
// same attempt (both claimed it across a partition) held the slot finished for ever, while
// the holder's run only waited for a key: nothing would finish the slot.
//
// The node of lab whose record of attempt reopened it most likely ran that attempt on the
// other side of a partition, and its run is on its way: the slot is held for it for a lease,
// as a claim heard, and is free only if no run of it comes by then. Freed at once, it was
// run a third time (TestHostsFaults' 5-minute cut: one slot ran 3 times).
func (m *ClaimMachine) SlotReopened(slotID, node, lab string, attempt int, now time.Time) Actions {
	m.now = now
	if s, ok := m.slots[slotID]; ok && s.finished {
		s.finished, s.ranResult = false, false
		s.freeSince = now
		m.freed[slotID] = s
		m.noteClaim(s, claimRef{peer: node, lab: lab, attempt: attempt, running: true, slot: slotID}, now, m.cfg.Lease)
	}
	return m.finish(now)
}

// KeyArrived records that this node's lab can now open the key of the sealed task bundle
// task (a grant to it arrived): its slots are claimed like any other from now on.
func (m *ClaimMachine) KeyArrived(task string, now time.Time) Actions {
	m.now = now
	for _, s := range m.slots {
		if s.noKey && s.spec.Slot.Task == task {
			s.noKey = false
		}
	}
	return m.finish(now)
}

// RunStarted records that the run asked for by a StartRun has really started: its hard
// limit counts from now.
func (m *ClaimMachine) RunStarted(slotID string, now time.Time) Actions {
	m.now = now
	if s, ok := m.held[slotID]; ok && s.mine.phase == phaseRunning {
		s.mine.startedAt = now
	}
	return m.finish(now)
}

// RunEnded records how this node's run of the slot ended. A valid or agent-failed run
// finishes the slot (its attestation is on its way to everyone); an infrastructure failure
// consumes the attempt and releases the slot for another node to retry; a run awaiting a
// key releases it without consuming the attempt, and this node never claims it again.
func (m *ClaimMachine) RunEnded(slotID string, o RunOutcome, now time.Time) Actions {
	m.now = now
	s, ok := m.held[slotID]
	if !ok {
		return m.finish(now)
	}
	mine := s.mine
	switch o.Kind {
	case RunValid, RunAgentFailed:
		s.finished = true
		s.ranResult = true
		m.dropMine(s)
		if s.holder != nil {
			m.dropHolder(s)
		}
	case RunAwaitingKey:
		s.maxAttempt = max(s.maxAttempt, mine.attempt)
		s.declined = true
		s.awaitingKey = true
		m.dropMine(s)
		m.publishAwaitingKeyRelease(s, mine.lamport, mine.attempt, now)
	case RunGivenUp:
		m.dropMine(s)
		s.maxAttempt = max(s.maxAttempt, mine.attempt)
		m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: s.camp.spec.ID, Slot: s.spec.ID,
			Lamport: mine.lamport, Attempt: mine.attempt, Reason: ReleaseStale})
	default:
		m.dropMine(s)
		s.infraFailed(mine.attempt, m.cfg.Lab)
		s.avoidUntil = now.Add(m.cfg.Lease)
		m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: s.camp.spec.ID, Slot: s.spec.ID,
			Lamport: mine.lamport, Attempt: mine.attempt, Reason: ReleaseInfra})
	}
	return m.finish(now)
}

// Shutdown releases every claim explicitly (pending ones freely; live runs, which are
// aborted, consume their attempt) and stops claiming.
func (m *ClaimMachine) Shutdown(now time.Time) Actions {
	m.now = now
	m.shutdown = true
	for _, s := range m.sortedHeld() {
		mine := s.mine
		reason := ReleaseShutdown
		if mine.phase == phaseRunning {
			reason = ReleaseInfra
			s.infraFailed(mine.attempt, m.cfg.Lab)
			m.abort(s, AbortShutdown)
		}
		m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: s.camp.spec.ID, Slot: s.spec.ID,
			Lamport: mine.lamport, Attempt: mine.attempt, Reason: reason})
		m.dropMine(s)
	}
	return m.finish(now)
}

// Status counts the campaign's slots as this node sees them now; ok is false for an
// unknown campaign.
func (m *ClaimMachine) Status(campaignID string, now time.Time) (st CampaignStatus, ok bool) {
	c, ok := m.campaigns[campaignID]
	if !ok {
		return CampaignStatus{}, false
	}
	st = CampaignStatus{Campaign: campaignID, Slots: len(c.order), Closed: !now.Before(c.spec.Deadline), Withdrawn: c.withdrawn}
	for _, s := range c.order {
		switch {
		case s.finished:
			st.Done++
		case s.failed(m.cfg.MaxInfraAttempts, m.cfg.Labs):
			st.Failed++
		case s.mine != nil && s.mine.phase == phaseRunning,
			s.mine == nil && s.holder != nil && s.holder.running && now.Before(s.holder.expires):
			st.Running++
		case s.mine != nil, s.holder != nil && now.Before(s.holder.expires):
			st.Claimed++
		case s.awaitingKey:
			st.AwaitingKey++
		default:
			st.Unclaimed++
		}
	}
	return st, true
}

// Held lists the slot IDs this node holds a claim on, sorted.
func (m *ClaimMachine) Held() []string {
	out := make([]string, 0, len(m.held))
	for id := range m.held {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// FreeSince is when the slot last became free in this node's view: its campaign added, a
// claim on it lapsed, released or dropped. Meaningful while the slot is free; the simulator
// measures claim→start from it.
func (m *ClaimMachine) FreeSince(slotID string) time.Time {
	if s, ok := m.slots[slotID]; ok {
		return s.freeSince
	}
	return time.Time{}
}

// Lamport is the node's Lamport clock.
func (m *ClaimMachine) Lamport() uint64 { return m.lamport }

func (m *ClaimMachine) sortedHeld() []*slotState {
	out := make([]*slotState, 0, len(m.held))
	for _, s := range m.held {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *slotState) int { return cmp.Compare(a.spec.ID, b.spec.ID) })
	return out
}

func (m *ClaimMachine) publish(msg ClaimMessage) {
	msg.V = Version
	msg.PeerID = m.cfg.Self
	msg.Lab = m.cfg.Lab
	msg.Cert = m.cfg.Cert
	if msg.Kind != ClaimKindRelease {
		msg.LeaseMS = m.cfg.Lease.Milliseconds()
	}
	m.out.Publish = append(m.out.Publish, msg)
}

func (m *ClaimMachine) publishMine(s *slotState, now time.Time) {
	kind := ClaimKindClaim
	if s.mine.phase == phaseRunning {
		kind = ClaimKindRenew
	}
	m.publish(ClaimMessage{Kind: kind, Campaign: s.camp.spec.ID, Slot: s.spec.ID,
		Lamport: s.mine.lamport, Attempt: s.mine.attempt})
}

func (m *ClaimMachine) abort(s *slotState, reason string) {
	m.out.Abort = append(m.out.Abort, AbortRun{Campaign: s.camp.spec.ID, SlotID: s.spec.ID, Attempt: s.mine.attempt, Reason: reason})
}

// finish runs the time-driven rules at now, claims up to capacity, and returns the
// accumulated actions with the next wake time.
func (m *ClaimMachine) finish(now time.Time) Actions {
	m.advance(now)
	m.claimMore(now)
	out := m.out
	m.out = Actions{}
	out.Wake = m.nextWake(now)
	return out
}

func (m *ClaimMachine) advance(now time.Time) {
	for _, s := range m.sortedHeld() {
		mine := s.mine
		closed := !now.Before(s.camp.spec.Deadline)
		switch {
		case mine.phase == phasePending && closed:
			m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: s.camp.spec.ID, Slot: s.spec.ID,
				Lamport: mine.lamport, Attempt: mine.attempt, Reason: ReleaseShutdown})
			m.dropMine(s)
		case mine.phase == phasePending && !now.Before(mine.settleAt):
			mine.phase = phaseRunning
			mine.running = true
			mine.startedAt = now
			mine.nextRenew = now.Add(m.cfg.Heartbeat)
			m.out.Start = append(m.out.Start, StartRun{Campaign: s.camp.spec.ID, Slot: *s.spec, Attempt: mine.attempt})
		case mine.phase == phaseRunning && (closed || !now.Before(mine.startedAt.Add(s.hardLimit()))):
			reason := AbortHardLimit
			if closed {
				reason = AbortCampaignDeadline
			}
			m.abort(s, reason)
			s.infraFailed(mine.attempt, m.cfg.Lab)
			s.avoidUntil = now.Add(m.cfg.Lease)
			m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: s.camp.spec.ID, Slot: s.spec.ID,
				Lamport: mine.lamport, Attempt: mine.attempt, Reason: ReleaseInfra})
			m.dropMine(s)
		case mine.phase == phaseRunning && !now.Before(mine.nextRenew):
			for !now.Before(mine.nextRenew) {
				mine.nextRenew = mine.nextRenew.Add(m.cfg.Heartbeat)
			}
			m.publishMine(s, now)
		}
	}
	m.repeatReleases(now)
	m.lapseSilent(now)
	if m.holderMin.IsZero() || now.Before(m.holderMin) {
		return
	}
	m.holderMin = time.Time{}
	for _, s := range m.watched {
		end := m.holderEnd(s)
		if now.Before(end) {
			if m.holderMin.IsZero() || end.Before(m.holderMin) {
				m.holderMin = end
			}
			continue
		}
		if s.holder.running {
			// A live run that went silent (crash, hung, cut off) consumed its attempt.
			s.infraFailed(s.holder.attempt, s.holder.lab)
			if s.lapsedBy == nil {
				s.lapsedBy = map[int]string{}
			}
			s.lapsedBy[s.holder.attempt] = s.holder.peer
		}
		m.dropHolder(s)
	}
}

// publishAwaitingKeyRelease publishes this node's awaiting-key release of the slot for the
// run of the given attempt. Nothing else tells the others that the run did not fail (a valid
// run has its attestation; an infra failure's lost release reads as the same failure), so
// the release goes out again at each heartbeat for a lease and one heartbeat more.
func (m *ClaimMachine) publishAwaitingKeyRelease(s *slotState, lamport uint64, attempt int, now time.Time) {
	m.publish(ClaimMessage{Kind: ClaimKindRelease, Campaign: s.camp.spec.ID, Slot: s.spec.ID,
		Lamport: lamport, Attempt: attempt, Reason: ReleaseAwaitingKey})
	m.releasing[s.spec.ID] = &repeatedRelease{slot: s, msg: m.out.Publish[len(m.out.Publish)-1],
		at: now.Add(m.cfg.Heartbeat), left: int(m.cfg.Lease/m.cfg.Heartbeat) + 1}
}

// repeatAwaitingKeyRelease publishes again, after a restart, the awaiting-key release of a
// run this node signed before it (SlotSpec.AwaitingKeyAttempt). The claim's Lamport time
// went with the old machine, so the copy carries a new one: a node still holding the old
// claim keeps it until it lapses (release and claim do not match), and the copies that
// follow within the lease then take back the failure the lapse counted, by peer and
// attempt, as for a lost release.
func (m *ClaimMachine) repeatAwaitingKeyRelease(s *slotState, attempt int, now time.Time) {
	m.lamport++
	m.publishAwaitingKeyRelease(s, m.lamport, attempt, now)
}

// repeatReleases publishes the awaiting-key releases that are due again, in slot order.
func (m *ClaimMachine) repeatReleases(now time.Time) {
	if len(m.releasing) == 0 {
		return
	}
	var due []*repeatedRelease
	for id, r := range m.releasing {
		if r.slot.finished || m.shutdown {
			delete(m.releasing, id)
		} else if !now.Before(r.at) {
			due = append(due, r)
		}
	}
	slices.SortFunc(due, func(a, b *repeatedRelease) int { return cmp.Compare(a.slot.spec.ID, b.slot.spec.ID) })
	for _, r := range due {
		m.out.Publish = append(m.out.Publish, r.msg)
		for !now.Before(r.at) {
			r.at = r.at.Add(m.cfg.Heartbeat)
		}
		if r.left--; r.left <= 0 {
			delete(m.releasing, r.slot.spec.ID)
		}
	}
}

// holderEnd is when another node's claim stops holding the slot here: its lease lapses, or
// the slot's hard limit (counted from when this node first saw the claim, plus a heartbeat
// for the holder's own abort to arrive) passes however often it was renewed.
func (m *ClaimMachine) holderEnd(s *slotState) time.Time {
	h := s.holder
	hard := h.firstSeen.Add(s.hardLimit() + m.cfg.Heartbeat)
	if hard.Before(h.expires) {
		return hard
	}
	return h.expires
}

func (m *ClaimMachine) claimMore(now time.Time) {
	if m.shutdown {
		return
	}
	for len(m.held) < m.capacity {
		s := m.pick(now)
		if s == nil {
			return
		}
		m.lamport++
		s.touched = true
		s.mine = &myClaim{
			claimRef: claimRef{peer: m.cfg.Self, lab: m.cfg.Lab, lamport: m.lamport,
				attempt: s.maxAttempt + 1, slot: s.spec.ID},
			phase:    phasePending,
			settleAt: now.Add(m.cfg.Settle),
		}
		m.held[s.spec.ID] = s
		m.publishMine(s, now)
	}
}

// pick chooses the next slot to claim: campaigns open at now by earliest deadline (then
// ID); within one, untouched slots in this node's rendezvous order first, then slots whose
// claims lapsed or were released (their holder may be alive behind a partition), also in
// rendezvous order.
func (m *ClaimMachine) pick(now time.Time) *slotState {
	var open []*campaignState
	for _, c := range m.campaigns {
		if !c.withdrawn && !now.Before(c.spec.Created) && now.Before(c.spec.Deadline) {
			open = append(open, c)
		}
	}
	slices.SortFunc(open, func(a, b *campaignState) int {
		if c := a.spec.Deadline.Compare(b.spec.Deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.spec.ID, b.spec.ID)
	})
	for _, c := range open {
		// Untouched slots only ever become touched, and a noKey slot waits in freed from the
		// start, so order[:cursor] never needs a rescan.
		// A slot the certificate cannot cover now never will under it (time only shortens
		// what is left): skipped for good, until SetCertificate rescans.
		for c.cursor < len(c.order) && (c.order[c.cursor].touched || c.order[c.cursor].finished || c.order[c.cursor].noKey || !m.certCovers(c.order[c.cursor], now)) {
			c.cursor++
		}
		if c.cursor < len(c.order) {
			return c.order[c.cursor]
		}
	}
	m.headStartEnd = time.Time{}
	var best, avoided *slotState
	for id, s := range m.freed {
		if s.finished || s.mine != nil || s.holder != nil || s.declined || s.camp.withdrawn || s.failed(m.cfg.MaxInfraAttempts, m.cfg.Labs) || slices.Contains(s.barred, m.cfg.Lab) {
			delete(m.freed, id)
			continue
		}
		if !now.Before(s.camp.spec.Deadline) || now.Before(s.camp.spec.Created) {
			continue
		}
		if !m.certCovers(s, now) {
			continue
		}
		if s.labFailures(m.cfg.Lab) >= m.cfg.MaxInfraAttempts {
			// This lab had its tries: the slot is left to other labs, whose failures alone
			// can fail it (failed).
			continue
		}
		if s.noKey {
			// Key holders first: they score the run at once, where this node's would wait
			// for a grant. After their head start, a last resort, as an avoided slot is;
			// never while another node's run of it already waits for a key: a second run
			// without the key would only wait beside it.
			if s.awaitingKey {
				continue
			}
			if end := s.freeSince.Add(m.cfg.KeyHolderHeadStart); now.Before(end) {
				if m.headStartEnd.IsZero() || end.Before(m.headStartEnd) {
					m.headStartEnd = end
				}
				continue
			}
		}
		// A slot whose run failed here, or a noKey slot past its head start, is left to other
		// nodes while this one has anything else to do; with nothing else, waiting would
		// only idle capacity.
		if s.noKey || now.Before(s.avoidUntil) {
			if avoided == nil || preferred(s, avoided) {
				avoided = s
			}
		} else if best == nil || preferred(s, best) {
			best = s
		}
	}
	if best == nil {
		return avoided
	}
	return best
}

// preferred orders freed slots: earlier campaign deadline, then higher score, then ID.
func preferred(a, b *slotState) bool {
	if c := a.camp.spec.Deadline.Compare(b.camp.spec.Deadline); c != 0 {
		return c < 0
	}
	if a.camp.spec.ID != b.camp.spec.ID {
		return a.camp.spec.ID < b.camp.spec.ID
	}
	if a.score != b.score {
		return a.score > b.score
	}
	return a.spec.ID < b.spec.ID
}

// nextWake is the earliest time after now at which a Tick would change something.
func (m *ClaimMachine) nextWake(now time.Time) time.Time {
	var w time.Time
	at := func(t time.Time) {
		if t.After(now) && (w.IsZero() || t.Before(w)) {
			w = t
		}
	}
	for _, s := range m.held {
		mine := s.mine
		if mine.phase == phasePending {
			at(mine.settleAt)
		} else {
			at(mine.nextRenew)
			at(mine.startedAt.Add(s.hardLimit()))
		}
		at(s.camp.spec.Deadline)
	}
	if !m.holderMin.IsZero() {
		at(m.holderMin)
	}
	if m.cfg.DeadAfter > 0 && len(m.watched) > 0 {
		at(m.deadCheck)
	}
	for _, r := range m.releasing {
		at(r.at)
	}
	if !m.shutdown && len(m.held) < m.capacity {
		for _, c := range m.campaigns {
			at(c.spec.Created) // a campaign not open yet
		}
		// claimMore's last pick found nothing (there is room), so it scanned every freed
		// slot: no head start it passed by ends sooner.
		at(m.headStartEnd)
	}
	return w
}

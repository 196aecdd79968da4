package protocol

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// The Coordinator is a node's duties in its network as one pure state machine (etcd raft's
// shape): verified values in, one CoordActions out. It wraps the ClaimMachine (who runs
// which slot) and adds what the daemon loop used to decide itself: when a campaign reaches
// the claim machine (after its bundles were fetched, and, in a network that requires
// witnesses, after another lab witnessed it), the claims heard meanwhile and replayed then,
// which runs finish their slots, who re-scores a run (protocol.RescorersDue, escalation on
// contradictions, one node per lab by rendezvous), which campaigns this node witnesses, the
// slots whose runs here wait for a sealed bundle's key, the capacity it may claim with
// (none before it opened, none while the network document differs from the majority's),
// and claim→start per run.
//
// It does no I/O and starts no goroutines; every input carries the time. Not safe for
// concurrent use: one goroutine (the daemon's loop, or the simulator) owns it. The scripts
// in testdata/coordinator test every rule on virtual time.

// CoordinatorConfig configures a node's coordinator.
type CoordinatorConfig struct {
	// Claims configures the wrapped claim machine (Self, Lab and Cert are the node's).
	// Its Capacity is ignored: nothing is claimed until OpenCapacity.
	Claims ClaimConfig
	// Labs is the trusted labs' IDs: the re-scorer order's members.
	Labs []string
	// RescoreTimeout is how long a chosen re-scorer lab may stay silent before the next
	// lab in the order steps in (RescorersDue).
	RescoreTimeout time.Duration
	// RequireWitness: the network's policy requires a run to cite another lab's witness
	// record of its campaign (attest.AcceptPolicy.RequireWitness).
	RequireWitness bool
	// AwaitingKey: slot IDs whose run on this node waits for a sealed bundle's key (read
	// from its runs at start), to the attempt that run signed.
	AwaitingKey map[string]int
	// RequireClaimRecords: the network's policy counts a run only from the holder of its
	// attempt by the signed claim records (attest.AcceptPolicy.RequireClaimRecords;
	// coordinator_claimrec.go).
	RequireClaimRecords bool
	// Scorers: a sealed task's bundle CID to the lab IDs that score it (the network
	// document's ledger.scorers, attest.AcceptPolicy.Scorers; coordinator_seal.go).
	Scorers map[string][]string
	// MaxAgentsPerLab and MaxCampaignsPerLab are the network's per-lab caps at admission
	// (attest.AcceptPolicy's, the network document's ledger.caps): the slots of a campaign
	// the ledger refuses are not claimed here (coordinator_caps.go). 0 is no cap.
	MaxAgentsPerLab, MaxCampaignsPerLab int
	// RescorerDraw, when not nil, is the network's drawn re-scorer rule (the ledger's
	// attest.AcceptPolicy.RescorerDraw): who re-scores a run is drawn by VRF over its slot,
	// attempt and lab instead of RescorersDue's order by its attestation ID
	// (coordinator_rescore.go). OwnDraw is this node's draw for a run (attest.RescoreDraw
	// with its lab's draw key, or its node key where the lab has none); VerifyDraw checks
	// the draw another node of lab carried in its re-score (nil: RescorerDraw.Keys'
	// VerifyRescoreDraw, as the ledger checks it). Both are pure functions of their inputs.
	RescorerDraw *attest.RescorerDraw
	OwnDraw      func(run *attest.RunPredicate) (float64, error)
	VerifyDraw   func(lab, node, proof string, run *attest.RunPredicate) (float64, error)
	// MaxInfraStreak: this node's own runs ending by infrastructure failures in a row after
	// which it stops claiming (0: DefaultMaxInfraStreak; coordinator_health.go).
	MaxInfraStreak int
}

// CoordinatorCampaign is a verified campaign whose bundles and agents this node has
// prepared.
type CoordinatorCampaign struct {
	// Spec holds every slot of the campaign, with its hard limit and NoKey filled in; the
	// coordinator fills AwaitingKey from its own set.
	Spec CampaignSpec
	// Lab is the campaign's lab; Replication how many other labs re-score each run.
	Lab         string
	Replication int
	// Refused: agent CIDs this node's policy will not run; their slots are never claimed
	// here (they still count for re-scores and finishing).
	Refused map[string]bool
	// Unrunnable: slot IDs this node cannot run (executor, image, GPUs), to why; never
	// claimed here either (runner.CheckRunnable decides, node/mesh/runnable.go).
	Unrunnable map[string]string
	// Unauditable: agent CIDs whose spec asks for a network: no lab can re-run them alike,
	// so this node never audits their runs (coordinator_audit.go).
	Unauditable map[string]bool
}

// RunHeard is a verified run attestation, as the coordinator needs it.
type RunHeard struct {
	ID, Node, Lab string
	Slot          attest.Slot
	SlotID        string
	Attempt       int
	Metric        string
	Valid         bool
	Score         *float64
	// Witness is the witness record the run cites ("" none).
	Witness string
}

// RescoreHeard is a verified re-score attestation of run Run. Draw is the re-scorer draw it
// carries (attest.RescorePredicate.Draw), checked against the run once both are here.
type RescoreHeard struct {
	ID, Run, Node, Lab string
	Metric             string
	Valid              bool
	Score              *float64
	Draw               string
}

// WitnessHeard is a verified witness record of Campaign, signed by Node of Lab at Time (as
// the record states it: the caps' admission order reads it, as the ledger does).
type WitnessHeard struct {
	ID, Campaign, Lab, Node string
	Time                    time.Time
}

// CoordActions is what one input asks the caller to do. The embedded claim machine Actions
// come first, in their order (abort, publish, re-announce, start); then the re-scores and
// witness records to sign, and a ledger recomputation. Wake, when not zero, replaces the
// previous one.
type CoordActions struct {
	Actions
	// Rescore lists run attestation IDs this node must re-score now; the caller reports
	// each back with RescoreEnded, whatever became of it.
	Rescore []string
	// Witness lists campaigns (of other labs) this node must sign a witness record of.
	Witness []string
	// RecomputeLedger: the ledger's inputs changed (a campaign was prepared).
	RecomputeLedger bool
	// Handed lists campaigns handed to the claim machine now (for the log).
	Handed []string
	// Declined lists inputs the coordinator did not act on, and why (for the log).
	Declined []Declined
	// GiveUp lists slots whose run here must be cut short and released like an
	// infrastructure failure: a better-ranked claim record holds its attempt.
	GiveUp []GiveUp
	// SignRelease lists release records this node must sign (coordinator_claimrec.go).
	SignRelease []ReleaseToSign
	// Audit lists runs of other labs this node must re-execute and audit now
	// (coordinator_audit.go); the caller reports each back with AuditEnded.
	Audit []AuditRun
	// StoppedClaiming, when set, says why this node stops claiming now: its own runs failed
	// on its side too many times in a row (coordinator_health.go).
	StoppedClaiming string
	// Reopened lists finished slots made free again: their only run no longer counts
	// (coordinator_revoke.go, Voided). For the log.
	Reopened []string
}

// Declined is one input the coordinator dropped, and why.
type Declined struct {
	Input, ID, Why string
}

// maxEarlyClaims bounds the claims kept for one campaign being prepared: a few per slot of a
// large campaign; past it the rest are dropped, as they were before any were kept (the
// settle and the tie-break still resolve what is missed).
const maxEarlyClaims = 1 << 16

type coordCampaign struct {
	c        CoordinatorCampaign
	spec     CampaignSpec // the slots handed to the claim machine
	added    bool         // handed to the claim machine
	awaiting bool         // waiting for another lab's witness before claiming
	// capHeld: not handed to the claim machine because the caps at admission refuse it or
	// cannot decide yet (coordinator_caps.go); capWhy the refusal last declined.
	capHeld bool
	capWhy  string
	// withdrawn: handed to the claim machine, then refused by the caps when an earlier
	// campaign of its lab came: the machine claims none of its slots (coordinator_caps.go).
	withdrawn bool
	noKey     map[string]bool
}

type coordRun struct {
	RunHeard
	firstSeen time.Time
}

type coordWitness struct {
	id, lab, node string
	at            time.Time
}

// Coordinator is one node's duty state machine. Make it with NewCoordinator.
type Coordinator struct {
	cfg       CoordinatorConfig
	cm        *ClaimMachine
	clock     claimClock
	campaigns map[string]*coordCampaign
	slots     map[string]string // slot ID -> campaign ID, every slot of a prepared campaign
	pending   map[string]bool   // campaigns heard, being prepared
	early     map[string][]*ClaimMessage
	runs      map[string]*coordRun
	bySlot    map[string][]string // slot ID -> run IDs, in arrival order
	rescores  map[string][]RescoreHeard
	rescoring map[string]bool
	labPeers  map[string]time.Time
	witnesses map[string][]coordWitness
	witnessed map[string]bool
	awaitKey  map[string]int
	running   map[string]bool // slots whose run this node started and that have not ended
	// startedHere: the last start the claim machine asked of this node, by slot (its
	// attempt and slot value, for claim records); claimRecs: the claim records held, by
	// slot; preempted: slot → the attempt this node gave up to a better-ranked record.
	startedHere map[string]StartRun
	claimRecs   map[string][]ClaimRecordHeard
	preempted   map[string]int
	// recordMax: slot → the highest attempt a claim record heard names, kept or declined
	// over its lab's bound (coordinator_claimrec.go).
	recordMax map[string]int
	audit     *coordAudit // nil: the network does not audit (coordinator_audit.go)
	// draws caches the re-scorer draws checked (coordinator_rescore.go): by re-score ID,
	// and this node's own by "run:" + run ID.
	draws map[string]drawn
	// voided: runs a revocation voided (coordinator_revoke.go); heard again, they finish
	// nothing.
	voided   map[string]bool
	capOpen  bool
	docHalt  bool
	stopped  bool // StopClaiming: this node's own runs keep failing
	streak   infraStreak
	capacity int
	seal     sealState // coordinator_seal.go
}

// NewCoordinator makes a node's coordinator; it claims nothing before OpenCapacity.
func NewCoordinator(cfg CoordinatorConfig) *Coordinator {
	cc := cfg.Claims
	cc.Capacity = 0
	labs := slices.Clone(cfg.Labs)
	slices.Sort(labs)
	cfg.Labs = slices.Compact(labs)
	if cfg.VerifyDraw == nil {
		var keys attest.DrawKeys
		if cfg.RescorerDraw != nil {
			keys = cfg.RescorerDraw.Keys
		}
		cfg.VerifyDraw = func(lab, node, proof string, run *attest.RunPredicate) (float64, error) {
			beta, err := keys.VerifyRescoreDraw(lab, node, proof, run)
			return attest.DrawFraction(beta), err
		}
	}
	aw := maps.Clone(cfg.AwaitingKey)
	if aw == nil {
		aw = map[string]int{}
	}
	return &Coordinator{
		cfg: cfg, cm: NewClaimMachine(cc),
		campaigns: map[string]*coordCampaign{}, slots: map[string]string{}, pending: map[string]bool{},
		early: map[string][]*ClaimMessage{}, runs: map[string]*coordRun{}, bySlot: map[string][]string{},
		rescores: map[string][]RescoreHeard{}, rescoring: map[string]bool{}, labPeers: map[string]time.Time{}, draws: map[string]drawn{},
		witnesses: map[string][]coordWitness{}, witnessed: map[string]bool{}, awaitKey: aw, running: map[string]bool{},
		startedHere: map[string]StartRun{}, claimRecs: map[string][]ClaimRecordHeard{}, preempted: map[string]int{}, recordMax: map[string]int{},
	}
}

// step folds one claim machine step into out, following claim→start after it.
func (c *Coordinator) step(out *CoordActions, a Actions, now time.Time) {
	c.clock.observe(c.cm.Held, a, c.cm.FreeSince, now)
	for _, ab := range a.Abort {
		if c.running[ab.SlotID] {
			delete(c.running, ab.SlotID)
			c.clock.unitFreed(now)
		}
	}
	for _, s := range a.Start {
		c.startedHere[s.Slot.ID] = s
	}
	c.releasesToSign(out, a.Publish)
	out.Abort = append(out.Abort, a.Abort...)
	out.Publish = append(out.Publish, a.Publish...)
	out.Reannounce = append(out.Reannounce, a.Reannounce...)
	out.Start = append(out.Start, a.Start...)
	out.Ignored = append(out.Ignored, a.Ignored...)
	if !a.Wake.IsZero() {
		out.Wake = a.Wake
	}
}

// CampaignHeard says whether the caller should prepare the verified campaign id (fetch its
// bundles, parse its agents, then AddCampaign): false when it is prepared or being
// prepared. From now until AddCampaign, the claims heard for it are kept and replayed then.
func (c *Coordinator) CampaignHeard(id string) bool {
	if c.campaigns[id] != nil || c.pending[id] {
		return false
	}
	c.pending[id] = true
	return true
}

// AddCampaign takes a prepared campaign: this node witnesses it when the network requires
// witnesses and it is another lab's; it is handed to the claim machine at once, or, when it
// is this node's lab's own in such a network, once another lab's witness is held. A
// campaign of its lab that it pushes over the caps is withdrawn (coordinator_caps.go).
func (c *Coordinator) AddCampaign(in CoordinatorCampaign, now time.Time) CoordActions {
	var out CoordActions
	id := in.Spec.ID
	if c.campaigns[id] != nil {
		out.Declined = append(out.Declined, Declined{Input: "campaign", ID: id, Why: "already added"})
		return out
	}
	c.addCampaign(&out, in, now)
	c.recheckCaps(&out, now)
	return out
}

func (c *Coordinator) addCampaign(out *CoordActions, in CoordinatorCampaign, now time.Time) {
	id := in.Spec.ID
	cc := &coordCampaign{c: in, noKey: map[string]bool{}}
	c.campaigns[id] = cc
	spec := in.Spec
	spec.Slots = nil
	for _, s := range in.Spec.Slots {
		c.slots[s.ID] = id
		if s.NoKey {
			cc.noKey[s.Slot.Task] = true
		}
		if !c.sealSlot(&s) || in.Refused[s.Slot.Agent] || in.Unrunnable[s.ID] != "" {
			continue // never claimed here
		}
		if att, ok := c.awaitKey[s.ID]; ok && att > 0 {
			s.AwaitingKey, s.AwaitingKeyAttempt = true, att
		}
		spec.Slots = append(spec.Slots, s)
	}
	c.auditCampaignAdded(out, id, now) // draws that waited for the campaign (coordinator_audit.go)
	cc.spec = spec
	if c.cfg.RequireWitness && in.Lab != c.cfg.Claims.Lab && !c.witnessed[id] {
		c.witnessed[id] = true
		out.Witness = append(out.Witness, id)
	}
	if c.needsWitness(cc) {
		// Runs signed before another lab has seen the campaign would not count: claim
		// nothing until a witness comes (the claims heard meanwhile are kept, as while the
		// bundles were fetched).
		cc.awaiting = true
		out.RecomputeLedger = true
		return
	}
	if c.capsHold(out, cc) {
		out.RecomputeLedger = true
		return
	}
	c.handToMachine(out, cc, now)
}

// handToMachine gives a prepared campaign's slots to the claim machine.
func (c *Coordinator) handToMachine(out *CoordActions, cc *coordCampaign, now time.Time) {
	id := cc.spec.ID
	delete(c.pending, id)
	cc.awaiting = false
	cc.added = true
	out.Handed = append(out.Handed, id)
	if c.cfg.RequireClaimRecords {
		for i := range cc.spec.Slots {
			cc.spec.Slots[i].RecordedAttempt = c.recordMax[cc.spec.Slots[i].ID]
		}
	}
	c.step(out, c.cm.AddCampaign(cc.spec, now), now)
	// The claims heard while the bundles were fetched, before any claim made just now can
	// settle: a pending claim of ours yields to a live or earlier one among them.
	for _, m := range c.early[id] {
		c.step(out, c.cm.Receive(m, now), now)
	}
	delete(c.early, id)
	// Runs that arrived before the campaign finish their slots now, in slot order.
	for _, sid := range slices.Sorted(maps.Keys(c.bySlot)) {
		if c.slots[sid] != id {
			continue
		}
		if slices.ContainsFunc(c.bySlot[sid], func(r string) bool { return c.finishesSlot(c.runs[r]) }) {
			c.step(out, c.cm.SlotFinished(sid, "", now), now) // heard before the campaign: no claim could be
		}
	}
	out.RecomputeLedger = true
}

// Claim takes a claim message that passed the validator. A message of this node's lab
// marks its sender as a live node of the lab (the re-score split); one for a campaign
// being prepared is kept until the campaign is added.
func (c *Coordinator) Claim(m *ClaimMessage, now time.Time) CoordActions {
	var out CoordActions
	if m.Lab == c.cfg.Claims.Lab {
		c.labPeers[m.PeerID] = now
	}
	if c.pending[m.Campaign] {
		if len(c.early[m.Campaign]) < maxEarlyClaims {
			c.early[m.Campaign] = append(c.early[m.Campaign], m)
		} else {
			out.Declined = append(out.Declined, Declined{Input: "claim", ID: m.Slot, Why: "too many claims kept for a campaign being prepared"})
		}
		return out
	}
	if why := cmp.Or(c.releaseIgnored(m), c.scorerClaimIgnored(m)); why != "" {
		out.Ignored = append(out.Ignored, Ignored{Slot: m.Slot, Peer: m.PeerID, Why: why})
		return out
	}
	c.step(&out, c.cm.Receive(m, now), now)
	return out
}

// PeerHeard notes that peer, a node of lab, was heard from (a head): a live node of this
// node's lab shares its re-scores.
func (c *Coordinator) PeerHeard(peer, lab string, now time.Time) {
	if lab == c.cfg.Claims.Lab {
		c.labPeers[peer] = now
	}
}

// Run takes a verified run attestation: it finishes its slot when it counts here
// (finishesSlot), and may make this node a re-scorer of it.
func (c *Coordinator) Run(r RunHeard, now time.Time) CoordActions {
	var out CoordActions
	if _, ok := c.runs[r.ID]; ok {
		return out
	}
	if c.voided[r.ID] {
		out.Declined = append(out.Declined, Declined{Input: "run", ID: r.ID, Why: "voided by a revocation"})
		return out
	}
	r.Attempt = max(r.Attempt, 1)
	cr := &coordRun{RunHeard: r, firstSeen: now}
	c.runs[r.ID] = cr
	c.bySlot[r.SlotID] = append(c.bySlot[r.SlotID], r.ID)
	c.auditIndex(cr)
	if _, ok := c.slots[r.SlotID]; ok && c.finishesSlot(cr) {
		c.step(&out, c.cm.SlotFinished(r.SlotID, r.Node, now), now)
	}
	c.rescoreDuty(&out, cr, now)
	return out
}

// Rescore takes a verified re-score; a contradiction may bring this lab in
// (EscalatedReplication).
func (c *Coordinator) Rescore(rs RescoreHeard, now time.Time) CoordActions {
	var out CoordActions
	if slices.ContainsFunc(c.rescores[rs.Run], func(x RescoreHeard) bool { return x.ID == rs.ID }) {
		return out
	}
	c.rescores[rs.Run] = append(c.rescores[rs.Run], rs)
	if r, ok := c.runs[rs.Run]; ok {
		c.rescoreDuty(&out, r, now)
	}
	return out
}

// RescoreEnded says this node's re-score of runID is over (signed, or failed: it is
// retried at a later Tick while still due).
func (c *Coordinator) RescoreEnded(runID string) { delete(c.rescoring, runID) }

// Witness takes a verified witness record: a campaign of this node's lab that waited for it
// reaches the claim machine, and runs citing it that came before it finish their slots.
func (c *Coordinator) Witness(w WitnessHeard, now time.Time) CoordActions {
	var out CoordActions
	refs := c.witnesses[w.Campaign]
	if slices.ContainsFunc(refs, func(r coordWitness) bool { return r.id == w.ID }) {
		return out
	}
	c.witnesses[w.Campaign] = append(refs, coordWitness{id: w.ID, lab: w.Lab, node: w.Node, at: w.Time})
	if w.Node == c.cfg.Claims.Self {
		c.witnessed[w.Campaign] = true
	}
	cc := c.campaigns[w.Campaign]
	if cc == nil {
		return out
	}
	if cc.awaiting && c.WitnessFor(w.Campaign) != "" {
		cc.awaiting = false
		if !c.capsHold(&out, cc) {
			c.handToMachine(&out, cc, now)
		}
	}
	c.recheckCaps(&out, now)
	for _, id := range slices.Sorted(maps.Keys(c.runs)) {
		r := c.runs[id]
		if r.Witness == w.ID && r.Slot.Campaign == w.Campaign {
			if _, ok := c.slots[r.SlotID]; ok {
				c.step(&out, c.cm.SlotFinished(r.SlotID, r.Node, now), now)
			}
		}
	}
	return out
}

// WitnessFor is the witness record a run of campaign cites: the least ID among those by a
// lab other than the campaign's, or "" when there is none yet (or the campaign is not
// prepared).
func (c *Coordinator) WitnessFor(campaign string) string {
	cc := c.campaigns[campaign]
	if cc == nil {
		return ""
	}
	best := ""
	for _, r := range c.witnesses[campaign] {
		if r.lab != cc.c.Lab && (best == "" || r.id < best) {
			best = r.id
		}
	}
	return best
}

// finishesSlot says whether run r can finish its slot here: in a network that requires
// witnesses, only a run citing another lab's witness of its campaign counts, so only such a
// run finishes the slot (others would leave it to nobody).
//
// Where claim records are required, the run's node must also hold its attempt by them
// (coordinator_claimrec.go): a run from a node that never claimed the slot finishes nothing.
func (c *Coordinator) finishesSlot(r *coordRun) bool {
	if !c.heldByRecords(r) || c.scorerRan(r) {
		return false
	}
	if !c.cfg.RequireWitness {
		return true
	}
	cc := c.campaigns[r.Slot.Campaign]
	if cc == nil || r.Witness == "" {
		return false
	}
	return slices.ContainsFunc(c.witnesses[r.Slot.Campaign], func(w coordWitness) bool { return w.id == r.Witness && w.lab != cc.c.Lab })
}

// needsWitness: cc is this node's lab's campaign in a network that requires witnesses, and
// no other lab's witness of it is held yet.
func (c *Coordinator) needsWitness(cc *coordCampaign) bool {
	return c.cfg.RequireWitness && cc.c.Lab == c.cfg.Claims.Lab && c.WitnessFor(cc.spec.ID) == ""
}

// rescoreDuty asks for a re-score of r when this node's lab is among the labs due to
// re-score it (RescorersDue, with EscalatedReplication) and this node is the one of its lab
// that does it (designated).
func (c *Coordinator) rescoreDuty(out *CoordActions, r *coordRun, now time.Time) {
	lab := c.cfg.Claims.Lab
	if r.Lab == lab || c.rescoring[r.ID] {
		return
	}
	campaign, ok := c.slots[r.SlotID]
	if !ok || c.scorerDuty(out, r, now) {
		return
	}
	if c.cfg.RescorerDraw != nil {
		if c.drawnDue(r, now) && c.designated(drawKey(r), now) {
			c.rescoring[r.ID] = true
			out.Rescore = append(out.Rescore, r.ID)
		}
		return
	}
	done := map[string]bool{}
	against := map[string]bool{}
	runP := &attest.RunPredicate{Metric: r.Metric, Valid: r.Valid, Score: r.Score}
	for _, rs := range c.rescores[r.ID] {
		done[rs.Lab] = true
		if rs.Lab != r.Lab && !attest.Confirms(runP, &attest.RescorePredicate{Metric: rs.Metric, Valid: rs.Valid, Score: rs.Score}, attest.Agree) {
			against[rs.Lab] = true
		}
	}
	replication := EscalatedReplication(c.campaigns[campaign].c.Replication, len(against))
	if replication <= 0 || done[lab] {
		return
	}
	due := RescorersDue(r.ID, r.Lab, c.cfg.Labs, replication, done, now.Sub(r.firstSeen), c.cfg.RescoreTimeout)
	if !slices.Contains(due, lab) || !c.designated(r.ID, now) {
		return
	}
	c.rescoring[r.ID] = true
	out.Rescore = append(out.Rescore, r.ID)
}

// designated says whether this node is the one of its lab that re-scores the run keyed key
// (its ID; drawKey under drawn re-scorers): the first in rendezvous order among the lab's
// nodes heard from within two leases, so a lab of many nodes re-scores each run once.
func (c *Coordinator) designated(key string, now time.Time) bool {
	self := c.cfg.Claims.Self
	best, bestScore := self, RendezvousScore(key, self)
	lease := c.cm.Config().Lease
	for p, seen := range c.labPeers {
		if p == self || now.Sub(seen) > 2*lease {
			continue
		}
		if s := RendezvousScore(key, p); s > bestScore || (s == bestScore && p < best) {
			best, bestScore = p, s
		}
	}
	return best == self
}

// Tick moves the claim machine's timers on and re-checks every run's re-score duty (a
// silent re-scorer lab is replaced after RescoreTimeout).
func (c *Coordinator) Tick(now time.Time) CoordActions {
	var out CoordActions
	c.step(&out, c.cm.Tick(now), now)
	c.heldDuty(&out, now) // coordinator_audit.go
	c.dispatchAudits(&out, now)
	if len(c.runs) == 0 {
		return out
	}
	for _, id := range slices.Sorted(maps.Keys(c.runs)) {
		c.rescoreDuty(&out, c.runs[id], now)
	}
	return out
}

// RunStarted: the caller started the run of slotID the claim machine asked for.
func (c *Coordinator) RunStarted(slotID string, now time.Time) CoordActions {
	var out CoordActions
	c.clock.started(slotID, now)
	c.running[slotID] = true
	c.step(&out, c.cm.RunStarted(slotID, now), now)
	return out
}

// RunEnded: a run this node started ended (not one an Abort already ended). A run that
// waits for a sealed bundle's key is remembered: its slot is never claimed here again.
func (c *Coordinator) RunEnded(slotID string, attempt int, o RunOutcome, now time.Time) CoordActions {
	var out CoordActions
	if o.Kind == RunAwaitingKey {
		c.awaitKey[slotID] = attempt
	}
	o = c.GivenUp(slotID, attempt, o) // coordinator_claimrec.go
	if c.running[slotID] {
		delete(c.running, slotID)
		c.clock.unitFreed(now)
	}
	c.countOutcome(&out, o, now) // coordinator_health.go: before the machine claims the next
	c.step(&out, c.cm.RunEnded(slotID, o, now), now)
	return out
}

// KeyArrived: this node can now open the key of the sealed bundle task; the key holders'
// head start on its slots is lifted.
func (c *Coordinator) KeyArrived(task string, now time.Time) CoordActions {
	var out CoordActions
	found := false
	for _, cc := range c.campaigns {
		if cc.noKey[task] {
			delete(cc.noKey, task)
			found = true
		}
	}
	if found {
		c.step(&out, c.cm.KeyArrived(task, now), now)
	}
	return out
}

// NoKey says whether this node still cannot open the key of campaign's sealed task.
func (c *Coordinator) NoKey(campaign, task string) bool {
	cc := c.campaigns[campaign]
	return cc != nil && cc.noKey[task]
}

// WaitsForKey says whether some campaign's slots of the sealed task wait for its key here.
func (c *Coordinator) WaitsForKey(task string) bool {
	for _, cc := range c.campaigns {
		if cc.noKey[task] {
			return true
		}
	}
	return false
}

// AwaitingKey is the attempt of this node's run of slotID that waits for a key (0: none).
func (c *Coordinator) AwaitingKey(slotID string) int { return c.awaitKey[slotID] }

// OpenCapacity lets the node claim with capacity runs at once: after it replayed its store
// and reconciled once (a restarted node must learn what finished while it was away).
func (c *Coordinator) OpenCapacity(capacity int, now time.Time) CoordActions {
	var out CoordActions
	c.capacity = capacity
	c.clock.reset(capacity, now)
	c.capOpen = true
	c.step(&out, c.cm.SetCapacity(c.claimCapacity(), now), now)
	return out
}

// FreeCapacity takes what a shared cluster can start now besides this node's runs: the
// capacity becomes the runs held plus that. Before OpenCapacity it changes nothing; lowering
// it aborts no run, it only stops new claims until runs end.
func (c *Coordinator) FreeCapacity(free int, now time.Time) CoordActions {
	var out CoordActions
	n := len(c.running) + max(free, 0)
	if !c.capOpen || n == c.capacity {
		return out
	}
	c.clock.resize(n-c.capacity, now)
	c.capacity = n
	c.step(&out, c.cm.SetCapacity(c.claimCapacity(), now), now)
	return out
}

// DocumentMismatch stops (true) or resumes (false) claiming: a majority of the labs
// announces another network document (DocumentMajority). It reports whether that changed.
func (c *Coordinator) DocumentMismatch(mismatch bool, now time.Time) (CoordActions, bool) {
	var out CoordActions
	if mismatch == c.docHalt {
		return out, false
	}
	c.docHalt = mismatch
	if c.capOpen {
		c.step(&out, c.cm.SetCapacity(c.claimCapacity(), now), now)
	}
	return out, true
}

// claimCapacity is what the claim machine may hold: none while the network document
// differs from the majority's.
func (c *Coordinator) claimCapacity() int {
	if c.docHalt || c.stopped {
		return 0
	}
	return c.capacity
}

// SlotFinished tells the claim machine a slot's result is known by means the coordinator
// does not see (the simulator's abstract results; a daemon feeds Run instead).
func (c *Coordinator) SlotFinished(slotID, by string, now time.Time) CoordActions {
	var out CoordActions
	c.step(&out, c.cm.SlotFinished(slotID, by, now), now)
	return out
}

// Shutdown releases this node's claims.
func (c *Coordinator) Shutdown(now time.Time) CoordActions {
	var out CoordActions
	c.step(&out, c.cm.Shutdown(now), now)
	return out
}

// Capacity is the runs this node may hold at once (0 before OpenCapacity); Open whether
// OpenCapacity was called.
func (c *Coordinator) Capacity() int { return c.capacity }

// Open reports whether OpenCapacity was called.
func (c *Coordinator) Open() bool { return c.capOpen }

// Ready reports whether campaign id was handed to the claim machine.
func (c *Coordinator) Ready(id string) bool {
	cc := c.campaigns[id]
	return cc != nil && cc.added
}

// Status, Held, FreeSince and Config read the claim machine (ClaimMachine's methods).
func (c *Coordinator) Status(campaign string, now time.Time) (CampaignStatus, bool) {
	st, ok := c.cm.Status(campaign, now)
	if cc := c.campaigns[campaign]; ok && cc != nil {
		st.NotHere = len(cc.c.Spec.Slots) - len(cc.spec.Slots)
	}
	return st, ok
}

// Held is the claim machine's held slots, sorted.
func (c *Coordinator) Held() []string { return c.cm.Held() }

// FreeSince is when slotID became free, by the claim machine.
func (c *Coordinator) FreeSince(slotID string) time.Time { return c.cm.FreeSince(slotID) }

// ClaimConfig is the claim machine's configuration, defaults filled in.
func (c *Coordinator) ClaimConfig() ClaimConfig { return c.cm.Config() }

// ClaimToStart is the claim→start time of every run this node started, in order.
func (c *Coordinator) ClaimToStart() []time.Duration { return slices.Clone(c.clock.samples) }

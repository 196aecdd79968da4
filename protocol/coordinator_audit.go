package protocol

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/scoring"
)

// The coordinator's audit duty (issue 44; docs/scoring.md "Audits by re-execution"): for
// each verified run of another lab, the node's own VRF output over the run's slot, attempt
// and lab (attest.AuditDraw, computed by the caller with the node key: the coordinator
// stays pure and takes the draw as a value) decides whether this node's lab re-runs it
// (AuditDrawn under AuditThreshold of the run's λ). λ comes from the impact rule
// (ImpactWeight over the runner lab's runs of the agent, measured against the other labs'
// runs of it that this node has heard): results no other lab has a result of for the task
// are drawn at UnjudgedAudits (nothing says whether they are ordinary), others at rate ×
// weight. A lone mismatch escalates: two more labs, first in rendezvous order of the run
// among those that have not audited it, audit it whatever their draw. One node per lab
// does a lab's audits (designated, as for re-scores).
//
// The GPU work is bounded: at most MaxParallel audits run at once on a node (1 by
// default), none before the node opened its capacity (after replaying its store), an
// audit starts only while one of the node's claim units is idle (it never
// delays a claimed run), and a failed audit (no free GPU, say) is retried after Retry, at
// most AuditRetries times.

// AuditDutyConfig turns the audit duty on (Coordinator.EnableAudits).
type AuditDutyConfig struct {
	// Rate is the network's audit rate (NetworkDoc.AuditRate).
	Rate float64
	// MaxParallel is how many audits this node runs at once; 0 means 1.
	MaxParallel int
	// Retry is how long a failed audit waits before it is tried again; 0 means a minute.
	Retry time.Duration
	// MinSD floors a task's spread of results in the impact measure, in the metric's own
	// units; 0 means DefaultAuditMinSD.
	MinSD float64
	// HeldEpoch is how long a held mover (AuditHeld) waits with no audit heard before its
	// expected audits double (MoverLambda); 0 means DefaultHeldEpoch.
	HeldEpoch time.Duration
}

// DefaultHeldEpoch is the movers' doubling period on the daemons: a held result is drawn at
// RankMoveAudits (or its group's λ) at once, and each minute no lab's audit of it is heard
// its expectation doubles, so with L labs every lab is due within about log2(2·(L−1))
// minutes and no held result waits for good.
const DefaultHeldEpoch = time.Minute

// DefaultAuditMinSD is the impact measure's floor on a task's spread (scoring.DefaultAuditMinSD).
const DefaultAuditMinSD = scoring.DefaultAuditMinSD

// AuditRetries is how many times a failed audit is tried again before this node gives it
// up (another lab's draw or the escalation still covers the run).
const AuditRetries = 3

// AuditCandidate is a verified run of another lab (already given to Coordinator.Run) with
// this node's draw for it.
type AuditCandidate struct {
	Run string
	// Beta is this node's VRF output over the run's draw input (attest.AuditDraw).
	Beta []byte
}

// AuditHeard is a verified audit (attest.AuditPredicate) of run Run by lab Lab, with the
// verdict its auditor signed: escalation goes by it (it only costs more audits; the ledger
// judges proof itself).
type AuditHeard struct {
	ID, Run, Lab, Verdict string
}

// AuditRun asks the caller to re-execute a run: the same agent (the slot's agent spec, its
// image by ID), bundle (the slot's task) and seed, on this node's executor, then to sign
// an audit (attest.NewAudit) and report back with AuditEnded.
type AuditRun struct {
	Run     string
	Slot    attest.Slot
	SlotID  string
	Attempt int
	RunLab  string
	// Lambda is the expected audits of the run the draw was made at; 0 when Escalated (a
	// lone mismatch brought this lab in, whatever its draw).
	Lambda    float64
	Escalated bool
	// Held: the node's ledger holds the run as a mover (AuditHeld); Lambda is then the
	// movers' expectation it was drawn at.
	Held bool
}

type coordAudit struct {
	cfg      AuditDutyConfig
	byAgent  map[string][]string            // agent → IDs of valid, scored runs heard
	verdicts map[string]map[string][]string // run → lab → verdicts signed
	decided  map[string]bool                // runs drawn (or not) by this node
	done     map[string]bool                // runs this node's lab has audited, or this node gave up
	queue    []AuditRun
	retryAt  map[string]time.Time
	tries    map[string]int
	inFlight map[string]bool
	waiting  map[string][]AuditCandidate // campaign being prepared → draws for its runs
	signed   int
	beta     map[string][]byte    // run → this node's draw for it (AuditCandidate)
	held     map[string]time.Time // run held by the ledger as a mover → since when (AuditHeld)
}

// EnableAudits turns on this node's audit duty (the network document sets ledger.audits).
func (c *Coordinator) EnableAudits(cfg AuditDutyConfig) {
	if cfg.MaxParallel <= 0 {
		cfg.MaxParallel = 1
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Minute
	}
	if cfg.MinSD <= 0 {
		cfg.MinSD = DefaultAuditMinSD
	}
	if cfg.HeldEpoch <= 0 {
		cfg.HeldEpoch = DefaultHeldEpoch
	}
	c.audit = &coordAudit{cfg: cfg, byAgent: map[string][]string{}, verdicts: map[string]map[string][]string{},
		decided: map[string]bool{}, done: map[string]bool{}, retryAt: map[string]time.Time{}, tries: map[string]int{}, inFlight: map[string]bool{},
		waiting: map[string][]AuditCandidate{}, beta: map[string][]byte{}, held: map[string]time.Time{}}
	for _, id := range slices.Sorted(maps.Keys(c.runs)) {
		c.auditIndex(c.runs[id])
	}
}

// AuditsOn says whether the audit duty is on.
func (c *Coordinator) AuditsOn() bool { return c.audit != nil }

// AuditsSigned is how many audits this node finished (for the operator and the demo).
func (c *Coordinator) AuditsSigned() int {
	if c.audit == nil {
		return 0
	}
	return c.audit.signed
}

// AuditsPending is how many audits this node still owes: drawn or escalated and not yet
// signed or given up (queued, running, or waiting for a retry), plus draws waiting for
// their campaign to be prepared. The demo waits for it to reach 0 before it reports.
func (c *Coordinator) AuditsPending() int {
	if c.audit == nil {
		return 0
	}
	n := len(c.audit.queue) + len(c.audit.inFlight)
	for _, w := range c.audit.waiting {
		n += len(w)
	}
	return n
}

// auditIndex records a verified run for the impact measure (from Run).
func (c *Coordinator) auditIndex(r *coordRun) {
	if c.audit == nil || !r.Valid || r.Score == nil || math.IsNaN(*r.Score) {
		return
	}
	c.audit.byAgent[r.Slot.Agent] = append(c.audit.byAgent[r.Slot.Agent], r.ID)
}

// AuditCandidate takes this node's draw for a verified run of another lab: the run is
// queued for re-execution here when the draw falls under its threshold and this node is
// its lab's designated one.
func (c *Coordinator) AuditCandidate(in AuditCandidate, now time.Time) CoordActions {
	var out CoordActions
	a := c.audit
	r, ok := c.runs[in.Run]
	switch {
	case a == nil || !ok || a.decided[in.Run]:
		return out
	case r.Lab == c.cfg.Claims.Lab || r.Lab == "":
		return out // a lab does not audit itself; a directly trusted node has no lab to draw for
	case !r.Valid || r.Score == nil:
		return out // an invalid run lifts nothing
	}
	a.beta[in.Run] = in.Beta
	if c.campaigns[r.Slot.Campaign] == nil {
		// Not prepared here yet (a store replayed before its bundles came): drawn when it is.
		a.waiting[r.Slot.Campaign] = append(a.waiting[r.Slot.Campaign], in)
		return out
	}
	a.decided[in.Run] = true
	if why := c.cannotAudit(r); why != "" {
		out.Declined = append(out.Declined, Declined{Input: "audit", ID: in.Run, Why: why})
		return out
	}
	lambda := c.auditLambda(r)
	if !AuditDrawn(in.Beta, AuditThreshold(lambda, c.auditors(r))) || !c.designated(r.ID, now) {
		return out
	}
	c.queueAudit(AuditRun{Run: r.ID, Slot: r.Slot, SlotID: r.SlotID, Attempt: r.Attempt, RunLab: r.Lab, Lambda: lambda})
	c.dispatchAudits(&out, now)
	return out
}

// cannotAudit says why this node cannot re-run r ("" when it can): the agent needs a
// network, or this node refuses or cannot run the slot.
func (c *Coordinator) cannotAudit(r *coordRun) string {
	cc := c.campaigns[r.Slot.Campaign]
	switch {
	case cc == nil:
		return "its campaign is not prepared here"
	case cc.c.Unauditable[r.Slot.Agent]:
		return "its agent asks for a network: no re-run is alike"
	case cc.c.Refused[r.Slot.Agent]:
		return "this node's policy refuses its agent"
	case cc.c.Unrunnable[r.SlotID] != "":
		return "this node cannot run its slot: " + cc.c.Unrunnable[r.SlotID]
	}
	return ""
}

// auditLambda is the expected audits of run r by the impact rule, over the runs heard: the
// runner lab's runs of the agent not cleared by audits, against other labs' runs of it.
// The rank-move rule needs the agents' ranks, which the ledger has and the coordinator does
// not: here a group's deviation raises its weight, and a result no other lab's result of
// the task can judge is drawn at UnjudgedAudits.
func (c *Coordinator) auditLambda(r *coordRun) float64 {
	a := c.audit
	var pending []TaskScore
	k := -1
	byTask := map[string][]float64{}
	agentResults := 0
	for _, id := range a.byAgent[r.Slot.Agent] {
		x := c.runs[id]
		agentResults++
		if x.Lab != r.Lab {
			byTask[x.Slot.Task] = append(byTask[x.Slot.Task], *x.Score)
			continue
		}
		if id != r.ID && DecideAudits(a.verdicts[id]) == AuditCleared {
			continue
		}
		if id == r.ID {
			k = len(pending)
		}
		pending = append(pending, TaskScore{Task: x.Slot.Task, Score: *x.Score})
	}
	if k < 0 { // r itself was not indexed (enabled after it): measure it alone
		k = len(pending)
		pending = append(pending, TaskScore{Task: r.Slot.Task, Score: *r.Score})
		agentResults++
	}
	ref := make([]TaskStats, 0, len(byTask))
	for _, task := range slices.Sorted(maps.Keys(byTask)) {
		ref = append(ref, scoring.StatsOf(task, byTask[task]))
	}
	imp := ImpactWeight(pending, ref, agentResults, math.Inf(1), math.Inf(1), a.cfg.Rate, a.cfg.MinSD)
	if slices.Contains(imp.Unreferenced, k) {
		return UnjudgedAudits
	}
	return imp.LambdaOf(k)
}

// auditCampaignAdded draws the runs of campaign id whose draws waited for it (AddCampaign).
func (c *Coordinator) auditCampaignAdded(out *CoordActions, id string, now time.Time) {
	if c.audit == nil || len(c.audit.waiting[id]) == 0 {
		return
	}
	waiting := c.audit.waiting[id]
	delete(c.audit.waiting, id)
	for _, in := range waiting {
		a := c.AuditCandidate(in, now)
		out.Audit = append(out.Audit, a.Audit...)
		out.Declined = append(out.Declined, a.Declined...)
	}
}

// Audit takes a verified audit: an audit by this node's lab marks the run audited; a lone
// mismatch that no majority decides brings in two more labs, first in rendezvous order of
// the run among those that have not audited it, and this node does it when its lab is one
// of them.
func (c *Coordinator) Audit(h AuditHeard, now time.Time) CoordActions {
	var out CoordActions
	a := c.audit
	if a == nil {
		return out
	}
	if a.verdicts[h.Run] == nil {
		a.verdicts[h.Run] = map[string][]string{}
	}
	if slices.Contains(a.verdicts[h.Run][h.Lab], h.Verdict) {
		return out
	}
	a.verdicts[h.Run][h.Lab] = append(a.verdicts[h.Run][h.Lab], h.Verdict)
	lab := c.cfg.Claims.Lab
	if h.Lab == lab {
		a.done[h.Run] = true
		return out
	}
	r, ok := c.runs[h.Run]
	if !ok || r.Lab == lab || a.done[h.Run] || a.inFlight[h.Run] || c.queued(h.Run) {
		return out
	}
	if !slices.Contains(c.escalatedLabs(h.Run, r.Lab), lab) || !c.designated(r.ID, now) {
		return out
	}
	if why := c.cannotAudit(r); why != "" {
		out.Declined = append(out.Declined, Declined{Input: "escalated audit", ID: h.Run, Why: why})
		return out
	}
	c.queueAudit(AuditRun{Run: r.ID, Slot: r.Slot, SlotID: r.SlotID, Attempt: r.Attempt, RunLab: r.Lab, Escalated: true})
	c.dispatchAudits(&out, now)
	return out
}

// escalatedLabs are the labs due to audit run (of runLab) because of a lone mismatch: none
// while no lab found only a mismatch or the audits are decided; otherwise the two labs,
// other than the runner's and those that audited it, first in rendezvous order of the run.
func (c *Coordinator) escalatedLabs(run, runLab string) []string {
	vs := c.audit.verdicts[run]
	mismatch := false
	for _, v := range vs {
		if slices.Contains(v, attest.VerdictMismatch) && !slices.Contains(v, attest.VerdictMatch) {
			mismatch = true
		}
	}
	if !mismatch || DecideAudits(vs) != AuditOpen {
		return nil
	}
	var cand []string
	for _, l := range c.cfg.Labs {
		if _, audited := vs[l]; l != runLab && !audited {
			cand = append(cand, l)
		}
	}
	slices.SortFunc(cand, func(x, y string) int {
		sx, sy := RendezvousScore(run, x), RendezvousScore(run, y)
		switch {
		case sx > sy:
			return -1
		case sx < sy:
			return 1
		}
		return 0
	})
	return cand[:min(2, len(cand))]
}

func (c *Coordinator) queued(run string) bool {
	return slices.ContainsFunc(c.audit.queue, func(q AuditRun) bool { return q.Run == run })
}

func (c *Coordinator) queueAudit(r AuditRun) {
	if c.audit.done[r.Run] || c.audit.inFlight[r.Run] || c.queued(r.Run) {
		return
	}
	c.audit.queue = append(c.audit.queue, r)
}

// AuditEnded says this node's audit of run is over: signed (ok), or failed, when it is
// retried after Retry up to AuditRetries times.
func (c *Coordinator) AuditEnded(run string, ok bool, now time.Time) CoordActions {
	var out CoordActions
	a := c.audit
	if a == nil || !a.inFlight[run] {
		return out
	}
	delete(a.inFlight, run)
	if ok {
		a.done[run] = true
		a.signed++
	} else if a.tries[run]++; a.tries[run] > AuditRetries {
		a.done[run] = true
		out.Declined = append(out.Declined, Declined{Input: "audit", ID: run, Why: fmt.Sprintf("failed %d times: given up", a.tries[run])})
	} else if r, ok := c.runs[run]; ok {
		a.retryAt[run] = now.Add(a.cfg.Retry)
		a.queue = append(a.queue, AuditRun{Run: run, Slot: r.Slot, SlotID: r.SlotID, Attempt: r.Attempt, RunLab: r.Lab, Escalated: true})
	}
	c.dispatchAudits(&out, now)
	return out
}

// dispatchAudits starts queued audits, in order, while fewer than MaxParallel run here and
// a claim unit is idle, once capacity is open: a restarted node first replays its store,
// where it hears the audits its lab already signed (and does not run them again).
func (c *Coordinator) dispatchAudits(out *CoordActions, now time.Time) {
	a := c.audit
	if a == nil || !c.capOpen {
		return
	}
	var rest []AuditRun
	for _, q := range a.queue {
		switch {
		case a.done[q.Run]:
			continue
		case len(a.inFlight) >= a.cfg.MaxParallel || len(c.running) >= max(c.capacity, 1) || now.Before(a.retryAt[q.Run]):
			rest = append(rest, q)
			continue
		}
		a.inFlight[q.Run] = true
		out.Audit = append(out.Audit, q)
	}
	a.queue = rest
}

// AuditDrawValue turns a fraction u in [0, 1) into a VRF-output-shaped draw: what
// AuditDrawn reads of it is u. For scripts and simulators that stand in for real draws.
func AuditDrawValue(u float64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint64(b, uint64(u*(1<<53))<<11)
	return b
}

// auditors is how many labs other than r's can audit it.
func (c *Coordinator) auditors(r *coordRun) int {
	n := 0
	for _, l := range c.cfg.Labs {
		if l != r.Lab {
			n++
		}
	}
	return n
}

// AuditHeld takes the runs the node's ledger holds as movers (attest.LedgerReport.Held:
// results that would move their agent's rank do not count until audited). The ledger
// decides what is held; the coordinator only draws their audits, at the movers' rate: this
// node's same draw (its VRF output for the run, AuditCandidate) against the threshold of
// MoverLambda(λ, epochs held with no audit heard), so the lab with the smallest draw comes
// first and each HeldEpoch without an audit brings the next. A run no longer held is
// forgotten; one held again starts over. Each call replaces the held set.
func (c *Coordinator) AuditHeld(runs []string, now time.Time) CoordActions {
	var out CoordActions
	a := c.audit
	if a == nil {
		return out
	}
	held := make(map[string]time.Time, len(runs))
	for _, id := range runs {
		since, ok := a.held[id]
		if !ok {
			since = now
		}
		held[id] = since
	}
	a.held = held
	c.heldDuty(&out, now)
	return out
}

// heldDuty draws the held movers' audits at their present thresholds (AuditHeld, Tick).
func (c *Coordinator) heldDuty(out *CoordActions, now time.Time) {
	a := c.audit
	if a == nil || len(a.held) == 0 {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(a.held)) {
		r, ok := c.runs[id]
		beta := a.beta[id]
		switch {
		case !ok || beta == nil || r.Lab == c.cfg.Claims.Lab:
			continue // not another lab's run drawn here
		case a.done[id] || a.inFlight[id] || c.queued(id):
			continue
		case len(a.verdicts[id]) > 0:
			continue // audited: the doubling is for a mover no lab was drawn for
		case c.cannotAudit(r) != "":
			continue // declined when first drawn
		}
		epochs := int(now.Sub(a.held[id]) / a.cfg.HeldEpoch)
		lambda := MoverLambda(c.auditLambda(r), epochs)
		if !AuditDrawn(beta, AuditThreshold(lambda, c.auditors(r))) || !c.designated(r.ID, now) {
			continue
		}
		c.queueAudit(AuditRun{Run: r.ID, Slot: r.Slot, SlotID: r.SlotID, Attempt: r.Attempt, RunLab: r.Lab, Lambda: lambda, Held: true})
	}
	c.dispatchAudits(out, now)
}

package attest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/scoring"
)

// AcceptPolicy is the acceptance policy of docs/design.md §7: which reconciled runs count for the
// ledger. Like the scoring options it is an input of the ledger, so every node of a network
// must use the same one to reach the same root.
type AcceptPolicy struct {
	// Replication is how many labs other than the run's own must have re-scored its
	// submission to the same value (Outcome.Replicators). 0, the default, counts a run on
	// its own signature.
	Replication int
	// Tasks maps a task bundle CID (Slot.Task) to the task's name in the ledger. A run of a
	// bundle not in the map does not count ("its referenced bundle exists"). nil takes
	// Slot.Task as the name, for slots that already name tasks.
	Tasks map[string]string
	// Agents maps an agent spec CID (Slot.Agent) to the agent's name in the ledger; a run
	// of an agent not in the map does not count. nil takes the CID itself as the name.
	Agents map[string]string
	// Campaigns maps a campaign ID (Slot.Campaign) to its window: a run counts only if the
	// start and end it claims lie inside [Created, Deadline]. nil checks no window; non-nil,
	// a run of a campaign not in the map does not count (ExcludeUnknownCampaign).
	Campaigns map[string]CampaignWindow
	// AllowProcessRuns counts runs that were not isolated in a container (the process
	// executor, or an attestation older than RunPredicate.Executor, which says nothing).
	// By default only runs with Executor.Isolation == IsolationContainer count: under the
	// process executor an agent can read the task's private labels. A network (or the demo)
	// that opts in should say so wherever it shows the ledger.
	AllowProcessRuns bool
	// MaxAgentsPerLab and MaxCampaignsPerLab are caps at admission (AdmitCampaigns): a
	// lab's campaigns are admitted one by one in an order nobody at the lab chooses (when
	// other labs witnessed them, then campaign ID), and a campaign that would take its lab
	// past MaxAgentsPerLab distinct agent specs or MaxCampaignsPerLab campaigns is refused
	// as a whole: none of its runs count (ExcludeCampaignOverCap). No run of an admitted
	// campaign is ever dropped, and a later campaign never displaces an earlier one, so a
	// lab cannot choose which of its results count by naming agents or grinding IDs. 0 is
	// no cap. They need Campaigns (with CampaignWindow.Agents); without it they do nothing.
	MaxAgentsPerLab    int
	MaxCampaignsPerLab int
	// RequireEnforcedLimits counts a run only if its executor says it applied the task's
	// resource limits (ExecutorInfo.Limits other than "none" or empty): a rootless engine on
	// cgroup v1 runs containers without memory, CPU or pids limits, so a run there may have
	// used more than the task allows (ExcludeUnlimited).
	RequireEnforcedLimits bool
	// RequireWitness counts a run only if it cites (RunPredicate.Witness) a witness record
	// in the set of its campaign by a lab other than the campaign's (CampaignWindow.Lab):
	// proof that it was signed after another lab had seen the campaign. Needs Campaigns.
	RequireWitness bool
	// RequireClaimRecords counts a run only if its node holds its (slot, attempt) by the
	// claim records in the set (Outcome.Holders, claimrec.go): a run from a node that never
	// claimed the slot, or whose claim a better-ranked one displaced, is ExcludeNotHolder.
	RequireClaimRecords bool
	// AgentOwners maps an agent spec CID to the name of the lab that answers for it (the
	// lab of the first campaign, by creation then ID, that lists it). It qualifies display
	// names that collide (UniqueNames): results aggregate by spec CID, never by name.
	AgentOwners map[string]string
	// SetAsideOffenders applies the consequence of proven misbehaviour (ProvenMisconduct): every
	// run of an offending principal is set aside (ExcludeOffender) unless its evidence is
	// Pardoned. A network document turns it on by default (ledger.misconduct).
	SetAsideOffenders bool
	// RescorerDraw, when not nil, limits the vote on each run to the labs drawn to re-score
	// it (Outcome.WithRescorerDraw, RescoreVoters): a re-score from a lab that was not drawn,
	// nor stood in for a silent drawn lab, neither confirms nor contradicts (Outcome.NoVotes).
	// nil: every lab that re-scored a run votes (networks before ledger.rescorers).
	RescorerDraw *RescorerDraw
	// Pardoned lists the IDs of offending envelopes (Misconduct.Evidence) that no longer
	// carry the consequence: a network document change restored their lab.
	Pardoned map[string]bool
	// Audits applies audits by re-execution (audit_ledger.go); nil, where the network
	// document sets no ledger.audits, ignores audit statements, so older networks' roots
	// do not move.
	Audits *AuditRules
	// Scorers maps a sealed task's bundle CID (Slot.Task) to the lab IDs that score it, sorted
	// (the network document's ledger.scorers; scorers.go): a run of it counts only from a
	// lab not among them, signed without a score (RunPredicate.ScoreAbsent), with the
	// verdict of at least ScorersNeeded of them as its result. nil: every task is scored by
	// its runner, as before the field.
	Scorers map[string][]string
}

// CampaignWindow is when a campaign takes runs: from its creation to its deadline, both as
// the lab-signed campaign states them.
type CampaignWindow struct {
	Created  time.Time
	Deadline time.Time
	// Lab is the lab ID that signed the campaign: its own witness records do not count for
	// its campaign (AcceptPolicy.RequireWitness).
	Lab string
	// Agents are the agent spec CIDs the campaign lists, in any order: what it adds to its
	// lab's agents under AcceptPolicy.MaxAgentsPerLab.
	Agents []string
	// Deterministic are the listed agents whose spec declares them deterministic (their
	// audits compare submissions); Unauditable those no other lab can re-run (their spec
	// asks for a network). Both sorted; read only under AcceptPolicy.Audits.
	Deterministic []string
	Unauditable   []string
}

// ExcludeReason says why a run attestation does not count. The strings are stable: the CLI
// and reports show them.
type ExcludeReason string

const (
	// ExcludeEquivocation: its principal signed another run of the same slot with a
	// different submission (Outcome.Equivocations holds the proof).
	ExcludeEquivocation ExcludeReason = "equivocation"
	// ExcludeDuplicate: the same principal's same submission for the slot is already
	// counted under another ID (re-signed or re-published); counting it twice would weigh
	// the run double.
	ExcludeDuplicate ExcludeReason = "duplicate of a counted run"
	// ExcludeLaterAttempt: the same principal has a run of a lower attempt of the slot,
	// which is the one that counts (Reconcile): re-running a slot cannot pick the best try.
	ExcludeLaterAttempt ExcludeReason = "a lower attempt of the slot counts"
	// ExcludeNotIsolated: the run was not isolated in a container (AcceptPolicy.AllowProcessRuns).
	ExcludeNotIsolated ExcludeReason = "not isolated"
	// ExcludeUnlimited: the run's executor did not enforce its resource limits
	// (AcceptPolicy.RequireEnforcedLimits).
	ExcludeUnlimited ExcludeReason = "resource limits not enforced"
	// ExcludeUnknownCampaign: AcceptPolicy.Campaigns is given and does not hold the slot's
	// campaign, so the run's window cannot be checked.
	ExcludeUnknownCampaign ExcludeReason = "unknown campaign"
	// ExcludeOutsideCampaign: the run's claimed start or end lies outside its campaign's
	// window (created … deadline).
	ExcludeOutsideCampaign ExcludeReason = "outside the campaign window"
	// ExcludeUnwitnessed: the run cites no witness record of its campaign by a lab other
	// than the campaign's (AcceptPolicy.RequireWitness): nothing shows it was signed after
	// another lab had seen the campaign.
	ExcludeUnwitnessed ExcludeReason = "its campaign was not witnessed by another lab when it was signed"
	// ExcludeNotHolder: the run's node does not hold its slot's attempt by the claim
	// records (AcceptPolicy.RequireClaimRecords): no valid claim record of it, or another
	// node's record ranks first (ClaimRank). A result must come from its claim's holder.
	ExcludeNotHolder ExcludeReason = "its node does not hold the slot's attempt by the claim records"
	// ExcludeCampaignOverCap: the run's campaign was refused at admission
	// (AdmitCampaigns): admitting it would have taken its lab past
	// AcceptPolicy.MaxAgentsPerLab agents or MaxCampaignsPerLab campaigns.
	ExcludeCampaignOverCap ExcludeReason = "its campaign is over its lab's cap"
	// ExcludeUnknownTask: the slot's task bundle is not one the ledger scores.
	ExcludeUnknownTask ExcludeReason = "unknown task bundle"
	// ExcludeUnknownAgent: the slot's agent spec is not one the ledger knows.
	ExcludeUnknownAgent ExcludeReason = "unknown agent"
	// ExcludeDisputed: re-scores contradict the run (other validity, other metric, or a
	// score beyond the metric's tolerance) and the vote does not carry it: one vote per
	// lab, the run's own lab voting for it, each other lab that re-scored it voting as it
	// found; the majority decides and a tie holds the run aside until more labs re-score
	// it (Tally). A lab on the losing side leaves signed evidence against itself.
	ExcludeDisputed ExcludeReason = "disagreeing re-score"
	// ExcludeOffender: the run's principal is proven to have misbehaved (Misconduct) and
	// the policy sets its results aside (AcceptPolicy.SetAsideOffenders).
	ExcludeOffender ExcludeReason = "its lab's results are set aside for misconduct"
	// ExcludeWithdrawn: the run's principal equivocated on the same task, agent and seed
	// (in this or another campaign): equivocating must not let a lab withdraw a result and
	// fill its cell again with another try.
	ExcludeWithdrawn ExcludeReason = "its lab equivocated on this task, agent and seed"
	// ExcludeTooFewReplicators: fewer than Replication other labs confirmed the score.
	ExcludeTooFewReplicators ExcludeReason = "too few replicators"
	// ExcludeScorerRan: the run's lab is one of its task's scoring labs
	// (AcceptPolicy.Scorers): it holds the labels, so it may score the task but not run it.
	ExcludeScorerRan ExcludeReason = "its lab scores the task and may not run it"
	// ExcludeRunnerScored: a run of a task with scoring labs signed a score of its own
	// instead of leaving it to them (RunPredicate.ScoreAbsent).
	ExcludeRunnerScored ExcludeReason = "its runner scored a task only its scoring labs score"
	// ExcludeUnscored: a run signed without a score whose verdict is not decided: its task
	// names no scoring labs, or fewer than ScorersNeeded of them agree yet.
	ExcludeUnscored ExcludeReason = "awaiting its scoring labs' verdict"
	// ExcludeSuperseded: another counted run (another lab's, or another campaign's) fills
	// the same (task, agent, seed) of the ledger, which holds one result per seed. The
	// winner is decided by nothing the runner can choose (FillOrder): the earliest
	// campaign, then the lowest attempt, then a hash of the slot, attempt and principal.
	ExcludeSuperseded ExcludeReason = "another run fills the same task, agent and seed"
)

// Excluded is a run attestation that verified but does not count, and why.
type Excluded struct {
	ID        string        `json:"id"`
	Slot      Slot          `json:"slot"`
	Principal string        `json:"principal"`
	Reason    ExcludeReason `json:"reason"`
	// Detail names the other party: the other envelope, the re-scorer, the counts.
	Detail string `json:"detail,omitempty"`
}

// Agree is the AgreeFunc the ledger reconciles with: two raw scores agree when they differ by
// at most the metric's re-score tolerance (scoring.LookupMetric). An unknown metric has no
// tolerance, so only equal scores agree.
func Agree(metric string, a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	tol := 0.0
	if m, ok := scoring.LookupMetric(metric); ok {
		tol = m.Tolerance
	}
	return a == b || math.Abs(a-b) <= tol
}

// StatusInvalid is a counted run's status when it was not valid and gave no reason.
const StatusInvalid = "INVALID"

// Accept applies the acceptance policy to a reconciled set of attestations: every counted
// run that passes it becomes one scoring.Result (task and agent named through p, seed from
// the slot; status SUCCESS when the run is valid with a finite score, else its invalid
// reason), and every run attestation that does not count is listed once with its reason.
// Statements of other predicate types and re-scores are neither: they are not runs.
//
// It is a pure function of its inputs. Results are sorted by (task, agent, seed), excluded
// runs by ID, so any order of the same envelopes gives the same output; the results hold at
// most one per (task, agent, seed), as scoring.ComputeLedger requires.
func Accept(o Outcome, p AcceptPolicy) ([]scoring.Result, []Excluded) {
	o = o.WithUnblockedAttempts(p)
	if p.RescorerDraw != nil && o.voters == nil {
		o = o.WithRescorerDraw(p.RescorerDraw)
	}
	var excluded []Excluded
	exclude := func(v *Verified, slot Slot, r ExcludeReason, detail string) {
		excluded = append(excluded, Excluded{ID: v.ID, Slot: slot, Principal: v.Principal(), Reason: r, Detail: detail})
	}

	// Equivocations: a group of three or more yields several pairs sharing A; list each
	// envelope once.
	seen := map[string]bool{}
	for _, e := range o.Equivocations {
		for _, x := range [][3]string{{e.A, e.B, e.SubmissionA}, {e.B, e.A, e.SubmissionB}} {
			if seen[x[0]] {
				continue
			}
			seen[x[0]] = true
			excluded = append(excluded, Excluded{ID: x[0], Slot: e.Slot, Principal: e.Principal,
				Reason: ExcludeEquivocation, Detail: fmt.Sprintf("same slot signed with another submission in %s", x[1])})
		}
	}

	// A duplicate repeats the counted run of its slot and principal.
	type slotOf struct {
		slot      Slot
		principal string
	}
	var holders map[Attempt]*Verified
	runs, later := o.Runs, o.LaterAttempts // unblocked above (WithUnblockedAttempts)
	if p.RequireClaimRecords {
		holders = o.Holders(p)
	}
	countedIn := make(map[slotOf]string, len(runs))
	for _, v := range runs {
		countedIn[slotOf{v.Run.Slot, v.Principal()}] = v.ID
	}
	for _, v := range o.Duplicates {
		exclude(v, v.Run.Slot, ExcludeDuplicate, "counted: "+countedIn[slotOf{v.Run.Slot, v.Principal()}])
	}
	for _, v := range later {
		exclude(v, v.Run.Slot, ExcludeLaterAttempt, fmt.Sprintf("attempt %d; counted: %s", v.Run.AttemptNumber(), countedIn[slotOf{v.Run.Slot, v.Principal()}]))
	}
	for _, v := range o.Forfeited {
		exclude(v, v.Run.Slot, ExcludeEquivocation, fmt.Sprintf("attempt %d; its principal equivocated on another attempt of the slot", v.Run.AttemptNumber()))
	}

	disputes := map[string][]string{}
	for _, d := range o.Disagreements {
		disputes[d.Run] = append(disputes[d.Run], fmt.Sprintf("%s by %s", d.Rescore, d.By))
	}
	offenders := append(ProvenMisconduct(o), ScorerMisconduct(o, p)...)
	var audits auditJudgement
	if p.Audits != nil {
		audits = o.judgeAudits(p)
		offenders = append(offenders, audits.misconduct...)
	}
	setAside := map[string]string{} // principal → the evidence that sets it aside
	if p.SetAsideOffenders {
		for _, m := range offenders {
			if _, done := setAside[m.Principal]; !done && !p.Pardoned[m.Evidence] {
				setAside[m.Principal] = fmt.Sprintf("%s (%s)", m.Kind, m.Evidence)
			}
		}
	}
	// A principal that equivocated on a slot cannot fill that slot's cell again from any
	// campaign: equivocating would otherwise withdraw a result and buy another try.
	withdrawn := map[cellKey]bool{}
	for _, e := range o.Equivocations {
		withdrawn[cellKey{e.Slot.Task, e.Slot.Agent, e.Slot.Seed, e.Principal}] = true
	}
	agentNames := p.Agents
	if agentNames != nil {
		agentNames = UniqueNames(p.Agents, p.AgentOwners)
	}

	type candidate struct {
		r     scoring.Result
		v     *Verified
		order FillKey
	}
	type cell struct {
		task, agent string
		seed        int
	}
	overCap := o.AdmitCampaigns(p)
	var passed []candidate
	for _, v := range runs {
		rp := v.Run
		task, agent := rp.Slot.Task, rp.Slot.Agent
		if p.Tasks != nil {
			name, ok := p.Tasks[task]
			if !ok {
				exclude(v, rp.Slot, ExcludeUnknownTask, "bundle "+task)
				continue
			}
			task = name
		}
		if agentNames != nil {
			name, ok := agentNames[agent]
			if !ok {
				exclude(v, rp.Slot, ExcludeUnknownAgent, "agent "+agent)
				continue
			}
			agent = name
		}
		scorers := p.Scorers[rp.Slot.Task]
		if scorers != nil {
			if r, why := scorerRule(v, scorers); r != "" {
				exclude(v, rp.Slot, r, why)
				continue
			}
		}
		var window *CampaignWindow
		if p.Campaigns != nil {
			w, ok := p.Campaigns[rp.Slot.Campaign]
			if !ok {
				exclude(v, rp.Slot, ExcludeUnknownCampaign, "campaign "+rp.Slot.Campaign)
				continue
			}
			if why, out := overCap[rp.Slot.Campaign]; out {
				exclude(v, rp.Slot, ExcludeCampaignOverCap, why)
				continue
			}
			if rp.Start.Before(w.Created) || rp.End.After(w.Deadline) {
				exclude(v, rp.Slot, ExcludeOutsideCampaign, fmt.Sprintf("run claims %s … %s, campaign %s runs %s … %s",
					rp.Start.UTC().Format(time.RFC3339), rp.End.UTC().Format(time.RFC3339), rp.Slot.Campaign,
					w.Created.UTC().Format(time.RFC3339), w.Deadline.UTC().Format(time.RFC3339)))
				continue
			}
			window = &w
			if p.RequireWitness {
				if why := o.unwitnessed(v, w); why != "" {
					exclude(v, rp.Slot, ExcludeUnwitnessed, why)
					continue
				}
			}
		}
		if p.RequireClaimRecords {
			if why := notHolder(v, holders); why != "" {
				exclude(v, rp.Slot, ExcludeNotHolder, why)
				continue
			}
		}
		if !p.AllowProcessRuns && (rp.Executor == nil || rp.Executor.Isolation != IsolationContainer) {
			detail := "the attestation does not say how the run was isolated (signed before executor was recorded)"
			if rp.Executor != nil {
				detail = fmt.Sprintf("executor %q, isolation %q; this network counts only %q runs", rp.Executor.Name, rp.Executor.Isolation, IsolationContainer)
			}
			exclude(v, rp.Slot, ExcludeNotIsolated, detail)
			continue
		}
		if p.RequireEnforcedLimits && (rp.Executor == nil || rp.Executor.Limits == "" || rp.Executor.Limits == "none") {
			detail := "the attestation does not say how limits were applied"
			if rp.Executor != nil {
				detail = fmt.Sprintf("executor %q (engine %q) applied limits %q; this network counts only runs with enforced limits", rp.Executor.Name, rp.Executor.Engine, rp.Executor.Limits)
			}
			exclude(v, rp.Slot, ExcludeUnlimited, detail)
			continue
		}
		if why, ok := setAside[v.Principal()]; ok {
			exclude(v, rp.Slot, ExcludeOffender, why)
			continue
		}
		if p.Audits != nil {
			if r, why := audits.exclusion(v, window, p.Audits); r != "" {
				exclude(v, rp.Slot, r, why)
				continue
			}
		}
		if withdrawn[cellKey{rp.Slot.Task, rp.Slot.Agent, rp.Slot.Seed, v.Principal()}] {
			exclude(v, rp.Slot, ExcludeWithdrawn, "equivocation evidence names this slot's task, agent and seed")
			continue
		}
		if rp.ScoreAbsent {
			// Scored by the task's scoring labs, not by its runner: their verdict is the
			// result, and their agreement stands for the replication (scorers.go).
			if scorers == nil {
				exclude(v, rp.Slot, ExcludeUnscored, "the run signed no score and the network document names no scoring labs for its task (ledger.scorers)")
				continue
			}
			d := o.Verdict(v.ID, scorers, p.Replication)
			if !d.Decided {
				exclude(v, rp.Slot, ExcludeUnscored, verdictDetail(d))
				continue
			}
			order := fillKey(v, window)
			if p.RequireWitness && window != nil {
				order.Created = o.witnessedAt(rp.Slot.Campaign, window.Lab, window.Created)
			}
			passed = append(passed, candidate{r: verdictResult(v, task, agent, d), v: v, order: order})
			continue
		}
		t := o.Tally(v.ID)
		if t.Against > 0 && t.For <= t.Against {
			verdict := "a majority of labs contradicts it"
			if t.For == t.Against {
				verdict = "a tie: held aside until more labs re-score it"
			}
			exclude(v, rp.Slot, ExcludeDisputed, fmt.Sprintf("%s (%d for, %d against: %s)", verdict, t.For, t.Against, joinSorted(disputes[v.ID])))
			continue
		}
		reps := len(t.Confirming) // o.Replicators(v.ID), already counted by the tally
		if reps < p.Replication {
			exclude(v, rp.Slot, ExcludeTooFewReplicators, fmt.Sprintf("%d of %d other labs agree", reps, p.Replication))
			continue
		}
		order := fillKey(v, window)
		if p.RequireWitness && window != nil {
			order.Created = o.witnessedAt(rp.Slot.Campaign, window.Lab, window.Created)
		}
		passed = append(passed, candidate{r: toResult(v, task, agent), v: v, order: order})
	}
	best := map[cell]candidate{}
	var losers []candidate
	for _, c := range passed {
		k := cell{c.r.Task, c.r.Agent, c.r.Seed}
		prev, ok := best[k]
		switch {
		case !ok:
			best[k] = c
		case c.order.Less(prev.order):
			best[k] = c
			losers = append(losers, prev)
		default:
			losers = append(losers, c)
		}
	}
	for _, l := range losers {
		k := cell{l.r.Task, l.r.Agent, l.r.Seed}
		exclude(l.v, l.v.Run.Slot, ExcludeSuperseded, "counted: "+best[k].v.ID)
	}

	results := make([]scoring.Result, 0, len(best))
	for _, c := range best {
		results = append(results, c.r)
	}
	slices.SortFunc(results, func(a, b scoring.Result) int {
		return cmp.Or(cmp.Compare(a.Task, b.Task), cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Seed, b.Seed))
	})
	slices.SortFunc(excluded, func(a, b Excluded) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Reason, b.Reason))
	})
	return results, excluded
}

// cellKey is one principal's (task bundle, agent spec, seed): the ledger cell it may fill once.
type cellKey struct {
	task, agent string
	seed        int
	principal   string
}

// FillKey orders the runs that could fill one (task, agent, seed) cell; the least fills it.
// Nothing in it can be chosen by the lab that signed the run once its campaign exists: not
// its attestation ID (a runner re-signs until an ID sorts low) and not how many labs chose
// to re-score it. Created is the campaign's creation as its own lab signed it, or, where
// witnesses are required, when other labs witnessed it (Outcome.witnessedAt), which the
// campaign's lab cannot backdate.
type FillKey struct {
	Created  time.Time // the campaign's creation (zero when the ledger has no windows)
	Campaign string
	Attempt  int
	Draw     [32]byte // sha256(slot ‖ attempt ‖ principal): fixed by who ran which attempt
}

// Less reports whether k fills a cell before o.
func (k FillKey) Less(o FillKey) bool {
	if c := k.Created.Compare(o.Created); c != 0 {
		return c < 0
	}
	return cmp.Or(cmp.Compare(k.Campaign, o.Campaign), cmp.Compare(k.Attempt, o.Attempt), bytes.Compare(k.Draw[:], o.Draw[:])) < 0
}

func fillKey(v *Verified, w *CampaignWindow) FillKey {
	k := FillKey{Campaign: v.Run.Slot.Campaign, Attempt: v.Run.AttemptNumber()}
	if w != nil {
		k.Created = w.Created
	}
	s := v.Run.Slot
	k.Draw = sha256.Sum256(fmt.Appendf(nil, "evalmesh/fill/v1\x00%s\x00%s\x00%s\x00%d\x00%d\x00%s", s.Campaign, s.Task, s.Agent, s.Seed, k.Attempt, v.Principal()))
	return k
}

// UniqueNames gives every CID of names a display name of its own, so results that
// aggregate by name aggregate by CID: a name held by one CID stays as it is; a name two
// or more CIDs share becomes name@owner (owners[cid], the lab that answers for it) for each
// of them, and name@owner#tail (the CID's last 8 characters) where that still collides.
// Neither '@' nor '#' is allowed in an agent or task name, so no one can squat a qualified
// name. Pure: the output depends on the maps' contents only.
func UniqueNames(names, owners map[string]string) map[string]string {
	byName := map[string][]string{}
	for c, n := range names {
		byName[n] = append(byName[n], c)
	}
	out := make(map[string]string, len(names))
	for n, cids := range byName {
		if len(cids) == 1 {
			out[cids[0]] = n
			continue
		}
		count := map[string]int{}
		for _, c := range cids {
			count[qualified(n, owners[c])]++
		}
		for _, c := range cids {
			q := qualified(n, owners[c])
			if count[q] > 1 {
				q += "#" + c[max(0, len(c)-8):]
			}
			out[c] = q
		}
	}
	return out
}

func qualified(name, owner string) string {
	if owner == "" {
		return name
	}
	return name + "@" + owner
}

func toResult(v *Verified, task, agent string) scoring.Result {
	rp := v.Run
	r := scoring.Result{Task: task, Agent: agent, Seed: rp.Slot.Seed, AttestationID: v.ID}
	if rp.Heureka != nil {
		r.Heureka = &scoring.HeurekaRun{Questions: rp.Heureka.Questions}
	}
	switch {
	case rp.Valid && rp.Score != nil && !math.IsNaN(*rp.Score) && !math.IsInf(*rp.Score, 0):
		s := *rp.Score
		r.Status, r.Score = scoring.StatusSuccess, &s
	case rp.Valid:
		// Valid without a finite score cannot be ranked: an invalid run, saying why.
		r.Status = StatusInvalid + ": valid run without a finite score"
	case rp.InvalidReason != "":
		r.Status = rp.InvalidReason
	default:
		r.Status = StatusInvalid
	}
	return r
}

func joinSorted(s []string) string {
	s = slices.Clone(s)
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// unwitnessed says why run v does not cite a witness record of its campaign (window w) by a
// lab other than the campaign's, or "" when it does.
func (o Outcome) unwitnessed(v *Verified, w CampaignWindow) string {
	if v.Run.Witness == "" {
		return "the run cites no witness record"
	}
	return o.witnessOK(v.Run.Witness, v.Run.Slot.Campaign, w)
}

// witnessOK says why witness record id is no witness of campaign (window w) by a lab other
// than the campaign's, or "" when it is one.
func (o Outcome) witnessOK(id, campaign string, w CampaignWindow) string {
	if id == "" {
		return "cites no witness record"
	}
	wv, ok := o.Witnesses[id]
	switch {
	case !ok:
		return "cites witness " + id + ", which is not in the set"
	case wv.Witness.Campaign != campaign:
		return fmt.Sprintf("cites witness %s of campaign %s, not of its own", id, wv.Witness.Campaign)
	case wv.Principal() == w.Lab:
		return fmt.Sprintf("cites witness %s by the campaign's own lab", id)
	}
	return ""
}

// witnessedAt is when campaign (of lab campaignLab) counts as having existed, for the fill
// order: each other lab's earliest witness time, and of those the second earliest (the
// earliest when one other lab witnessed it), so no single lab can move it — not the
// campaign's own lab by backdating the campaign, and not a witnessing lab by backdating or
// post-dating its own record. Never earlier than created, which the campaign's lab signed;
// created when no other lab has witnessed it.
func (o Outcome) witnessedAt(campaign, campaignLab string, created time.Time) time.Time {
	first := map[string]time.Time{}
	for _, w := range o.Witnesses {
		if w.Witness.Campaign != campaign || w.Principal() == campaignLab {
			continue
		}
		if t, ok := first[w.Principal()]; !ok || w.Witness.Time.Before(t) {
			first[w.Principal()] = w.Witness.Time
		}
	}
	return witnessTime(first, created)
}

// witnessTime is witnessedAt given each other lab's earliest witness time of the campaign.
func witnessTime(first map[string]time.Time, created time.Time) time.Time {
	if len(first) == 0 {
		return created
	}
	times := make([]time.Time, 0, len(first))
	for _, t := range first {
		times = append(times, t)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	at := times[min(1, len(times)-1)]
	if at.Before(created) {
		return created
	}
	return at
}

// notHolder says why run v's node does not hold its slot's attempt by the claim records
// (holders, from Outcome.Holders), or "" when it does.
func notHolder(v *Verified, holders map[Attempt]*Verified) string {
	a := v.Run.AttemptNumber()
	h, ok := holders[Attempt{v.Run.Slot, a}]
	switch {
	case !ok:
		return fmt.Sprintf("no valid claim record of attempt %d of its slot", a)
	case h.Node != v.Node:
		return fmt.Sprintf("attempt %d is held by node %s of %s (claim record %s)", a, h.Node, h.Principal(), h.ID)
	}
	return ""
}

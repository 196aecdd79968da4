package attest

import (
	"cmp"
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
	// MaxAgentsPerLab caps how many distinct agents one principal (lab, or directly trusted
	// node) can put on the ledger: its runs of the agents past the first MaxAgentsPerLab, by
	// agent name, do not count (ExcludeLabCap). 0 is no cap. A trusted lab signing cheap runs
	// under thousands of agent IDs then costs the ledger at most this many players.
	MaxAgentsPerLab int
	// MaxRunsPerLab caps how many runs of one principal count: past the first MaxRunsPerLab
	// by (task, agent, seed, ID), its runs do not count (ExcludeLabCap). 0 is no cap.
	MaxRunsPerLab int
}

// CampaignWindow is when a campaign takes runs: from its creation to its deadline, both as
// the lab-signed campaign states them.
type CampaignWindow struct {
	Created  time.Time
	Deadline time.Time
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
	// ExcludeUnknownCampaign: AcceptPolicy.Campaigns is given and does not hold the slot's
	// campaign, so the run's window cannot be checked.
	ExcludeUnknownCampaign ExcludeReason = "unknown campaign"
	// ExcludeOutsideCampaign: the run's claimed start or end lies outside its campaign's
	// window (created … deadline).
	ExcludeOutsideCampaign ExcludeReason = "outside the campaign window"
	// ExcludeLabCap: the run's principal is over AcceptPolicy.MaxAgentsPerLab or
	// MaxRunsPerLab.
	ExcludeLabCap ExcludeReason = "over the lab's cap"
	// ExcludeUnknownTask: the slot's task bundle is not one the ledger scores.
	ExcludeUnknownTask ExcludeReason = "unknown task bundle"
	// ExcludeUnknownAgent: the slot's agent spec is not one the ledger knows.
	ExcludeUnknownAgent ExcludeReason = "unknown agent"
	// ExcludeDisputed: a re-score contradicts the run (other validity, other metric, or a
	// score beyond the metric's tolerance). Any contradiction is enough: a trusted lab
	// that signs a false one leaves signed evidence against itself.
	ExcludeDisputed ExcludeReason = "disagreeing re-score"
	// ExcludeTooFewReplicators: fewer than Replication other labs confirmed the score.
	ExcludeTooFewReplicators ExcludeReason = "too few replicators"
	// ExcludeSuperseded: another counted run (another lab's, or another campaign's) fills
	// the same (task, agent, seed) of the ledger, which holds one result per seed. The run
	// with the most replicators wins, then the smallest attestation ID.
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
	countedIn := make(map[slotOf]string, len(o.Runs))
	for _, v := range o.Runs {
		countedIn[slotOf{v.Run.Slot, v.Principal()}] = v.ID
	}
	for _, v := range o.Duplicates {
		exclude(v, v.Run.Slot, ExcludeDuplicate, "counted: "+countedIn[slotOf{v.Run.Slot, v.Principal()}])
	}
	for _, v := range o.LaterAttempts {
		exclude(v, v.Run.Slot, ExcludeLaterAttempt, fmt.Sprintf("attempt %d; counted: %s", v.Run.AttemptNumber(), countedIn[slotOf{v.Run.Slot, v.Principal()}]))
	}
	for _, v := range o.Forfeited {
		exclude(v, v.Run.Slot, ExcludeEquivocation, fmt.Sprintf("attempt %d; its principal equivocated on another attempt of the slot", v.Run.AttemptNumber()))
	}

	disputes := map[string][]string{}
	for _, d := range o.Disagreements {
		disputes[d.Run] = append(disputes[d.Run], fmt.Sprintf("%s by %s", d.Rescore, d.By))
	}

	type candidate struct {
		r    scoring.Result
		v    *Verified
		reps int
	}
	type cell struct {
		task, agent string
		seed        int
	}
	var passed []candidate
	for _, v := range o.Runs {
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
		if p.Agents != nil {
			name, ok := p.Agents[agent]
			if !ok {
				exclude(v, rp.Slot, ExcludeUnknownAgent, "agent "+agent)
				continue
			}
			agent = name
		}
		if p.Campaigns != nil {
			w, ok := p.Campaigns[rp.Slot.Campaign]
			if !ok {
				exclude(v, rp.Slot, ExcludeUnknownCampaign, "campaign "+rp.Slot.Campaign)
				continue
			}
			if rp.Start.Before(w.Created) || rp.End.After(w.Deadline) {
				exclude(v, rp.Slot, ExcludeOutsideCampaign, fmt.Sprintf("run claims %s … %s, campaign %s runs %s … %s",
					rp.Start.UTC().Format(time.RFC3339), rp.End.UTC().Format(time.RFC3339), rp.Slot.Campaign,
					w.Created.UTC().Format(time.RFC3339), w.Deadline.UTC().Format(time.RFC3339)))
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
		if d := disputes[v.ID]; len(d) > 0 {
			exclude(v, rp.Slot, ExcludeDisputed, joinSorted(d))
			continue
		}
		reps := len(o.Replicators(v.ID))
		if reps < p.Replication {
			exclude(v, rp.Slot, ExcludeTooFewReplicators, fmt.Sprintf("%d of %d other labs agree", reps, p.Replication))
			continue
		}
		passed = append(passed, candidate{r: toResult(v, task, agent), v: v, reps: reps})
	}
	// The caps apply before the cells are filled, so a capped run never displaces another
	// lab's run of the same cell.
	passed = applyLabCaps(passed, p, func(c candidate) (*Verified, scoring.Result) { return c.v, c.r },
		func(c candidate, detail string) { exclude(c.v, c.v.Run.Slot, ExcludeLabCap, detail) })
	best := map[cell]candidate{}
	var losers []candidate
	for _, c := range passed {
		k := cell{c.r.Task, c.r.Agent, c.r.Seed}
		prev, ok := best[k]
		switch {
		case !ok:
			best[k] = c
		case c.reps > prev.reps || (c.reps == prev.reps && c.v.ID < prev.v.ID):
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

// applyLabCaps keeps, per principal, the runs of its first MaxAgentsPerLab agents (by agent
// name) and then its first MaxRunsPerLab runs (by task, agent, seed, ID); drop is told of
// every other. The order is fixed by the inputs alone, so every node drops the same runs.
func applyLabCaps[C any](cs []C, p AcceptPolicy, of func(C) (*Verified, scoring.Result), drop func(C, string)) []C {
	if p.MaxAgentsPerLab <= 0 && p.MaxRunsPerLab <= 0 {
		return cs
	}
	byLab := map[string][]C{}
	var labs []string
	for _, c := range cs {
		v, _ := of(c)
		if _, ok := byLab[v.Principal()]; !ok {
			labs = append(labs, v.Principal())
		}
		byLab[v.Principal()] = append(byLab[v.Principal()], c)
	}
	slices.Sort(labs)
	var kept []C
	for _, lab := range labs {
		runs := byLab[lab]
		slices.SortFunc(runs, func(a, b C) int {
			va, ra := of(a)
			vb, rb := of(b)
			return cmp.Or(cmp.Compare(ra.Task, rb.Task), cmp.Compare(ra.Agent, rb.Agent), cmp.Compare(ra.Seed, rb.Seed), cmp.Compare(va.ID, vb.ID))
		})
		if p.MaxAgentsPerLab > 0 {
			var agents []string
			for _, c := range runs {
				_, r := of(c)
				agents = append(agents, r.Agent)
			}
			slices.Sort(agents)
			agents = slices.Compact(agents)
			if len(agents) > p.MaxAgentsPerLab {
				allowed := map[string]bool{}
				for _, a := range agents[:p.MaxAgentsPerLab] {
					allowed[a] = true
				}
				in := runs[:0:0]
				for _, c := range runs {
					if _, r := of(c); allowed[r.Agent] {
						in = append(in, c)
					} else {
						drop(c, fmt.Sprintf("%s has runs of %d agents; a lab counts for at most %d (the first by name)", lab, len(agents), p.MaxAgentsPerLab))
					}
				}
				runs = in
			}
		}
		if p.MaxRunsPerLab > 0 && len(runs) > p.MaxRunsPerLab {
			for _, c := range runs[p.MaxRunsPerLab:] {
				drop(c, fmt.Sprintf("%s has %d runs that would count; a lab counts for at most %d (the first by task, agent, seed)", lab, len(runs), p.MaxRunsPerLab))
			}
			runs = runs[:p.MaxRunsPerLab]
		}
		kept = append(kept, runs...)
	}
	return kept
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

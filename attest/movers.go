package attest

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/evalmesh/evalmesh/scoring"
)

// Movers held until audited (issue 44 point 1; docs/scoring.md "Audits by re-execution",
// docs/design.md §9 "Fabricated runs"). Under ledger.audits a lab's unaudited results of an
// agent, taken together, that would move the agent's published rank, and the outliers of
// such a group whose own noise could move it, do not count until audits clear them
// (ExcludeMoverHeld). The rule is the simulator's (scoring.ImpactWeight: one definition for
// the ledger, the coordinator and protocol/auditsim); the held groups go to the
// coordinator (LedgerReport.Held), which audits them at the doubling rate
// (scoring.MoverLambda), so a held result does not wait forever.
//
// "Would move the rank" is answered on the normalized-score intervals the simulator judges
// by (auditsim.ledgerOf): each agent's mean normalized score over its counted results and
// the half-width of its 95 % interval, z95 standard errors of a mean stratified by task with
// the within-task variance pooled. The published Elo intervals come from a bootstrap that
// costs a full ledger per question; these cost a sum. Every node computes them from the same
// counted results, task metadata and scoring options, in a fixed order, so the same inputs
// give the same held set and the same root. Cost: one pass over the counted results to build
// per-(agent, task) moments, then per (lab, agent) group with unaudited results
// O(agents + tasks + m log m) for its m results: O(R log R + G·A) for R results, G groups
// and A agents, per pass; passes repeat while they hold more (at most G + 1).

// ExcludeMoverHeld: the run is one of its lab's unaudited results of an agent that together
// would move the agent's published rank (or an outlier of a group whose own noise could);
// it counts once audits clear it.
const ExcludeMoverHeld ExcludeReason = "held: would move its agent's rank until audits clear it"

// HeldGroup is one lab's held results of one agent (LedgerReport.Held): what the
// coordinator audits at the movers' rate, and the dashboard shows per lab.
type HeldGroup struct {
	Lab       string   `json:"lab"`        // the runner lab (principal)
	Agent     string   `json:"agent"`      // the agent's ledger name
	AgentSpec string   `json:"agent_spec"` // its spec CID (Slot.Agent)
	Runs      []string `json:"runs"`       // the held run IDs, sorted
	// MovesRank: the group's results in one direction move the rank; Pivotal: its own
	// honest noise could, and its outliers are held.
	MovesRank bool `json:"moves_rank"`
	Pivotal   bool `json:"pivotal"`
	// Shift is how far the group moves the agent's mean normalized score against the other
	// labs' results of the same tasks.
	Shift float64 `json:"shift"`
}

// moverInput is one counted result as the rule reads it.
type moverInput struct {
	idx        int // into the results
	lab, spec  string
	agent      string
	task       string
	norm       float64
	run        *Verified
	unaudited  bool
	raw        float64
	haveRaw    bool
	determined bool // its agent is declared deterministic
}

type moments struct {
	n       int
	sum, sq float64
}

func (m *moments) add(s float64, sign int) {
	m.n += sign
	m.sum += float64(sign) * s
	m.sq += float64(float64(sign) * s * s)
}

// interval is the rule's interval of one agent from its moments per task
// (scoring.AgentInterval), tasks in sorted order.
func interval(byTask map[string]*moments) scoring.RankInterval {
	tasks := slices.Sorted(maps.Keys(byTask))
	return scoring.AgentInterval(len(tasks), func(i int) (int, float64, float64) {
		x := byTask[tasks[i]]
		return x.n, x.sum, x.sq
	})
}

// HoldMovers applies the movers rule to the results Accept counted (results, sorted as
// Accept returns them) under p (nothing without p.Audits): it returns the results that
// still count, the held ones as exclusions, and the held groups sorted by lab then agent.
// tasks and opts are the ledger's (the normalization's anchors). A result is unaudited
// unless its audits clear it: for a deterministic agent a majority of matches
// (DecideAudits), otherwise its same-seed re-runs' scores pass the pair test
// (scoring.PairCleared, scaled by the other labs' spread on its task). Pure.
func HoldMovers(o Outcome, p AcceptPolicy, results []scoring.Result, tasks []scoring.TaskInfo, opts scoring.Options) ([]scoring.Result, []Excluded, []HeldGroup) {
	if p.Audits == nil || len(results) == 0 {
		return results, nil, nil
	}
	j := o.judgeAudits(p)
	scoresOf := auditScores(o)
	info := make(map[string]scoring.TaskInfo, len(tasks))
	for _, t := range tasks {
		info[t.Name] = t
	}
	worst := taskWorsts(results, info, opts)

	in := make([]moverInput, 0, len(results))
	for i, r := range results {
		v := o.run(r.AttestationID)
		t, ok := info[r.Task]
		if v == nil || !ok {
			continue
		}
		x := moverInput{idx: i, lab: v.Principal(), spec: v.Run.Slot.Agent, agent: r.Agent, task: r.Task, run: v}
		valid := r.Score != nil && r.Status == scoring.StatusSuccess
		if valid {
			x.raw, x.haveRaw = *r.Score, true
			x.norm = scoring.NormalizedScore(*r.Score, t.SOTA, worst[r.Task], t.LowerIsBetter, true)
		}
		if w, ok := p.Campaigns[v.Run.Slot.Campaign]; ok {
			_, x.determined = slices.BinarySearch(w.Deterministic, x.spec)
		}
		in = append(in, x)
	}
	// Moments per agent and task over every counted result, and raw scores per (agent,
	// task, lab) for the pair test's spread.
	all := map[string]map[string]*moments{}
	rawBy := map[[2]string][]moverInput{}
	for _, x := range in {
		if all[x.agent] == nil {
			all[x.agent] = map[string]*moments{}
		}
		if all[x.agent][x.task] == nil {
			all[x.agent][x.task] = &moments{}
		}
		all[x.agent][x.task].add(x.norm, 1)
		rawBy[[2]string{x.agent, x.task}] = append(rawBy[[2]string{x.agent, x.task}], x)
	}
	for k := range in {
		x := &in[k]
		switch {
		case x.determined:
			x.unaudited = j.outcome[x.run.ID] != AuditCleared
		default:
			x.unaudited = !pairClears(x, scoresOf[x.run.ID], rawBy[[2]string{x.agent, x.task}])
		}
	}
	agents := slices.Sorted(maps.Keys(all))
	type groupKey struct{ lab, agent string }
	groups := map[groupKey][]int{} // → indices into in
	for k, x := range in {
		if x.unaudited {
			g := groupKey{x.lab, x.agent}
			groups[g] = append(groups[g], k)
		}
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.lab, b.lab), cmp.Compare(a.agent, b.agent))
	})
	heldIdx := map[int]string{} // result index → why
	heldBy := map[groupKey]*HeldGroup{}
	// Passes until no new hold: the intervals the margins are taken against leave out the
	// results already held, so one lab's held lift of an agent does not widen that agent's
	// interval and hide another lift against it. Holds only grow, so at most one pass per
	// group and one more.
	for pass := 0; pass <= len(keys); pass++ {
		active := map[string]map[string]*moments{}
		for _, x := range in {
			if _, h := heldIdx[x.idx]; h {
				continue
			}
			if active[x.agent] == nil {
				active[x.agent] = map[string]*moments{}
			}
			if active[x.agent][x.task] == nil {
				active[x.agent][x.task] = &moments{}
			}
			active[x.agent][x.task].add(x.norm, 1)
		}
		published := make(map[string]scoring.RankInterval, len(agents))
		for _, a := range agents {
			published[a] = interval(active[a])
		}
		added := false
		for _, g := range keys {
			more, imp := holdGroup(in, g.lab, g.agent, groups[g], active[g.agent], published, agents, heldIdx)
			added = added || more
			if len(imp.Movers) > 0 {
				hg := heldBy[g]
				if hg == nil {
					hg = &HeldGroup{Lab: g.lab, Agent: g.agent, AgentSpec: in[groups[g][0]].spec}
					heldBy[g] = hg
				}
				hg.MovesRank, hg.Pivotal, hg.Shift = hg.MovesRank || imp.MovesRank, hg.Pivotal || imp.Pivotal, imp.Shift
			}
		}
		if !added {
			break
		}
	}
	var held []HeldGroup
	for _, g := range keys {
		if hg := heldBy[g]; hg != nil {
			for _, k := range groups[g] {
				if _, h := heldIdx[in[k].idx]; h {
					hg.Runs = append(hg.Runs, in[k].run.ID)
				}
			}
			slices.Sort(hg.Runs)
			held = append(held, *hg)
		}
	}
	if len(heldIdx) == 0 {
		return results, nil, nil
	}
	kept := make([]scoring.Result, 0, len(results)-len(heldIdx))
	var ex []Excluded
	for i, r := range results {
		why, ok := heldIdx[i]
		if !ok {
			kept = append(kept, r)
			continue
		}
		v := o.run(r.AttestationID)
		ex = append(ex, Excluded{ID: v.ID, Slot: v.Run.Slot, Principal: v.Principal(), Reason: ExcludeMoverHeld, Detail: why})
	}
	return kept, ex, held
}

// taskWorsts is each task's worst anchor as the ledger takes it (scoring.Options.Worst):
// the estimated worst score, or the worst valid score among the results.
func taskWorsts(results []scoring.Result, info map[string]scoring.TaskInfo, opts scoring.Options) map[string]float64 {
	scores := map[string][]float64{}
	for _, r := range results {
		if r.Score != nil && r.Status == scoring.StatusSuccess {
			scores[r.Task] = append(scores[r.Task], *r.Score)
		}
	}
	out := make(map[string]float64, len(info))
	for name, t := range info {
		if opts.Worst == "estimated" && t.EstimatedWorst != nil {
			out[name] = *t.EstimatedWorst
			continue
		}
		w, ok := scoring.PopulationWorst(scores[name], t.LowerIsBetter)
		if !ok {
			w = t.SOTA
		}
		out[name] = w
	}
	return out
}

// auditScores is each run's audit scores in the set (valid re-executions only), one per
// auditing lab (its least audit ID), in lab order.
func auditScores(o Outcome) map[string][]float64 {
	type labScore struct {
		lab, id string
		score   float64
	}
	by := map[string][]labScore{}
	for _, v := range o.Other {
		a := v.Audit
		if a == nil || !a.Result.Valid || a.Result.Score == nil || v.Principal() == a.RunLab {
			continue
		}
		by[a.Run] = append(by[a.Run], labScore{v.Principal(), v.ID, *a.Result.Score})
	}
	out := make(map[string][]float64, len(by))
	for run, ls := range by {
		slices.SortFunc(ls, func(a, b labScore) int { return cmp.Or(cmp.Compare(a.lab, b.lab), cmp.Compare(a.id, b.id)) })
		ls = slices.CompactFunc(ls, func(a, b labScore) bool { return a.lab == b.lab })
		for _, l := range ls {
			out[run] = append(out[run], l.score)
		}
	}
	return out
}

// pairClears: a stochastic agent's result clears when its same-seed re-runs do not find it
// higher than they are by more than the pair test allows (scoring.PairCleared, one-sided:
// a lift is what is feared), its spread the other labs' on the task (at least
// scoring.DefaultAuditMinSD), re-runs taken as uncorrelated with the run (ρ = 0, the
// widest test: no agent's spec states its ρ yet). A result without audits does not clear.
func pairClears(x *moverInput, audits []float64, same []moverInput) bool {
	if len(audits) == 0 || !x.haveRaw {
		return false
	}
	var xs []float64
	for _, y := range same {
		if y.lab != x.lab && y.haveRaw {
			xs = append(xs, y.raw)
		}
	}
	sd := scoring.DefaultAuditMinSD
	if len(xs) > 1 {
		sd = max(sd, scoring.StatsOf("", xs).SD)
	}
	dir := 1
	if t, ok := scoring.LookupMetric(x.run.Run.Metric); ok && t.LowerIsBetter {
		dir = -1
	}
	ok, _ := scoring.PairCleared(x.raw, audits, sd, 0, scoring.DefaultAuditBias, scoring.DefaultPairZ, dir)
	return ok
}

// holdGroup measures one (lab, agent) group of unaudited results (members, indices into in)
// against the other labs' results of the agent and the agents' present intervals
// (published, over the results not held; agentActive, the agent's), and holds its movers
// (heldIdx, by result index). It reports whether it held a result not held before, and the
// group's impact.
func holdGroup(in []moverInput, lab, agent string, members []int, agentActive map[string]*moments, published map[string]scoring.RankInterval, agents []string, heldIdx map[int]string) (bool, scoring.Impact) {
	// The other labs' results of the agent per task, held or not: the reference.
	refM := map[string]*moments{}
	agentResults := 0
	for _, x := range in {
		if x.agent != agent {
			continue
		}
		agentResults++
		if x.lab == lab {
			continue
		}
		if refM[x.task] == nil {
			refM[x.task] = &moments{}
		}
		refM[x.task].add(x.norm, 1)
	}
	ref := make([]scoring.TaskStats, 0, len(refM))
	for _, t := range slices.Sorted(maps.Keys(refM)) {
		m := refM[t]
		mean, sd := m.sum/float64(m.n), 0.0
		if m.n > 1 {
			sd = math.Sqrt(max(0, (m.sq-float64(m.sum*mean))/float64(m.n-1)))
		}
		ref = append(ref, scoring.TaskStats{Task: t, Mean: mean, SD: sd, Count: m.n})
	}
	// The baseline: the agent's results not held, with the group's replaced by ordinary
	// ones (the other labs' mean on the task, with their spread), or left out where no other
	// lab ran it.
	base := map[string]*moments{}
	for t, m := range agentActive {
		c := *m
		base[t] = &c
	}
	pending := make([]scoring.TaskScore, 0, len(members))
	for _, k := range members {
		x := in[k]
		pending = append(pending, scoring.TaskScore{Task: x.task, Score: x.norm})
		if base[x.task] == nil {
			base[x.task] = &moments{}
		}
		if _, h := heldIdx[x.idx]; !h {
			base[x.task].add(x.norm, -1)
		}
		if i, ok := slices.BinarySearchFunc(ref, x.task, func(s scoring.TaskStats, t string) int { return cmp.Compare(s.Task, t) }); ok {
			base[x.task].n++
			base[x.task].sum += ref[i].Mean
			base[x.task].sq += float64(ref[i].Mean*ref[i].Mean) + float64(ref[i].SD*ref[i].SD)
		}
	}
	others := make([]scoring.RankInterval, 0, len(agents))
	for _, a := range agents {
		if a != agent && !math.IsNaN(published[a].Mean) {
			others = append(others, published[a])
		}
	}
	up, down := scoring.RankMargins(interval(base), others)
	imp := scoring.ImpactWeight(pending, ref, agentResults, up, down, 0, scoring.DefaultAuditMinSD)
	why := fmt.Sprintf("%s's %d unaudited results of %s shift its mean normalized score by %+.4f (rank margins up %.4f, down %.4f)",
		lab, len(members), agent, imp.Shift, up, down)
	if !imp.MovesRank {
		why += "; its own noise could move the rank, and this result is an outlier"
	}
	added := false
	for _, k := range imp.Movers {
		if x := in[members[k]]; heldIdx[x.idx] == "" {
			heldIdx[x.idx], added = why, true
		}
	}
	return added, imp
}

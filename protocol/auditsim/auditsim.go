// Package auditsim simulates audits by re-execution over whole networks of labs (issue 44,
// `evalmesh sim audits`): honest labs with a bias of their own, one dishonest lab that
// fabricates a share of its runs of an agent with a score lift just large enough to lift
// that agent above its neighbour, stochastic or deterministic agents, and the network's
// audit rate. It reports how often the dishonest lab is caught before the published rank
// moves, how many fabricated runs it published first, how often an honest lab is flagged,
// and what the audits cost in GPU time, each with its 95 % bound over the simulated
// networks (docs/scoring.md "Audits").
//
// It models labs and runs, not nodes and slots: a run is one number. The draw, the impact
// weight, the statistical test and the auditors' vote are the protocol's own functions
// (protocol.AuditDrawn, AuditThreshold, ImpactWeight, StatisticalFlag, CompareDeterministic,
// DecideAudits), fed uniform random bytes where a node would feed its VRF output (whose
// output is uniform and which no one else can predict; simulating ECVRF itself would only
// cost time).
//
// Pure and single-threaded: the same Config gives the same Result. Separate Runs may proceed
// concurrently (RunSizes does).
package auditsim

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// Config is one family of simulated networks. Zero fields take Defaults' values.
type Config struct {
	Labs       int // labs in each network (one of them dishonest)
	Networks   int // networks simulated
	RunsPerLab int // runs of each of the two agents by each lab
	Tasks      int // tasks the runs are spread over
	// Agents is how many agents the campaign evaluates. Two are simulated run by run: the
	// target and the neighbour it is lifted past, as close as the lift allows (the costliest
	// pair to audit). The others, apart from each other by more than any lift, are charged
	// the network's rate per run (their expected audits at weight 1).
	Agents     int
	Sigma      float64 // per-run score noise of a stochastic agent (normalized score units)
	TaskSpread float64 // spread of task difficulty (shared by every lab)
	HonestBias float64 // spread of honest labs' own bias (hardware), normalized score units
	FabShare   float64 // share of the dishonest lab's runs of the target agent it fabricates
	Lift       float64 // score lift of a fabricated run (normalized score units)
	// RankSlack sets the neighbour agent's lead over the target: the fabricated lift,
	// counted in full, exceeds the lead by this factor (1.1: by 10 %), so the fabrication is
	// just enough to change the rank.
	RankSlack     float64
	Rate          float64 // the network's audit rate (expected audits of an ordinary run)
	Deterministic bool    // agents declare themselves deterministic
	Bias          float64 // the statistical test's allowed per-lab bias, in units of Sigma
	Z             float64 // the statistical test's critical value
	// RerunCorr is the correlation of a stochastic agent's same-seed re-run with the
	// original run (0: the seed fixes nothing; near 1: it fixes the sampling, and only
	// nondeterministic kernels differ).
	RerunCorr float64
	PairZ     float64 // a held mover's pair test: critical value (protocol.PairCleared)
	// HourSpread is the spread (of the logarithm) of a run's GPU time between tasks: the
	// audit cost is GPU time audited over the campaign's, and movers are not a random
	// sample of tasks.
	HourSpread float64
	Seed       uint64
}

// Defaults are the figures of docs/scoring.md's table.
var Defaults = Config{
	Labs: 10, Networks: 3000, RunsPerLab: 20, Tasks: 10, Agents: 10,
	Sigma: 0.1, TaskSpread: 0.2, HonestBias: 0.02,
	FabShare: 0.1, Lift: 0.3, RankSlack: 1.1,
	Rate: protocol.DefaultAuditRate, Bias: protocol.DefaultAuditBias, Z: protocol.DefaultAuditZ,
	PairZ: protocol.DefaultPairZ, HourSpread: 0.5, Seed: 1,
}

// WithDefaults fills zero fields from Defaults.
func (c Config) WithDefaults() Config {
	d := Defaults
	if c.Labs == 0 {
		c.Labs = d.Labs
	}
	if c.Networks == 0 {
		c.Networks = d.Networks
	}
	if c.RunsPerLab == 0 {
		c.RunsPerLab = d.RunsPerLab
	}
	if c.Tasks == 0 {
		c.Tasks = d.Tasks
	}
	if c.Agents == 0 {
		c.Agents = d.Agents
	}
	if c.Sigma == 0 {
		c.Sigma = d.Sigma
	}
	if c.TaskSpread == 0 {
		c.TaskSpread = d.TaskSpread
	}
	if c.HonestBias == 0 {
		c.HonestBias = d.HonestBias
	}
	if c.FabShare == 0 {
		c.FabShare = d.FabShare
	}
	if c.Lift == 0 {
		c.Lift = d.Lift
	}
	if c.RankSlack == 0 {
		c.RankSlack = d.RankSlack
	}
	if c.Rate == 0 {
		c.Rate = d.Rate
	}
	if c.Bias == 0 {
		c.Bias = d.Bias
	}
	if c.Z == 0 {
		c.Z = d.Z
	}
	if c.PairZ == 0 {
		c.PairZ = d.PairZ
	}
	if c.HourSpread == 0 {
		c.HourSpread = d.HourSpread
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	return c
}

// Check names the first bad field.
func (c Config) Check() error {
	switch {
	case c.Labs < 3:
		return fmt.Errorf("--labs %d: audits need a runner and at least two other labs (3 or more)", c.Labs)
	case c.Networks < 1:
		return fmt.Errorf("--networks %d: simulate at least one network", c.Networks)
	case c.Agents < 2:
		return fmt.Errorf("--agents %d: the campaign needs the target agent and its neighbour (2 or more)", c.Agents)
	case c.RunsPerLab < 1 || c.Tasks < 1:
		return fmt.Errorf("--runs-per-lab %d, --tasks %d: both must be at least 1", c.RunsPerLab, c.Tasks)
	case !(c.FabShare > 0 && c.FabShare <= 1):
		return fmt.Errorf("--fabricate %v: a share in (0, 1]", c.FabShare)
	case !(c.Lift > 0):
		return fmt.Errorf("--lift %v: must be above 0", c.Lift)
	case !(c.Rate >= 0 && c.Rate <= 1):
		return fmt.Errorf("--rate %v: expected audits per run, from 0 to 1", c.Rate)
	case !(c.RerunCorr >= 0 && c.RerunCorr < 1):
		return fmt.Errorf("--rerun-corr %v: a correlation in [0, 1)", c.RerunCorr)
	case !(c.Sigma > 0) || c.HonestBias < 0 || c.TaskSpread < 0:
		return fmt.Errorf("--sigma must be above 0, --honest-bias and --task-spread not negative")
	}
	return nil
}

// Bound is a share with its one-sided 95 % Clopper–Pearson bounds.
type Bound struct {
	Count int     `json:"count"`
	Of    int     `json:"of"`
	Share float64 `json:"share"`
	Lower float64 `json:"lower95"`
	Upper float64 `json:"upper95"`
}

func bound(k, n int) Bound {
	b := Bound{Count: k, Of: n}
	if n == 0 {
		return b
	}
	b.Share = float64(k) / float64(n)
	b.Lower, b.Upper = 0, 1
	if k > 0 {
		b.Lower = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(0.05)
	}
	if k < n {
		b.Upper = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(0.95)
	}
	return b
}

// Result is what one Config's networks showed.
type Result struct {
	Labs          int     `json:"labs"`
	Networks      int     `json:"networks"`
	Deterministic bool    `json:"deterministic"`
	RerunCorr     float64 `json:"rerun_corr,omitempty"`
	// RankMoving counts the networks in which the fabrication, counted uncaught, changes
	// the target's published rank at the end (by construction nearly all: the neighbour's
	// lead is set on each network's honest results). Caught is, of those, the networks in
	// which the dishonest lab was caught (proof, suspicion, or a fabricated run its audits
	// did not clear, held aside) and the published rank never moved; RankKept those in
	// which the published rank never moved, caught or not.
	Caught   Bound `json:"caught_before_rank_moves"`
	RankKept Bound `json:"rank_never_moved"`
	// CaughtAny is the share of all networks in which the dishonest lab was caught at all.
	CaughtAny Bound `json:"caught_any"`
	// FabricatedPublished is the mean number of fabricated runs the dishonest lab had
	// published when it was caught (over networks where it was), of FabricatedRuns.
	FabricatedPublished float64 `json:"fabricated_published_before_caught"`
	FabricatedRuns      int     `json:"fabricated_runs"`
	// HonestFlagged: networks in which any honest lab was flagged or proven.
	HonestFlagged Bound `json:"honest_flagged"`
	// HonestHeldAside: honest movers whose audits did not clear them (held aside for good),
	// of honest movers audited: results lost, not labs flagged.
	HonestHeldAside Bound `json:"honest_movers_held_aside"`
	// Cost is the audits' GPU time over the campaign's (every agent's runs), mean over
	// networks, with its 95th percentile; the bound judged is the percentile (in 95 % of
	// campaigns the audits cost at most this).
	Cost      float64 `json:"audit_cost"`
	CostUpper float64 `json:"audit_cost_upper95"`
	// PairCost is the audits per run of the two close agents alone.
	PairCost float64 `json:"audit_cost_close_pair"`
}

// RunSizes runs c at each network size, in parallel over at most workers goroutines, and
// returns the results in the order of sizes.
func RunSizes(c Config, sizes []int, deterministic []bool, workers int) []Result {
	type job struct {
		i   int
		cfg Config
	}
	var jobs []job
	for _, d := range deterministic {
		for _, n := range sizes {
			cc := c
			cc.Labs, cc.Deterministic = n, d
			jobs = append(jobs, job{len(jobs), cc})
		}
	}
	out := make([]Result, len(jobs))
	ch := make(chan job)
	var wg sync.WaitGroup
	for w := 0; w < max(1, workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				out[j.i] = Run(j.cfg)
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return out
}

// Run simulates c.Networks networks of c.Labs labs.
func Run(c Config) Result {
	c = c.WithDefaults()
	rng := rand.New(rand.NewPCG(c.Seed, uint64(c.Labs)<<1|b2u(c.Deterministic)))
	res := Result{Labs: c.Labs, Networks: c.Networks, Deterministic: c.Deterministic}
	if !c.Deterministic {
		res.RerunCorr = c.RerunCorr
	}
	var moving, caught, kept, caughtAny, honest, honestRejected, honestMovers int
	var fabPublished, pairCost float64
	costs := make([]float64, 0, c.Networks)
	for range c.Networks {
		o := simulate(c, rng)
		res.FabricatedRuns = o.fabricated
		if o.rankMoving {
			moving++
			if o.caughtBeforeMove {
				caught++
			}
			if !o.rankMoved {
				kept++
			}
		}
		if o.caught {
			caughtAny++
			fabPublished += float64(o.fabPublishedAtCatch)
		}
		if o.honestFlagged {
			honest++
		}
		honestRejected += o.honestRejected
		honestMovers += o.honestRuns
		costs = append(costs, o.auditHours/o.campaignHours)
		pairCost += float64(o.pairAudits) / float64(agents*c.Labs*c.RunsPerLab)
	}
	res.Caught = bound(caught, moving)
	res.RankKept = bound(kept, moving)
	res.CaughtAny = bound(caughtAny, c.Networks)
	if caughtAny > 0 {
		res.FabricatedPublished = fabPublished / float64(caughtAny)
	}
	res.HonestFlagged = bound(honest, c.Networks)
	res.HonestHeldAside = bound(honestRejected, honestMovers)
	var sum float64
	for _, x := range costs {
		sum += x
	}
	res.Cost = sum / float64(len(costs))
	res.PairCost = pairCost / float64(c.Networks)
	slices.Sort(costs)
	res.CostUpper = costs[min(len(costs)-1, int(math.Ceil(0.95*float64(len(costs))))-1)]
	return res
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// The two agents: the target (0), which the dishonest lab lifts, and its neighbour (1),
// just above it.
const (
	target    = 0
	neighbour = 1
	agents    = 2
)

type run struct {
	lab, agent, task int
	score            float64 // as published
	honest           float64 // what an honest run would have scored (the counterfactual)
	eps              float64 // the run's own noise, which a same-seed re-run shares by RerunCorr
	fabricated       bool
	published        bool
	counted          bool // counts in the published ledger now
	held             bool // a mover, or awaiting audits it was held for: does not count yet
	rejected         bool // a mover whose audits did not clear it: held aside for good
	mover            bool // was held as a mover when its audits were drawn
	audited          bool // at least one audit finished
	waited           int  // epochs held as a mover with no lab drawn
	auditsDue        []int
	auditScores      []float64
	draws            []draw // the other labs' draws on it, smallest first
	unbiased         []bool // per audit due: drawn at the group's rate, not only as a mover
	drawn            int    // how many of draws have been called
	verdicts         map[string][]string
}

type outcome struct {
	rankMoving, caughtBeforeMove, caught, rankMoved, honestFlagged bool
	fabricated, fabPublishedAtCatch                                int
	pairAudits                                                     int
	honestRejected, honestRuns                                     int
	auditHours, campaignHours                                      float64
}

// z95 is the two-sided 95 % normal quantile the published intervals use.
const z95 = scoring.Z95

// simulate is one network: labs publish one run per round, in parallel; an audit drawn in a
// round finishes in the next (it takes one run's time); the published ledger is read at the
// end of every round. After the last run, rounds go on (at most tailRounds) until every held
// mover is audited.
func simulate(c Config, rng *rand.Rand) outcome {
	L, n, T := c.Labs, c.RunsPerLab, c.Tasks
	dishonest := 0
	bias := make([]float64, L)
	for l := range bias {
		bias[l] = rng.NormFloat64() * c.HonestBias
	}
	taskEffect := make([]float64, T)
	hours := make([]float64, T) // GPU hours of a run of each task: runs differ by task
	for t := range taskEffect {
		taskEffect[t] = rng.NormFloat64() * c.TaskSpread
		hours[t] = math.Exp(rng.NormFloat64() * c.HourSpread)
	}
	fabricated := int(math.Ceil(c.FabShare * float64(n)))
	var mean [agents]float64
	noise := c.Sigma

	// Each lab's runs: n of each agent, tasks dealt round-robin from a random start, in a
	// random order.
	perLab := make([][]*run, L)
	for l := 0; l < L; l++ {
		start := rng.IntN(T)
		for a := 0; a < agents; a++ {
			for i := 0; i < n; i++ {
				t := (start + i) % T
				e := rng.NormFloat64() * noise
				h := 0.5 + taskEffect[t] + bias[l] + e
				perLab[l] = append(perLab[l], &run{lab: l, agent: a, task: t, score: h, honest: h, eps: e})
			}
		}
		rng.Shuffle(len(perLab[l]), func(i, j int) { perLab[l][i], perLab[l][j] = perLab[l][j], perLab[l][i] })
	}
	// The dishonest lab fabricates `fabricated` of its target-agent runs.
	var targetRuns []*run
	for _, r := range perLab[dishonest] {
		if r.agent == target {
			targetRuns = append(targetRuns, r)
		}
	}
	rng.Shuffle(len(targetRuns), func(i, j int) { targetRuns[i], targetRuns[j] = targetRuns[j], targetRuns[i] })
	for _, r := range targetRuns[:fabricated] {
		r.fabricated = true
		r.score = r.honest + c.Lift
	}
	// The neighbour's lead, set on this network's honest results: at the end the neighbour
	// is published above the target (separated) by the fabrication's shift of the target's
	// mean over RankSlack, so the fabrication, counted in full, ties them: the smallest
	// lift that changes the target's published rank.
	all := func(*run) bool { return true }
	hon := ledger(perLab, T, all, true)
	shift := float64(fabricated) * c.Lift / float64(L*n)
	offset := shift/c.RankSlack - ((hon[neighbour].Mean - hon[neighbour].Half) - (hon[target].Mean + hon[target].Half))
	mean = [agents]float64{0.5, 0.5 + offset}
	for _, rs := range perLab {
		for _, r := range rs {
			if r.agent == neighbour {
				r.score += offset
				r.honest += offset
			}
		}
	}

	o := outcome{fabricated: fabricated}
	o.rankMoving = rankRel(ledger(perLab, T, all, false)) > rankRel(ledger(perLab, T, all, true))
	for _, rs := range perLab {
		for _, r := range rs {
			o.campaignHours += hours[r.task]
		}
	}
	var meanHours float64
	for _, h := range hours {
		meanHours += h / float64(T)
	}
	// The other agents' runs (far from each other) are charged the rate: their expected
	// audits at weight 1, on the same mix of tasks.
	otherHours := float64((c.Agents-agents)*L*n) * meanHours
	o.campaignHours += otherHours
	o.auditHours = c.Rate * otherHours

	st := newStats(L, T)
	// Each run's draw: every other lab's VRF output on it is a uniform number fixed before
	// the run (attest.AuditAlpha); a lab audits once the run's threshold, which grows with
	// its group's impact, passes its number. Only the smallest few matter (at most a few
	// labs are ever drawn), so they are generated in order directly.
	const keep = 12
	for l := 0; l < L; l++ {
		for _, r := range perLab[l] {
			r.draws = orderedDraws(rng, L, l, keep)
		}
	}
	var pending []*run // runs with audits under way, finishing next round
	suspect := make([]bool, L)
	proven := make([]bool, L)
	pairs := make([][][]float64, L) // per lab, per agent: standardized audit differences
	for l := range pairs {
		pairs[l] = make([][]float64, agents)
	}
	pairSD := noise * math.Sqrt(2*(1-c.RerunCorr))
	audits, fabPublished := 0, 0
	caughtRound, movedRound := -1, -1
	var beta [8]byte
	rounds := agents * n
	const tailRounds = 30
	for round := 0; round <= rounds+tailRounds; round++ {
		// Audits drawn last round finish now.
		for _, r := range pending {
			for i, aud := range r.auditsDue {
				audits++
				o.auditHours += hours[r.task]
				var verdict string
				if c.Deterministic {
					// The auditor has the run's GPU model: an honest run's submission comes out
					// the same, a fabricated one does not.
					sub := "honest"
					if r.fabricated {
						sub = "fabricated"
					}
					verdict, _ = protocol.CompareDeterministic(sub, "gpu", attest.AuditResult{Submission: "honest", GPUModel: "gpu"})
				} else {
					// A same-seed re-run shares RerunCorr of the run's own noise.
					e := c.RerunCorr*r.eps + math.Sqrt(1-c.RerunCorr*c.RerunCorr)*rng.NormFloat64()*noise
					a := mean[r.agent] + taskEffect[r.task] + bias[aud] + e
					r.auditScores = append(r.auditScores, a)
					if r.unbiased[i] {
						pairs[r.lab][r.agent] = append(pairs[r.lab][r.agent], (r.score-a)/pairSD)
					}
					verdict = attest.VerdictInconclusive
				}
				if r.verdicts == nil {
					r.verdicts = map[string][]string{}
				}
				k := strconv.Itoa(aud)
				r.verdicts[k] = append(r.verdicts[k], verdict)
			}
			r.auditsDue, r.unbiased = nil, nil
			r.audited = true
			r.held = false
			if c.Deterministic {
				switch protocol.DecideAudits(r.verdicts) {
				case protocol.AuditProven:
					proven[r.lab] = true
				case protocol.AuditOpen:
					// A lone mismatch brings two more auditors in (as a contradicted re-score
					// does); they re-run it next round, and the run waits for them.
					for _, v := range r.verdicts {
						if slices.Contains(v, attest.VerdictMismatch) {
							r.auditsDue = otherLabs(rng, L, r.lab, 2, r.verdicts)
							r.unbiased = make([]bool, len(r.auditsDue))
							r.held = len(r.auditsDue) > 0
							break
						}
					}
				}
			} else {
				if r.mover {
					// A held mover counts only if its re-runs clear it.
					if ok, _ := protocol.PairCleared(r.score, r.auditScores, st.pooledSD(r.lab, r.agent, noise/4), c.RerunCorr, c.Bias, c.PairZ, 1); !ok {
						r.rejected = true
						if !r.fabricated {
							o.honestRejected++
						}
					}
				}
				// Pairs are in units of their own spread; the bias allowance is in the
				// agent's spread, which a correlated re-run's pair spread is smaller than.
				if flag, _ := protocol.StatisticalFlag(pairs[r.lab][r.agent], c.Bias*noise/pairSD, c.Z, 1); flag {
					suspect[r.lab] = true
				}
			}
		}
		next := pending[:0:0]
		for _, r := range pending {
			if len(r.auditsDue) > 0 {
				next = append(next, r)
			}
		}
		pending = next
		publishing := round < rounds
		// Each lab publishes its next run.
		if publishing {
			for l := 0; l < L; l++ {
				r := perLab[l][round]
				r.published = true
				if r.fabricated {
					fabPublished++
				}
				st.add(r)
			}
		}
		upto := min(round+1, rounds)
		counts := func(r *run) bool { return r.published && !r.held && !r.rejected && !suspect[r.lab] && !proven[r.lab] }
		setCounted := func() {
			for l := 0; l < L; l++ {
				for _, r := range perLab[l][:upto] {
					r.counted = counts(r)
				}
			}
		}
		// Every (lab, agent) group of unaudited results is weighed again, and each of its
		// runs drawn at the group's present threshold; its movers are held. Holding one
		// can make another group's results carry a move, so the weighing repeats until no
		// hold changes (a few passes).
		for l := 0; l < L; l++ {
			for _, r := range perLab[l][:upto] {
				if !r.audited && len(r.auditsDue) == 0 {
					r.held = false // weighed afresh below
				}
			}
		}
		for pass, changed := 0, true; changed && pass < 8; pass++ {
			changed = false
			setCounted()
			cM, cN := countedMoments(perLab, T)
			for l := 0; l < L; l++ {
				for a := 0; a < agents; a++ {
					if drawGroup(c, st, perLab[l][:upto], a, cM, cN, L, &pending, &beta) {
						changed = true
					}
				}
			}
		}
		// A held mover no lab was drawn for waits an epoch, and its expected audits double.
		for l := 0; l < L; l++ {
			for _, r := range perLab[l][:upto] {
				if r.held && !r.audited && len(r.auditsDue) == 0 {
					r.waited++
				}
			}
		}
		// Lab-level statistical test (stochastic agents): each lab's results of each agent
		// against the other labs'.
		if !c.Deterministic && publishing {
			for l := 0; l < L; l++ {
				for a := 0; a < agents; a++ {
					if flag, _ := protocol.StatisticalFlag(st.residuals(perLab[l], a, c.Sigma/4), c.Bias, c.Z, 5); flag {
						suspect[l] = true
					}
				}
			}
		}
		caughtNow := suspect[dishonest] || proven[dishonest]
		for _, r := range targetRuns[:fabricated] {
			caughtNow = caughtNow || r.rejected
		}
		if caughtRound < 0 && caughtNow {
			caughtRound = round
			o.fabPublishedAtCatch = fabPublished
		}
		for l := 1; l < L; l++ {
			if suspect[l] || proven[l] {
				o.honestFlagged = true
			}
		}
		// The published ledger: runs count unless held for an audit, held aside, or their
		// lab is set aside or suspected. The rank moved when it publishes the target higher
		// against its neighbour than the same runs scored honestly would.
		setCounted()
		cnt := func(r *run) bool { return r.counted }
		if movedRound < 0 && rankRel(ledger(perLab, T, cnt, false)) > rankRel(ledger(perLab, T, cnt, true)) {
			movedRound = round
		}
		if !publishing && len(pending) == 0 && !anyWaiting(perLab) {
			break
		}
	}
	for l := 1; l < L; l++ {
		for _, r := range perLab[l] {
			if r.mover || r.rejected {
				o.honestRuns++
			}
		}
	}
	o.caught = caughtRound >= 0
	o.rankMoved = movedRound >= 0
	o.caughtBeforeMove = o.caught && movedRound < 0
	o.pairAudits = audits
	return o
}

// anyWaiting: is a held mover still waiting for its first audit?
func anyWaiting(perLab [][]*run) bool {
	for _, rs := range perLab {
		for _, r := range rs {
			if r.held && !r.audited {
				return true
			}
		}
	}
	return false
}

type draw struct {
	u   uint64 // the VRF output's first 8 bytes
	lab int
}

// orderedDraws is the smallest keep of the L-1 other labs' uniform draws on one run, in
// increasing order, each with a distinct lab: the order statistics of uniforms, generated
// one after another (u₍ᵢ₊₁₎ = u₍ᵢ₎ + (1 − u₍ᵢ₎)(1 − V^(1/(m−i)))).
func orderedDraws(rng *rand.Rand, L, runner, keep int) []draw {
	m := L - 1
	k := min(keep, m)
	labs := make([]int, 0, m)
	for l := 0; l < L; l++ {
		if l != runner {
			labs = append(labs, l)
		}
	}
	rng.Shuffle(len(labs), func(i, j int) { labs[i], labs[j] = labs[j], labs[i] })
	out := make([]draw, k)
	u := 0.0
	for i := 0; i < k; i++ {
		u += (1 - u) * (1 - math.Pow(rng.Float64(), 1/float64(m-i)))
		out[i] = draw{u: uint64(math.Min(u, 1-1e-16)*(1<<53)) << 11, lab: labs[i]}
	}
	return out
}

// otherLabs picks k labs other than runner and those that audited already.
func otherLabs(rng *rand.Rand, L, runner, k int, done map[string][]string) []int {
	var cand []int
	for l := 0; l < L; l++ {
		if l != runner && done[strconv.Itoa(l)] == nil {
			cand = append(cand, l)
		}
	}
	rng.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
	return cand[:min(k, len(cand))]
}

// ledger is the two agents' published intervals over the runs keep passes, from their
// published scores or (honest) the counterfactual ones (ledgerOf).
func ledger(perLab [][]*run, T int, keep func(*run) bool, honest bool) [agents]protocol.RankInterval {
	m := newMoments(T)
	for _, rs := range perLab {
		for _, r := range rs {
			if !keep(r) {
				continue
			}
			s := r.score
			if honest {
				s = r.honest
			}
			m[r.agent][r.task].add(s, 1)
		}
	}
	return ledgerOf(m)
}

func newMoments(T int) [agents][]moments {
	var m [agents][]moments
	for a := range m {
		m[a] = make([]moments, T)
	}
	return m
}

// add adds (sign 1) or removes (sign −1) one score.
func (x *moments) add(s float64, sign int) {
	x.n += sign
	x.sum += float64(sign) * s
	x.sq += float64(sign) * s * s
}

// ledgerOf is each agent's mean normalized score and the half-width of its 95 % interval:
// z95 standard errors of a mean stratified by task, √(s²/N) with s² the variance within
// tasks pooled over them (what the ledger's stratified bootstrap estimates, without its
// zero width where a task has one result). Until some task has two results the interval is
// unbounded: nothing is published as separated.
func ledgerOf(m [agents][]moments) [agents]protocol.RankInterval {
	var out [agents]protocol.RankInterval
	for a := range m {
		out[a] = scoring.AgentInterval(len(m[a]), func(i int) (int, float64, float64) { return m[a][i].n, m[a][i].sum, m[a][i].sq })
	}
	return out
}

// rankRel is the target's published standing against its neighbour: -1 the neighbour is
// separated above it, +1 it is separated above the neighbour, 0 they share a rank.
func rankRel(l [agents]protocol.RankInterval) int {
	switch {
	case math.IsNaN(l[target].Mean) || math.IsNaN(l[neighbour].Mean):
		return -1
	case protocol.SeparatedAbove(l[neighbour], l[target]):
		return -1
	case protocol.SeparatedAbove(l[target], l[neighbour]):
		return 1
	}
	return 0
}

// stats holds running sums of published results per (agent, task), over all labs and per
// lab, so the other labs' statistics are a subtraction away.
type stats struct {
	T              int
	all            [agents][]moments
	lab            [][agents][]moments
	agentPublished [agents]int
	taskNames      []string
}

type moments struct {
	n       int
	sum, sq float64
}

func newStats(L, T int) *stats {
	s := &stats{T: T, lab: make([][agents][]moments, L)}
	for a := 0; a < agents; a++ {
		s.all[a] = make([]moments, T)
		for l := range s.lab {
			s.lab[l][a] = make([]moments, T)
		}
	}
	for t := 0; t < T; t++ {
		s.taskNames = append(s.taskNames, fmt.Sprintf("t%04d", t))
	}
	return s
}

func (s *stats) add(r *run) {
	for _, m := range []*moments{&s.all[r.agent][r.task], &s.lab[r.lab][r.agent][r.task]} {
		m.n++
		m.sum += r.score
		m.sq += r.score * r.score
	}
	s.agentPublished[r.agent]++
}

// others is the other labs' statistics of agent a, sorted by task name.
func (s *stats) others(lab, a int) []protocol.TaskStats {
	out := make([]protocol.TaskStats, 0, s.T)
	for t := 0; t < s.T; t++ {
		all, own := s.all[a][t], s.lab[lab][a][t]
		n := all.n - own.n
		if n < 1 {
			continue
		}
		sum, sq := all.sum-own.sum, all.sq-own.sq
		m := sum / float64(n)
		sd := 0.0
		if n > 1 {
			sd = math.Sqrt(max(0, (sq-sum*m)/float64(n-1)))
		}
		out = append(out, protocol.TaskStats{Task: s.taskNames[t], Mean: m, SD: sd, Count: n})
	}
	return out
}

// pooledSD is the spread of other labs' results of agent a within a task, pooled over the
// tasks, at least floor: the per-run spread a pair test is scaled by (it includes the labs'
// bias spread, as a node's estimate would).
func (s *stats) pooledSD(lab, a int, floor float64) float64 {
	sd, _ := s.pooled(lab, a, floor)
	return sd
}

// pooled is pooledSD with its degrees of freedom.
func (s *stats) pooled(lab, a int, floor float64) (float64, int) {
	var ss float64
	var df int
	for _, r := range s.others(lab, a) {
		if r.Count >= 2 {
			ss += r.SD * r.SD * float64(r.Count-1)
			df += r.Count - 1
		}
	}
	if df == 0 {
		return floor, 0
	}
	return max(floor, math.Sqrt(ss/float64(df))), df
}

func (s *stats) residuals(runs []*run, a int, minSD float64) []float64 {
	var rs []protocol.TaskScore
	var lab int
	for _, r := range runs {
		if r.published && r.agent == a {
			rs = append(rs, protocol.TaskScore{Task: s.taskNames[r.task], Score: r.score})
			lab = r.lab
		}
	}
	if len(rs) == 0 {
		return nil
	}
	return protocol.Residuals(rs, s.others(lab, a), minSD)
}

// impactOf weighs a lab's unaudited published results of agent a (returned with the runs
// they are, in the same order) against other labs' results (protocol.ImpactWeight: the
// weight, and the results of tasks nobody else ran), and picks its movers on the published
// ledger itself (counted, the counted runs' moments): the group moves the rank when the
// ledger with all its results counted ranks the target against its neighbour otherwise than
// the ledger with ordinary results in their place (the other labs' mean and spread on each
// result's task); its movers are the largest contributions in that direction taken
// until the rest no longer does (protocol.RankMovers). Asking the intervals, not a margin on
// the mean, also sees what a result does to an interval's width: a lifted run widens its
// agent's interval, which by itself can turn a separation into a tie.
func impactOf(c Config, s *stats, labRuns []*run, a int, counted [agents][]moments, nCounted int) (protocol.Impact, []*run) {
	var pendingScores []protocol.TaskScore
	var runs []*run
	lab := -1
	for _, x := range labRuns {
		if x.published && x.agent == a && !x.audited {
			lab = x.lab
			break
		}
	}
	if lab < 0 {
		return protocol.Impact{}, nil
	}
	ref := s.others(lab, a)
	refMean := make([]float64, s.T)
	for t := range refMean {
		refMean[t] = math.NaN()
	}
	for _, r := range ref {
		t, _ := strconv.Atoi(r.Task[1:]) // taskNames: "t%04d"
		refMean[t] = r.Mean
	}
	without := [agents][]moments{slices.Clone(counted[0]), slices.Clone(counted[1])}
	for _, x := range labRuns {
		if x.published && x.agent == a && !x.audited {
			pendingScores = append(pendingScores, protocol.TaskScore{Task: s.taskNames[x.task], Score: x.score})
			runs = append(runs, x)
			if x.counted {
				without[a][x.task].add(x.score, -1)
			}
		}
	}
	// The weight; its margin-based movers are replaced below by the ledger's own answer.
	imp := protocol.ImpactWeight(pendingScores, ref, max(1, nCounted), math.Inf(1), math.Inf(1), c.Rate, c.Sigma/4)
	// The baseline: the group's results replaced by ordinary ones, the other labs' mean on
	// each result's task with their spread (an ordinary lab's results widen the interval as
	// much as honest noise does, and no more).
	sd, df := s.pooled(lab, a, c.Sigma/4)
	ordinaryAt := func(m *moments, t, sign int, off float64) {
		v := refMean[t] + off
		m.n += sign
		m.sum += float64(sign) * v
		m.sq += float64(sign) * (v*v + sd*sd)
	}
	ordinary := func(m *moments, t, sign int) { ordinaryAt(m, t, sign, 0) }
	base := [agents][]moments{slices.Clone(without[0]), slices.Clone(without[1])}
	with := [agents][]moments{slices.Clone(without[0]), slices.Clone(without[1])}
	for _, x := range runs {
		with[a][x.task].add(x.score, 1)
		if !math.IsNaN(refMean[x.task]) {
			ordinary(&base[a][x.task], x.task, 1)
		}
	}
	relBase, relWith := rankRel(ledgerOf(base)), rankRel(ledgerOf(with))
	contrib := make([]float64, len(runs))
	for k, x := range runs {
		if !math.IsNaN(refMean[x.task]) {
			contrib[k] = x.score - refMean[x.task]
		}
	}
	// Pivotal: could the group's own honest noise, in a direction, change the rank? Then its
	// results beyond protocol.OutlierZ spreads that way are held as movers, whether or not
	// the group moves the rank as it stands.
	// What honest noise could do is judged by the spread's upper bound: early on, with few
	// results per task, the estimate is often far too low.
	span := protocol.PivotalSpan(len(runs), protocol.SpreadUpper(sd, df), nCounted+len(runs)) * float64(nCounted+len(runs)) / float64(len(runs))
	if math.IsInf(span, 1) {
		span = 1e9
	}
	pivotal := false
	for _, dir := range []int{1, -1} {
		shifted := [agents][]moments{slices.Clone(without[0]), slices.Clone(without[1])}
		for _, x := range runs {
			if !math.IsNaN(refMean[x.task]) {
				ordinaryAt(&shifted[a][x.task], x.task, 1, float64(dir)*span)
			}
		}
		if rankRel(ledgerOf(shifted)) != relBase {
			pivotal = true
		}
	}
	out := append(protocol.Outliers(contrib, sd, 1, protocol.OutlierZ), protocol.Outliers(contrib, sd, -1, protocol.OutlierZ)...)
	if pivotal {
		imp.Movers = out
	}

	if relWith == relBase {
		return imp, runs
	}
	// rankRel is the target's standing: the group raises its agent when it raises the
	// target's, or lowers the neighbour's.
	dir := 1
	if (relWith > relBase) != (a == target) {
		dir = -1
	}
	imp.MovesRank = true
	outliers := imp.Movers
	swap := func(taken []int, sign int) {
		for _, k := range taken {
			t := runs[k].task
			with[a][t].add(runs[k].score, -sign)
			ordinary(&with[a][t], t, sign)
		}
	}
	imp.Movers = protocol.RankMovers(contrib, dir, func(taken []int) bool {
		swap(taken, 1)
		moved := rankRel(ledgerOf(with)) != relBase
		swap(taken, -1)
		return moved
	})
	for _, k := range outliers {
		if !slices.Contains(imp.Movers, k) {
			imp.Movers = append(imp.Movers, k)
		}
	}
	return imp, runs
}

// countedMoments are the counted ledger's moments per (agent, task), and its result count
// per agent.
func countedMoments(perLab [][]*run, T int) ([agents][]moments, [agents]int) {
	m := newMoments(T)
	var n [agents]int
	for _, rs := range perLab {
		for _, r := range rs {
			if r.published && r.counted {
				m[r.agent][r.task].add(r.score, 1)
				n[r.agent]++
			}
		}
	}
	return m, n
}

// drawGroup weighs one (lab, agent) group of unaudited results, draws its runs at their
// present thresholds and holds its movers; it reports whether any run's hold changed.
func drawGroup(c Config, st *stats, labRuns []*run, a int, cM [agents][]moments, cN [agents]int, L int, pending *[]*run, beta *[8]byte) bool {
	imp, group := impactOf(c, st, labRuns, a, cM, cN[a])
	base := protocol.AuditThreshold(imp.Lambda, L-1)
	changed := false
	for k, r := range group {
		isMover := slices.Contains(imp.Movers, k)
		th := base
		if isMover {
			th = protocol.AuditThreshold(protocol.MoverLambda(imp.Lambda, r.waited), L-1)
		}
		for r.drawn < len(r.draws) {
			d := r.draws[r.drawn]
			binary.BigEndian.PutUint64(beta[:], d.u)
			if !protocol.AuditDrawn(beta[:], th) {
				break
			}
			if len(r.auditsDue) == 0 {
				*pending = append(*pending, r)
			}
			r.auditsDue = append(r.auditsDue, d.lab)
			// A draw at the group's own rate picks runs without regard to their scores; a
			// draw only a mover's rate reached picks the highest, so its re-run regresses to
			// the mean and must not feed the statistical test.
			r.unbiased = append(r.unbiased, protocol.AuditDrawn(beta[:], base))
			r.drawn++
		}
		if isMover && len(r.auditsDue) > 0 {
			r.mover = true
		}
		// A mover is audited before it counts: held while it carries a rank move or while
		// the audits it was held for are under way.
		held := isMover || slices.Contains(imp.Unreferenced, k) || (r.held && len(r.auditsDue) > 0)
		// Within a round a hold only tightens, so the passes settle.
		if held && !r.held {
			r.held, changed = true, true
		}
	}
	return changed
}

// Goals are the targets at the default rate.
const (
	GoalCaught        = 0.99  // lower 95 % bound of caught before the rank moves
	GoalHonestFlagged = 0.001 // upper 95 % bound of networks with an honest lab flagged
	GoalCost          = 0.15  // audit GPU time over the campaign's
)

// Table writes results as a Markdown table, one row per network size and agent kind, each
// goal marked met or not by its bound.
func Table(rs []Result) string {
	mark := func(ok bool) string {
		if ok {
			return "✓"
		}
		return "✗"
	}
	s := "| labs | agents | caught before the rank moves (95 % lower) | rank never moved | caught at all | fabricated runs out when caught | honest labs flagged, networks (95 % upper) | honest movers held aside | audit GPU time / campaign's (95th pct.) | close pair, audits per run |\n"
	s += "|---:|---|---|---|---|---|---|---|---|---|\n"
	for _, r := range rs {
		kind := "stochastic"
		if r.RerunCorr > 0 {
			kind = fmt.Sprintf("stochastic, re-run ρ = %.2g", r.RerunCorr)
		}
		if r.Deterministic {
			kind = "deterministic"
		}
		caught, kept := "n/a (no network's rank moved)", "n/a"
		if r.Caught.Of > 0 {
			caught = fmt.Sprintf("%d/%d = %.1f %% (%.1f %%) %s", r.Caught.Count, r.Caught.Of, 100*r.Caught.Share, 100*r.Caught.Lower, mark(r.Caught.Lower >= GoalCaught))
			kept = fmt.Sprintf("%.1f %%", 100*r.RankKept.Share)
		}
		held := "none audited"
		if r.HonestHeldAside.Of > 0 {
			held = fmt.Sprintf("%.2f %% of %d", 100*r.HonestHeldAside.Share, r.HonestHeldAside.Of)
		}
		s += fmt.Sprintf("| %d | %s | %s | %s | %.1f %% | %.2f of %d | %d/%d (%.3f %%) %s | %s | %.1f %% (%.1f %%) %s | %.3f |\n",
			r.Labs, kind, caught, kept, 100*r.CaughtAny.Share, r.FabricatedPublished, r.FabricatedRuns,
			r.HonestFlagged.Count, r.HonestFlagged.Of, 100*r.HonestFlagged.Upper, mark(r.HonestFlagged.Upper < GoalHonestFlagged),
			held, 100*r.Cost, 100*r.CostUpper, mark(r.CostUpper <= GoalCost), r.PairCost)
	}
	return s
}

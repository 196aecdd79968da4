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
	Seed          uint64
}

// Defaults are the figures of docs/scoring.md's table.
var Defaults = Config{
	Labs: 10, Networks: 3000, RunsPerLab: 20, Tasks: 10, Agents: 10,
	Sigma: 0.1, TaskSpread: 0.2, HonestBias: 0.02,
	FabShare: 0.1, Lift: 0.3, RankSlack: 1.1,
	Rate: protocol.DefaultAuditRate, Bias: protocol.DefaultAuditBias, Z: protocol.DefaultAuditZ,
	Seed: 1,
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
	Labs          int  `json:"labs"`
	Networks      int  `json:"networks"`
	Deterministic bool `json:"deterministic"`
	// RankMoving counts the networks in which the fabrication, counted uncaught, would have
	// changed the agents' order at the end (noise makes some not); Caught is, of those, the
	// networks in which the dishonest lab was caught (proof or suspicion: its results held
	// aside) before the published order had moved.
	Caught Bound `json:"caught_before_rank_moves"`
	// CaughtAny is the share of all networks in which the dishonest lab was caught at all.
	CaughtAny Bound `json:"caught_any"`
	// FabricatedPublished is the mean number of fabricated runs the dishonest lab had
	// published when it was caught (over networks where it was), of FabricatedRuns.
	FabricatedPublished float64 `json:"fabricated_published_before_caught"`
	FabricatedRuns      int     `json:"fabricated_runs"`
	// HonestFlagged: networks in which any honest lab was flagged or proven.
	HonestFlagged Bound `json:"honest_flagged"`
	// Cost is audits per run of the campaign (each audit re-runs one run), with the 95 %
	// upper bound over networks (the 95th percentile of the networks' costs).
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
	var moving, caught, caughtAny, honest int
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
		}
		if o.caught {
			caughtAny++
			fabPublished += float64(o.fabPublishedAtCatch)
		}
		if o.honestFlagged {
			honest++
		}
		pairRuns := float64(agents * c.Labs * c.RunsPerLab)
		other := float64((c.Agents-agents)*c.Labs*c.RunsPerLab) * c.Rate
		costs = append(costs, (float64(o.pairAudits)+other)/(pairRuns+float64((c.Agents-agents)*c.Labs*c.RunsPerLab)))
		pairCost += float64(o.pairAudits) / pairRuns
	}
	res.Caught = bound(caught, moving)
	res.CaughtAny = bound(caughtAny, c.Networks)
	if caughtAny > 0 {
		res.FabricatedPublished = fabPublished / float64(caughtAny)
	}
	res.HonestFlagged = bound(honest, c.Networks)
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
	fabricated       bool
	published        bool
	counted          bool // counts in the published ledger now
	held             bool // drawn for an audit that must finish before it counts
	audited          bool // at least one audit finished
	auditsDue        []int
	draws            []draw // the other labs' draws on it, smallest first
	unbiased         []bool // per audit due: drawn at the group's rate, not only as a mover
	drawn            int    // how many of draws have been called
	verdicts         map[string][]string
}

type outcome struct {
	rankMoving, caughtBeforeMove, caught, honestFlagged bool
	fabricated, fabPublishedAtCatch                     int
	pairAudits                                          int
}

// simulate is one network: labs publish one run per round, in parallel; an audit drawn in a
// round finishes in the next (it takes one run's time); the published ledger is read at the
// end of every round.
func simulate(c Config, rng *rand.Rand) outcome {
	L, n, T := c.Labs, c.RunsPerLab, c.Tasks
	dishonest := 0
	bias := make([]float64, L)
	for l := range bias {
		bias[l] = rng.NormFloat64() * c.HonestBias
	}
	taskEffect := make([]float64, T)
	for t := range taskEffect {
		taskEffect[t] = rng.NormFloat64() * c.TaskSpread
	}
	fabricated := int(math.Ceil(c.FabShare * float64(n)))
	// The neighbour's lead: the fabrication, counted in full, exceeds it by RankSlack.
	lead := float64(fabricated) * c.Lift / float64(L*n) / c.RankSlack
	mean := [agents]float64{0.5 - lead, 0.5}
	// A deterministic agent still scores differently from seed to seed; what it cannot do is
	// differ on a re-run of the same seed (on the same GPU model).
	noise := c.Sigma

	// Each lab's runs: n of each agent, tasks dealt round-robin from a random start, in a
	// random order.
	perLab := make([][]*run, L)
	for l := 0; l < L; l++ {
		start := rng.IntN(T)
		for a := 0; a < agents; a++ {
			for i := 0; i < n; i++ {
				t := (start + i) % T
				h := mean[a] + taskEffect[t] + bias[l] + rng.NormFloat64()*noise
				perLab[l] = append(perLab[l], &run{lab: l, agent: a, task: t, score: h, honest: h})
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

	o := outcome{fabricated: fabricated}
	// Would the fabrication, never caught and all counted, change the order at the end?
	o.rankMoving = orderMoved(perLab, func(*run) bool { return true })

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
	audits, fabPublished := 0, 0
	caughtRound, movedRound := -1, -1
	var beta [8]byte
	rounds := agents * n
	for round := 0; round <= rounds; round++ {
		// Audits drawn last round finish now.
		for _, r := range pending {
			for i, aud := range r.auditsDue {
				audits++
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
					a := mean[r.agent] + taskEffect[r.task] + bias[aud] + rng.NormFloat64()*noise
					if r.unbiased[i] {
						pairs[r.lab][r.agent] = append(pairs[r.lab][r.agent], (r.score-a)/(noise*math.Sqrt2))
					}
					verdict = attest.VerdictInconclusive
				}
				if r.verdicts == nil {
					r.verdicts = map[string][]string{}
				}
				k := fmt.Sprint(aud)
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
							r.held = true
							break
						}
					}
				}
			} else if flag, _ := protocol.StatisticalFlag(pairs[r.lab][r.agent], c.Bias, c.Z, 1); flag {
				suspect[r.lab] = true
			}
		}
		next := pending[:0:0]
		for _, r := range pending {
			if len(r.auditsDue) > 0 {
				next = append(next, r)
			}
		}
		pending = next
		if round == rounds {
			break
		}
		// Each lab publishes its next run.
		for l := 0; l < L; l++ {
			r := perLab[l][round]
			r.published = true
			if r.fabricated {
				fabPublished++
			}
			st.add(r)
		}
		// Every (lab, agent) group of unaudited results is weighed again, and each of its
		// runs drawn at the group's present threshold.
		// New runs count unless held below; holding one can make another group's results
		// carry a move, so the weighing repeats until no hold changes (a few passes).
		for l := 0; l < L; l++ {
			perLab[l][round].counted = !suspect[l] && !proven[l]
		}
		for l := 0; l < L; l++ {
			for _, r := range perLab[l][:round+1] {
				if !r.audited && len(r.auditsDue) == 0 {
					r.held = false // weighed afresh below
				}
			}
		}
		for pass, changed := 0, true; changed && pass < 8; pass++ {
			changed = false
			for l := 0; l < L; l++ {
				for _, r := range perLab[l][:round+1] {
					r.counted = !r.held && !suspect[l] && !proven[l]
				}
			}
			cSum, cN := countedSums(perLab)
			for l := 0; l < L; l++ {
				for a := 0; a < agents; a++ {
					if drawGroup(c, st, perLab[l], a, cSum, cN, L, &pending, &beta) {
						changed = true
					}
				}
			}
			for l := 0; l < L; l++ {
				for _, r := range perLab[l][:round+1] {
					r.counted = !r.held && !suspect[l] && !proven[l]
				}
			}
		}
		// Lab-level statistical test (stochastic agents): each lab's results of each agent
		// against the other labs'.
		if !c.Deterministic {
			for l := 0; l < L; l++ {
				for a := 0; a < agents; a++ {
					if flag, _ := protocol.StatisticalFlag(st.residuals(perLab[l], a, c.Sigma/4), c.Bias, c.Z, 5); flag {
						suspect[l] = true
					}
				}
			}
		}
		if caughtRound < 0 && (suspect[dishonest] || proven[dishonest]) {
			caughtRound = round
			o.fabPublishedAtCatch = fabPublished
		}
		for l := 1; l < L; l++ {
			if suspect[l] || proven[l] {
				o.honestFlagged = true
			}
		}
		// The published ledger: runs count unless held for an audit, or their lab is set
		// aside or suspected.
		for l := 0; l < L; l++ {
			for _, r := range perLab[l][:round+1] {
				r.counted = !r.held && !suspect[l] && !proven[l]
			}
		}
		if movedRound < 0 && orderMoved(perLab, func(r *run) bool { return r.published && r.counted }) {
			movedRound = round
		}
	}
	o.caught = caughtRound >= 0
	o.caughtBeforeMove = o.caught && (movedRound < 0 || caughtRound < movedRound)
	o.pairAudits = audits
	return o
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
		if l != runner && done[fmt.Sprint(l)] == nil {
			cand = append(cand, l)
		}
	}
	rng.Shuffle(len(cand), func(i, j int) { cand[i], cand[j] = cand[j], cand[i] })
	return cand[:min(k, len(cand))]
}

// orderMoved: do the runs that pass keep (counted as published) put the target at or above
// its neighbour, while the same runs scored honestly would not?
func orderMoved(perLab [][]*run, keep func(*run) bool) bool {
	var sum, honest [agents]float64
	var cnt [agents]int
	for _, rs := range perLab {
		for _, r := range rs {
			if !keep(r) {
				continue
			}
			sum[r.agent] += r.score
			honest[r.agent] += r.honest
			cnt[r.agent]++
		}
	}
	if cnt[target] == 0 || cnt[neighbour] == 0 {
		return false
	}
	pub := sum[target]/float64(cnt[target]) >= sum[neighbour]/float64(cnt[neighbour])
	cf := honest[target]/float64(cnt[target]) >= honest[neighbour]/float64(cnt[neighbour])
	return pub && !cf
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
// they are, in the same order) against the counted ledger (sums and counts of counted runs
// per agent) with those results replaced by the other labs' means on their tasks: what the
// ledger would say had the lab's results been ordinary.
func impactOf(c Config, s *stats, labRuns []*run, a int, counted [agents]float64, nCounted [agents]int) (protocol.Impact, []*run) {
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
	for _, x := range labRuns {
		if x.published && x.agent == a && !x.audited {
			pendingScores = append(pendingScores, protocol.TaskScore{Task: s.taskNames[x.task], Score: x.score})
			runs = append(runs, x)
			if x.counted && !math.IsNaN(refMean[x.task]) {
				counted[a] -= x.score - refMean[x.task]
			}
		}
	}
	up, down := math.Inf(1), math.Inf(1)
	if nCounted[target] > 0 && nCounted[neighbour] > 0 {
		other := neighbour + target - a
		d := counted[other]/float64(nCounted[other]) - counted[a]/float64(nCounted[a])
		if d > 0 {
			up = d
		} else {
			down = -d
		}
	}
	return protocol.ImpactWeight(pendingScores, ref, max(1, nCounted[a]), up, down, c.Rate, c.Sigma/4), runs
}

// countedSums are the counted ledger's sums and counts per agent.
func countedSums(perLab [][]*run) (sum [agents]float64, n [agents]int) {
	for _, rs := range perLab {
		for _, r := range rs {
			if r.published && r.counted {
				sum[r.agent] += r.score
				n[r.agent]++
			}
		}
	}
	return sum, n
}

// drawGroup weighs one (lab, agent) group of unaudited results, draws its runs at their
// present thresholds and holds its movers; it reports whether any run's hold changed.
func drawGroup(c Config, st *stats, labRuns []*run, a int, cSum [agents]float64, cN [agents]int, L int, pending *[]*run, beta *[8]byte) bool {
	imp, group := impactOf(c, st, labRuns, a, cSum, cN)
	base := protocol.AuditThreshold(imp.Lambda, L-1)
	changed := false
	for k, r := range group {
		th := protocol.AuditThreshold(imp.LambdaOf(k), L-1)
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
		// A mover is audited before it counts: held while it carries a rank move or while
		// the audits it was held for are under way.
		held := slices.Contains(imp.Movers, k) || slices.Contains(imp.Unreferenced, k) || (r.held && len(r.auditsDue) > 0)
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
	GoalCost          = 0.15  // audits per run of the campaign
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
	s := "| labs | agents | caught before the rank moves (95 % lower) | caught at all | fabricated runs published before caught | honest labs flagged, networks (95 % upper) | audit cost: campaign (95th pct.) | close pair |\n"
	s += "|---:|---|---|---|---|---|---|---|\n"
	for _, r := range rs {
		kind := "stochastic"
		if r.Deterministic {
			kind = "deterministic"
		}
		caught := "n/a (no network's rank moved)"
		if r.Caught.Of > 0 {
			caught = fmt.Sprintf("%d/%d = %.1f %% (%.1f %%) %s", r.Caught.Count, r.Caught.Of, 100*r.Caught.Share, 100*r.Caught.Lower, mark(r.Caught.Lower >= GoalCaught))
		}
		s += fmt.Sprintf("| %d | %s | %s | %.1f %% | %.2f of %d | %d/%d (%.2f %%) %s | %.1f %% (%.1f %%) %s | %.1f %% |\n",
			r.Labs, kind, caught, 100*r.CaughtAny.Share, r.FabricatedPublished, r.FabricatedRuns,
			r.HonestFlagged.Count, r.HonestFlagged.Of, 100*r.HonestFlagged.Upper, mark(r.HonestFlagged.Upper < GoalHonestFlagged),
			100*r.Cost, 100*r.CostUpper, mark(r.CostUpper <= GoalCost), 100*r.PairCost)
	}
	return s
}

package scoring

import (
	"math"
	"slices"
)

// The impact rule of audits by re-execution (issue 44; docs/scoring.md "Audits", docs/design.md
// §9 "Fabricated runs"): how much a lab's unaudited results of an agent matter, which of them
// would move the agent's published rank (the movers, held until audited), and how a held
// mover's audits grow. One definition for the three that apply it: the ledger (attest holds
// movers), the daemons' coordinator (protocol draws their audits) and the audit simulator
// (protocol/auditsim). Pure; the arithmetic keeps to sums, products and quotients written so
// that no multiply-add can be fused (docs/design.md §7), since the ledger reads it.

// RankMoveAudits is the expected number of audits of a mover (a result that would move its
// agent's published rank, ImpactWeight) in the first epoch it is held: it does not count
// until audited, and each epoch it waits with no lab drawn the expectation doubles
// (MoverLambda), so every mover is audited, by one lab most often (1.3–1.4 audits per
// mover in the simulator, against 1.6 starting from 1). One audit is enough: a
// deterministic mismatch brings two more auditors in (DecideAudits), and a stochastic pair
// that does not clear keeps the result held (PairCleared).
const RankMoveAudits = 0.5

// MaxImpactWeight caps the weight of a group that deviates from other labs' results without
// moving a rank.
const MaxImpactWeight = 20.0

// ImpactFreeZ is the deviation, in standard errors of the group's mean, that costs nothing:
// honest noise lies within it.
const ImpactFreeZ = 2.0

// TaskStats summarises other labs' results of one (agent, task): their mean, their spread
// (sample standard deviation, between labs and seeds together) and how many there are.
type TaskStats struct {
	Task  string
	Mean  float64
	SD    float64
	Count int
}

// TaskScore is one result: its task and its normalized score.
type TaskScore struct {
	Task  string
	Score float64
}

// Residuals standardises a lab's results of an agent against other labs' results of the
// same (agent, task): (score − mean) / (sd · √(1 + 1/count)), the last factor for the
// uncertainty of the others' mean. Results of a task no other lab has two results of are left
// out (there is nothing to compare them with). The spread used is the largest of the task's
// own, the 95 % upper bound (SpreadUpper) of the spread pooled over all the reference's
// tasks, and minSD: a task with few other results can show a spread far below the true one
// by chance, and an honest lab must not be flagged for that (with the pooled estimate taken
// at its word, 10 of 3,000 simulated three-lab networks had an honest lab flagged; with its
// upper bound, 2 of 3,000).
func Residuals(results []TaskScore, reference []TaskStats, minSD float64) []float64 {
	pooled, df := pooledSpread(reference)
	if df > 0 {
		pooled = SpreadUpper(pooled, df)
	}
	var out []float64
	for _, r := range results {
		i, ok := findTask(reference, r.Task)
		if !ok || reference[i].Count < 2 {
			continue
		}
		sd := max(reference[i].SD, pooled, minSD) * math.Sqrt(1+1/float64(reference[i].Count))
		out = append(out, (r.Score-reference[i].Mean)/sd)
	}
	return out
}

// pooledSpread is the spread of the reference's results within a task, pooled over its
// tasks, with its degrees of freedom (0, 0 when no task has two results).
func pooledSpread(reference []TaskStats) (sd float64, df int) {
	var ss float64
	for _, r := range reference {
		if r.Count >= 2 {
			ss += float64(r.SD * r.SD * float64(r.Count-1))
			df += r.Count - 1
		}
	}
	if df == 0 {
		return 0, 0
	}
	return math.Sqrt(ss / float64(df)), df
}

func findTask(reference []TaskStats, task string) (int, bool) {
	return slices.BinarySearchFunc(reference, task, func(s TaskStats, t string) int {
		switch {
		case s.Task < t:
			return -1
		case s.Task > t:
			return 1
		}
		return 0
	})
}

// Impact is how much a lab's unaudited results of an agent, taken together, matter.
type Impact struct {
	// Shift is how far these results move the agent's mean normalized score compared with
	// the other labs' means on the same tasks: Σ(score − reference mean) / the agent's
	// result count. A lift split into many small results adds up here.
	Shift float64
	// Z is the group's deviation from the other labs: the sum of its residuals over √n.
	Z float64
	// MovesRank: counted, the group's results in one direction would change the agent's
	// published rank (their sum over the agent's result count ≥ the margin on that side,
	// RankMargins).
	MovesRank bool
	// Movers are the indices (into the pending results) of the results that carry the
	// move: the largest contributions in the move's direction, taken until the rest no
	// longer moves the rank, and a pivotal group's outliers (Pivotal), in index order.
	// Each is held and audited before it counts (MoverLambda). Empty when the group
	// neither moves a rank nor is pivotal.
	Movers []int
	// Pivotal: the group's own honest noise (PivotalSpan, at the spread's upper bound)
	// could change the rank; its results beyond OutlierZ spreads either way are then among
	// the Movers.
	Pivotal bool
	// Unreferenced are the indices of results of tasks no other lab has a result of yet:
	// nothing says whether they are ordinary, so they wait (do not count) until one does.
	Unreferenced []int
	// Weight multiplies the network's rate for each run of the group (1 to MaxImpactWeight);
	// Lambda, rate × Weight, is the expected audits of each run that is not a mover.
	Weight, Lambda float64
}

// ImpactWeight measures a lab's unaudited results of one agent (pending) against other
// labs' results of it (reference, sorted by task). agentResults is how many results the
// agent has in all (the pending ones included); up and down are how far the agent's mean,
// with the pending results replaced by the other labs' means, may move up or down before
// its published rank changes (RankMargins; +Inf where nothing can change it). Results that
// would move the published rank, and the outliers of a group whose own noise could move it,
// are audited before they count (Movers); results that lie far from other labs' weigh up to
// MaxImpactWeight; others weigh 1. Callers that hold the ledger's intervals ask the rank
// itself as auditsim does (RankMovers with the ledger's own question); up and down are
// the linear form of that question.
func ImpactWeight(pending []TaskScore, reference []TaskStats, agentResults int, up, down, rate, minSD float64) Impact {
	var imp Impact
	res := Residuals(pending, reference, minSD)
	contrib := make([]float64, len(pending))
	var shift float64
	for k, r := range pending {
		if i, ok := findTask(reference, r.Task); ok && reference[i].Count >= 1 {
			contrib[k] = r.Score - reference[i].Mean
			shift += contrib[k]
		} else {
			imp.Unreferenced = append(imp.Unreferenced, k)
		}
	}
	if agentResults > 0 {
		imp.Shift = shift / float64(agentResults)
	}
	if len(res) > 0 {
		var sum float64
		for _, r := range res {
			sum += r
		}
		imp.Z = sum / math.Sqrt(float64(len(res)))
	}
	imp.Weight = min(MaxImpactWeight, 1+max(0, math.Abs(imp.Z)-ImpactFreeZ))
	imp.Lambda = rate * imp.Weight
	// A group moves the rank if its contributions in one direction, taken alone, carry the
	// agent's mean past the margin on that side: results pulling the other way do not
	// offset them, or a lab could hide a lift behind results it lowered.
	var pos, neg float64
	for _, c := range contrib {
		if c > 0 {
			pos += c
		} else {
			neg -= c
		}
	}
	dir, gap, carried := 0.0, 0.0, 0.0
	if agentResults > 0 {
		n := float64(agentResults)
		switch {
		case pos/n >= up && (pos/n-up >= neg/n-down):
			dir, gap, carried = 1, up, pos
		case neg/n >= down:
			dir, gap, carried = -1, down, neg
		}
	}
	if sd, df := pooledSpread(reference); agentResults > 0 && len(pending) > 0 {
		span := PivotalSpan(len(pending), SpreadUpper(max(sd, minSD), df), agentResults)
		if imp.Pivotal = up <= span || down <= span; imp.Pivotal {
			imp.Movers = append(Outliers(contrib, max(sd, minSD), 1, OutlierZ), Outliers(contrib, max(sd, minSD), -1, OutlierZ)...)
		}
	}
	if dir == 0 {
		slices.Sort(imp.Movers)
		return imp
	}
	imp.MovesRank = true
	limit := gap * float64(agentResults)
	for _, k := range RankMovers(contrib, int(dir), func(taken []int) bool {
		rest := carried
		for _, k := range taken {
			rest -= float64(dir * contrib[k])
		}
		return rest >= limit
	}) {
		if !slices.Contains(imp.Movers, k) {
			imp.Movers = append(imp.Movers, k)
		}
	}
	slices.Sort(imp.Movers)
	return imp
}

// RankMovers picks a group's movers: its results in the move's direction dir (+1: those
// above the other labs' mean, contrib > 0; −1: below), largest contribution first (ties by
// index, so every node picks the same), taken until moves reports that the group without the
// ones taken no longer changes the published rank. moves is the ledger's own question (for
// ImpactWeight, the group's contributions against the margin; a caller holding the ledger's
// intervals can ask it of them, which also sees what a result does to an interval's width).
func RankMovers(contrib []float64, dir int, moves func(taken []int) bool) []int {
	d := float64(dir)
	order := make([]int, 0, len(contrib))
	for k, c := range contrib {
		if d*c > 0 {
			order = append(order, k)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := d*contrib[a], d*contrib[b]
		switch {
		case ca > cb:
			return -1
		case ca < cb:
			return 1
		}
		return 0
	})
	var taken []int
	for _, k := range order {
		if !moves(taken) {
			break
		}
		taken = append(taken, k)
	}
	return taken
}

// LambdaOf is the expected audits of pending result k of the group imp describes, in the
// first epoch a mover is held (MoverLambda for the later ones).
func (imp *Impact) LambdaOf(k int) float64 {
	if slices.Contains(imp.Movers, k) {
		return MoverLambda(imp.Lambda, 0)
	}
	return imp.Lambda
}

// MoverLambda is the expected audits of a held mover that has waited epochsHeld ledger
// epochs with no lab drawn for it: RankMoveAudits (or the group's lambda, if larger),
// doubled each epoch. A lab's draw is a fixed number (its VRF output on the run), so raising
// the threshold adds the labs with the next-smallest draws and re-draws none: the first
// lab drawn is the one whose output is smallest, which neither it nor the runner chose.
// Holding is what keeps a mover from moving the published rank; the doubling is what gets
// every mover audited, so it cannot stay held unresolved and no mover counts unaudited.
func MoverLambda(lambda float64, epochsHeld int) float64 {
	return max(lambda, RankMoveAudits) * math.Pow(2, float64(min(max(epochsHeld, 0), 60)))
}

// RankInterval is one agent on the published ledger: its mean and the half-width of its
// 95 % interval (docs/scoring.md §2, §4).
type RankInterval struct {
	Mean, Half float64
}

// SeparatedAbove reports whether a is published above b: a's lower bound is above b's upper
// bound (docs/scoring.md §4, "Rank", Chatbot Arena's convention). Agents neither of which is
// separated above the other share a rank.
func SeparatedAbove(a, b RankInterval) bool {
	return a.Mean-a.Half > b.Mean+b.Half
}

// RankMargins is how far agent's mean may move up or down (its interval's width kept)
// before its published rank changes against any of others: the rank counts the agents
// separated above it (SeparatedAbove), so it changes when one of them stops being
// separated above, or a tied agent becomes separated below or above. +Inf where no move
// changes it. This is what ImpactWeight's up and down take: an order the ledger publishes
// as a tie (the two agents within each other's noise) is no rank a result moves until it
// carries the agent out of the tie, so honest noise inside a tie makes no movers.
func RankMargins(agent RankInterval, others []RankInterval) (up, down float64) {
	up, down = math.Inf(1), math.Inf(1)
	for _, o := range others {
		lo, hi := agent.Mean-agent.Half, agent.Mean+agent.Half
		switch {
		case SeparatedAbove(o, agent):
			// Rising by more than o's lower bound minus our upper bound ties us with o.
			up = min(up, (o.Mean-o.Half)-hi)
		case SeparatedAbove(agent, o):
			down = min(down, lo-(o.Mean+o.Half))
		default:
			// Tied: rising until our lower bound passes o's upper bound puts us above o;
			// falling until our upper bound is below o's lower bound puts us below it.
			up = min(up, (o.Mean+o.Half)-lo)
			down = min(down, hi-(o.Mean-o.Half))
		}
	}
	return max(up, 0), max(down, 0)
}

// PivotalZ and OutlierZ: a group of results that does not move its agent's published rank
// is pivotal when its own honest noise could: shifted by PivotalZ standard errors of its
// sum (PivotalSpan) at the spread's upper bound (SpreadUpper), it would change the rank. Such a group's results beyond OutlierZ
// spreads from the other labs' mean, in that direction, are held and audited as movers
// are. Why: a lift just large enough to change a rank is, summed over its lab's results,
// within that lab's own noise (at 3 labs, 10 % of 20 runs lifted by 3σ is 0.6 against a
// noise of 0.45): nothing in the group's sum tells it from an honest lab whose results
// happen to be low, but each lifted result still lies about 3 spreads above the others'.
const (
	PivotalZ = 3.0
	OutlierZ = 1.0
)

// PivotalSpan is how far a group of m results, each with spread sd, moves its agent's mean
// over agentResults results by honest noise of PivotalZ standard errors: PivotalZ·sd·√m /
// agentResults.
func PivotalSpan(m int, sd float64, agentResults int) float64 {
	if m <= 0 || agentResults <= 0 {
		return 0
	}
	return PivotalZ * sd * math.Sqrt(float64(m)) / float64(agentResults)
}

// SpreadUpper is the one-sided 95 % upper bound of a spread estimated as sd from df degrees
// of freedom: sd·√(df / χ²₀.₀₅(df)), the chi-square quantile by Wilson and Hilferty's
// approximation (above the exact bound by under 4 % from 3 degrees of freedom, 1 % from 10). Early in a campaign a task has few
// results and its spread comes out low by chance as often as not; a rule that decides what
// honest noise could do must not take the low estimate at its word. +Inf without degrees
// of freedom.
func SpreadUpper(sd float64, df int) float64 {
	if df <= 0 {
		return math.Inf(1)
	}
	k := float64(df)
	h := 2 / (9 * k)
	c := 1 - h - float64(1.6448536269514722*math.Sqrt(h))
	if c <= 0 {
		return math.Inf(1)
	}
	return sd * math.Sqrt(k/(k*c*c*c))
}

// Outliers are the indices of the contributions (result − other labs' mean on its task)
// beyond z spreads sd in direction dir (+1 above, −1 below).
func Outliers(contrib []float64, sd float64, dir int, z float64) []int {
	var out []int
	for k, c := range contrib {
		if float64(dir)*c > z*sd {
			out = append(out, k)
		}
	}
	return out
}

// DefaultAuditBias is the per-lab bias allowed by the statistical test, in units of the
// task's spread of results: hardware and drivers differ between labs, so a lab's results may
// sit consistently above or below the others' by this much without suspicion.
const DefaultAuditBias = 0.5

// PairCleared is the comparison of a stochastic agent's run with its audits (re-runs of
// the same agent, bundle and seed on other labs' nodes): the run clears unless it lies
// beyond its re-runs' mean in the direction dir (+1: the run scored higher; −1: lower) by
// more than the allowed per-lab bias plus z standard errors. sd is the agent's per-run
// spread on the task, rho the correlation of a same-seed re-run with the original (0 for an
// agent whose seed fixes nothing; an agent whose seed fixes its sampling re-runs close to
// the original), bias the allowance in units of sd. With k re-runs each correlated rho with
// the run and with each other, Var(run − their mean) = sd²·(1 − 2ρ + (1 + (k − 1)ρ)/k).
// False-positive rate: an honest run whose lab's and auditors' bias differ by at most the
// allowance fails to clear with probability ≤ 1 − Φ(z) (1 % at DefaultPairZ); a run picked
// for auditing because it scored high (a mover) fails more often (it regresses to the mean
// on re-run), which is why a pair that does not clear holds that one result aside and is not
// a flag on its lab.
func PairCleared(run float64, audits []float64, sd, rho, bias, z float64, dir int) (cleared bool, t float64) {
	k := float64(len(audits))
	if k == 0 || !(sd > 0) {
		return false, 0
	}
	var sum float64
	for _, a := range audits {
		sum += a
	}
	rho = min(max(rho, 0), 0.999)
	v := 1 - float64(2*rho) + (1+float64((k-1)*rho))/k
	d := run - sum/k
	if dir < 0 {
		d = -d
	}
	t = (d - float64(bias*sd)) / (sd * math.Sqrt(v))
	return !(t > z), t
}

// DefaultPairZ is PairCleared's critical value: one-sided tail 1 % for an honest run.
const DefaultPairZ = 2.326

// DefaultAuditMinSD is the impact measure's floor on a task's spread of scores: the example
// metrics' scale (accuracy in [0, 1]), and normalized scores' (the ledger's movers rule); a
// task whose other results agree exactly would otherwise give any deviation an infinite
// weight.
const DefaultAuditMinSD = 0.01

// StatsOf is the mean, sample spread and count of one task's scores xs.
func StatsOf(task string, xs []float64) TaskStats {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		d := x - mean
		ss += float64(d * d)
	}
	sd := 0.0
	if len(xs) > 1 {
		sd = math.Sqrt(ss / float64(len(xs)-1))
	}
	return TaskStats{Task: task, Mean: mean, SD: sd, Count: len(xs)}
}

// Z95 is the two-sided 95 % normal quantile of the intervals the movers rule asks.
const Z95 = 1.959963984540054

// AgentInterval is an agent's interval as the movers rule asks it (the ledger's HoldMovers
// and the simulator alike): its mean normalized score and the half-width of its 95 %
// interval, Z95 standard errors of a mean stratified by task, √(s²/N) with s² the variance
// within tasks pooled over them (what the ledger's stratified bootstrap estimates, without
// its zero width where a task has one result). at(i) gives task i's count, sum and sum of
// squares, for i < tasks, in a fixed order. Until some task has two results the half-width
// is +Inf: nothing is published as separated. No result: a NaN mean.
func AgentInterval(tasks int, at func(i int) (n int, sum, sq float64)) RankInterval {
	var n, df int
	var sum, ss float64
	for i := 0; i < tasks; i++ {
		xn, xsum, xsq := at(i)
		if xn <= 0 {
			continue
		}
		n += xn
		df += xn - 1
		sum += xsum
		ss += max(0, xsq-xsum*xsum/float64(xn))
	}
	switch {
	case n == 0:
		return RankInterval{Mean: math.NaN()}
	case df == 0:
		return RankInterval{Mean: sum / float64(n), Half: math.Inf(1)}
	}
	return RankInterval{Mean: sum / float64(n), Half: Z95 * math.Sqrt(ss/float64(df)/float64(n))}
}

package protocol

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/evalmesh/evalmesh/attest"
)

// Audits by re-execution (issue 44; docs/scoring.md "Audits", docs/design.md §9): which runs
// a node must re-execute (the draw), how much a run's results weigh (the impact), and how an
// audit's result is judged (deterministic comparison, the statistical test, the auditors'
// vote). Everything here is a pure function of its arguments, so every node decides the same
// from the same inputs; the caller (the coordinator) gathers the inputs and does the runs.
// Where a decision reaches the ledger, the arithmetic keeps to sums, products and quotients
// written so that no multiply-add can be fused (docs/design.md §7).

// DefaultAuditRate is the expected number of audits of a run of ordinary impact (weight 1):
// the network document's ledger.audits.rate when it sets none. The audit simulator
// (`evalmesh sim audits`, docs/scoring.md "Audits") shows no rate it tried meets every goal
// of issue 44 yet; what catches a rank-changing fabrication is the rank-move rule
// (RankMoveAudits), not this rate, which mostly sets the cost of ordinary runs. 0.05 keeps
// that cost at 5 % of a campaign's GPU time.
const DefaultAuditRate = 0.05

// RankMoveAudits is the expected number of audits of each run in a group of results that
// would move its agent's rank (ImpactWeight): such results are held until audited, so they
// are drawn near-certainly, whatever the network's rate. P(a run escapes) = e^-3 ≈ 5 %.
const RankMoveAudits = 3.0

// MaxImpactWeight caps the weight of a group that deviates from other labs' results without
// moving a rank.
const MaxImpactWeight = 20.0

// ImpactFreeZ is the deviation, in standard errors of the group's mean, that costs nothing:
// honest noise lies within it.
const ImpactFreeZ = 2.0

// DefaultAuditBias is the per-lab bias allowed by the statistical test, in units of the
// task's spread of results: hardware and drivers differ between labs, so a lab's results may
// sit consistently above or below the others' by this much without suspicion.
const DefaultAuditBias = 0.5

// DefaultAuditZ is the statistical test's critical value: one-sided tail 1e-6 per test (see
// StatisticalFlag for the false-positive rate).
const DefaultAuditZ = 4.753

// AuditDrawn reports whether a node's VRF output beta (attest.AuditDraw) draws it to audit a
// run whose per-node threshold is threshold (AuditThreshold): the first 8 bytes of beta, big
// endian, as a fraction of 2^64, below the threshold. beta is uniform and unique per node
// key and run, so the node cannot choose its draw, and nobody else can compute it.
func AuditDrawn(beta []byte, threshold float64) bool {
	if len(beta) < 8 || !(threshold > 0) {
		return false
	}
	if threshold >= 1 {
		return true
	}
	u := float64(binary.BigEndian.Uint64(beta[:8])>>11) / (1 << 53)
	return u < threshold
}

// AuditThreshold is the probability that one auditing lab is drawn for a run, when
// auditors labs other than the runner's can re-run it: expected audits λ spread evenly,
// λ / auditors, capped at 1. Each lab draws once per run (with the node the coordinator
// designates for the slot), so the expected number of audits of a run is λ whatever the
// network's size, and P(at least one) ≈ 1 − e^-λ.
func AuditThreshold(lambda float64, auditors int) float64 {
	if auditors <= 0 || !(lambda > 0) {
		return 0
	}
	return min(1, lambda/float64(auditors))
}

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
// own, the spread pooled over all the reference's tasks, and minSD: a task with few other
// results can show a spread far below the true one by chance, and an honest lab must not be
// flagged for that.
func Residuals(results []TaskScore, reference []TaskStats, minSD float64) []float64 {
	var ss, df float64
	for _, r := range reference {
		if r.Count >= 2 {
			v := r.SD * r.SD
			ss += v * float64(r.Count-1)
			df += float64(r.Count - 1)
		}
	}
	pooled := 0.0
	if df > 0 {
		pooled = math.Sqrt(ss / df)
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
	// MovesRank: counted, the group's results in one direction would carry the agent past
	// the neighbour on that side (their sum over the agent's result count ≥ the gap).
	MovesRank bool
	// Movers are the indices (into the pending results) of the results that carry the
	// move: the largest contributions in the move's direction, taken until the rest no
	// longer moves the rank. Each is audited before it counts (Lambda RankMoveAudits).
	// Empty when the group does not move a rank.
	Movers []int
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
// without the pending results, lies below the next agent above and above the next agent
// below (+Inf where there is none). Results that would move the rank are audited before
// they count (Movers); results that lie far from other labs' weigh up to MaxImpactWeight;
// others weigh 1.
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
	// agent past the neighbour on that side: results pulling the other way do not offset
	// them, or a lab could hide a lift behind results it lowered.
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
	if dir == 0 {
		return imp
	}
	imp.MovesRank = true
	order := make([]int, len(pending))
	for k := range order {
		order[k] = k
	}
	// Largest contribution in the move's direction first; ties by index, so every node
	// picks the same movers.
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := dir*contrib[a], dir*contrib[b]
		switch {
		case ca > cb:
			return -1
		case ca < cb:
			return 1
		}
		return 0
	})
	rest := carried
	limit := gap * float64(agentResults)
	for _, k := range order {
		if rest < limit || dir*contrib[k] <= 0 {
			break
		}
		imp.Movers = append(imp.Movers, k)
		rest -= dir * contrib[k]
	}
	return imp
}

// LambdaOf is the expected audits of pending result k of the group imp describes.
func (imp *Impact) LambdaOf(k int) float64 {
	if slices.Contains(imp.Movers, k) {
		return max(imp.Lambda, RankMoveAudits)
	}
	return imp.Lambda
}

// StatisticalFlag is the test for stochastic agents: do a lab's results of an agent (their
// residuals against other labs' results of the same tasks, Residuals) lie further from the
// others' than the allowed per-lab bias? T = (|mean residual| − bias) · √n, flagged when
// T > z. For an honest lab whose true bias is at most bias (in the same units) and whose
// residuals are independent with unit spread, P(flag) ≤ 1 − Φ(z) per test (1e-6 at
// DefaultAuditZ); docs/scoring.md states what that gives per network. Fewer than minN
// residuals are never flagged. A flag is suspicion, not proof: it holds that (lab, agent)
// aside and doubles its audit rate until audits clear or prove it.
func StatisticalFlag(residuals []float64, bias, z float64, minN int) (flag bool, t float64) {
	n := len(residuals)
	if n == 0 || n < minN {
		return false, 0
	}
	var sum float64
	for _, r := range residuals {
		sum += r
	}
	mean := sum / float64(n)
	t = (math.Abs(mean) - bias) * math.Sqrt(float64(n))
	return t > z, t
}

// CompareDeterministic judges an audit of an agent whose spec declares it deterministic:
// the same GPU model must give the same submission. Another GPU model (deterministic code
// can differ across hardware) or a re-execution without a submission is inconclusive.
func CompareDeterministic(runSubmission, runGPUModel string, audit attest.AuditResult) (verdict, reason string) {
	switch {
	case audit.GPUModel != runGPUModel:
		return attest.VerdictInconclusive, "audited on " + gpuName(audit.GPUModel) + ", the run on " + gpuName(runGPUModel)
	case audit.Submission == "" || runSubmission == "":
		return attest.VerdictInconclusive, "no submission to compare"
	case audit.Submission == runSubmission:
		return attest.VerdictMatch, ""
	}
	return attest.VerdictMismatch, "submission sha256 " + audit.Submission + " differs from the run's " + runSubmission
}

func gpuName(m string) string {
	if m == "" {
		return "no GPU"
	}
	return m
}

// AuditOutcome is what the audits of one run decide.
type AuditOutcome int

const (
	// AuditOpen: not decided (no decisive verdicts yet, a tie, or one lone mismatch: more
	// auditors are needed).
	AuditOpen AuditOutcome = iota
	// AuditCleared: a majority of the deciding labs found the same submission.
	AuditCleared
	// AuditProven: a deterministic mismatch confirmed by a majority of the deciding labs,
	// at least two of them: proof, which carries the misconduct consequence.
	AuditProven
)

// DecideAudits takes each auditing lab's verdict on one run (one per lab: a lab that gave
// both verdicts has none, as in re-score votes) and decides: proof needs at least two labs
// finding a mismatch and more mismatches than matches, so one dishonest auditor cannot
// frame a run alone; clearance needs more matches than mismatches. Inconclusive verdicts do
// not vote.
func DecideAudits(verdicts map[string][]string) AuditOutcome {
	match, mismatch := 0, 0
	for _, vs := range verdicts {
		m, mm := slices.Contains(vs, attest.VerdictMatch), slices.Contains(vs, attest.VerdictMismatch)
		switch {
		case m && mm:
		case m:
			match++
		case mm:
			mismatch++
		}
	}
	switch {
	case mismatch >= 2 && mismatch > match:
		return AuditProven
	case match > mismatch:
		return AuditCleared
	}
	return AuditOpen
}

package protocol

import (
	"encoding/binary"
	"math"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/scoring"
)

// Audits by re-execution (issue 44; docs/scoring.md "Audits", docs/design.md §9): which runs
// a node must re-execute (the draw), how much a run's results weigh (the impact), and how an
// audit's result is judged (deterministic comparison, the statistical test, the auditors'
// vote). Everything here is a pure function of its arguments, so every node decides the same
// from the same inputs; the caller (the coordinator) gathers the inputs and does the runs.
// Where a decision reaches the ledger, the arithmetic keeps to sums, products and quotients
// written so that no multiply-add can be fused (docs/design.md §7).

// DefaultAuditRate is the expected number of audits of a run of ordinary impact (weight 1):
// the network document's ledger.audits.rate when it sets none. What catches a fabrication
// that would move a published rank is the rank-move rule (movers are held and audited before
// they count, MoverLambda), not this rate: the rate audits the runs that move nothing, and
// sets the cost of every run that moves nothing (0.8 × rate of a campaign of ten agents, two
// of them close): the audit simulator (`evalmesh sim audits`, docs/scoring.md "The
// simulator and the goals") catches as many rank-changing fabrications at 0.02 as at 0.05,
// for 2.4 points less of the campaign's GPU time.
const DefaultAuditRate = 0.02

// MaxAuditRate bounds ledger.audits.rate: a rate above the number of other labs audits no
// more (each lab's draw is certain from there), and the bound keeps a typo (20 for 0.20)
// from being read as "re-run everything" without a word.
const MaxAuditRate = 16.0

// UnjudgedAudits is the expected number of audits the daemons' coordinator gives a result
// that no other lab's result of its task can judge yet. The ledger holds movers and the
// coordinator draws them at MoverLambda's doubling (AuditHeld), but a result nothing can be
// measured against is no mover, so it is drawn at once by up to three labs: every other lab
// of a network of four or fewer, enough for proof (DecideAudits needs two) without waiting
// for a doubling.
const UnjudgedAudits = 3.0

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

// CompareDeterministic judges an audit of an agent whose spec declares it deterministic
// (attest.CompareDeterministic: the ledger judges audits with the same function).
func CompareDeterministic(runSubmission, runGPUModel string, audit attest.AuditResult) (verdict, reason string) {
	return attest.CompareDeterministic(runSubmission, runGPUModel, audit)
}

// AuditOutcome is what the audits of one run decide (attest.AuditOutcome).
type AuditOutcome = attest.AuditOutcome

// The outcomes of DecideAudits.
const (
	AuditOpen    = attest.AuditOpen
	AuditCleared = attest.AuditCleared
	AuditProven  = attest.AuditProven
)

// DecideAudits decides one run's audits from each auditing lab's verdicts
// (attest.DecideAudits, which the ledger applies).
func DecideAudits(verdicts map[string][]string) AuditOutcome {
	return attest.DecideAudits(verdicts)
}

// The impact rule is scoring's (scoring/impact.go): one definition for the ledger, which holds
// movers, the coordinator and the simulator. These names keep protocol's callers as they were.
type (
	TaskStats    = scoring.TaskStats
	TaskScore    = scoring.TaskScore
	Impact       = scoring.Impact
	RankInterval = scoring.RankInterval
)

const (
	DefaultAuditBias = scoring.DefaultAuditBias
	DefaultPairZ     = scoring.DefaultPairZ
	RankMoveAudits   = scoring.RankMoveAudits
	MaxImpactWeight  = scoring.MaxImpactWeight
	ImpactFreeZ      = scoring.ImpactFreeZ
	PivotalZ         = scoring.PivotalZ
	OutlierZ         = scoring.OutlierZ
)

// Residuals is scoring.Residuals.
func Residuals(results []TaskScore, reference []TaskStats, minSD float64) []float64 {
	return scoring.Residuals(results, reference, minSD)
}

// ImpactWeight is scoring.ImpactWeight.
func ImpactWeight(pending []TaskScore, reference []TaskStats, agentResults int, up, down, rate, minSD float64) Impact {
	return scoring.ImpactWeight(pending, reference, agentResults, up, down, rate, minSD)
}

// RankMovers is scoring.RankMovers.
func RankMovers(contrib []float64, dir int, moves func(taken []int) bool) []int {
	return scoring.RankMovers(contrib, dir, moves)
}

// MoverLambda is scoring.MoverLambda.
func MoverLambda(lambda float64, epochsHeld int) float64 {
	return scoring.MoverLambda(lambda, epochsHeld)
}

// SeparatedAbove is scoring.SeparatedAbove.
func SeparatedAbove(a, b RankInterval) bool { return scoring.SeparatedAbove(a, b) }

// RankMargins is scoring.RankMargins.
func RankMargins(agent RankInterval, others []RankInterval) (up, down float64) {
	return scoring.RankMargins(agent, others)
}

// PivotalSpan is scoring.PivotalSpan.
func PivotalSpan(m int, sd float64, agentResults int) float64 {
	return scoring.PivotalSpan(m, sd, agentResults)
}

// SpreadUpper is scoring.SpreadUpper.
func SpreadUpper(sd float64, df int) float64 { return scoring.SpreadUpper(sd, df) }

// Outliers is scoring.Outliers.
func Outliers(contrib []float64, sd float64, dir int, z float64) []int {
	return scoring.Outliers(contrib, sd, dir, z)
}

// PairCleared is scoring.PairCleared.
func PairCleared(run float64, audits []float64, sd, rho, bias, z float64, dir int) (cleared bool, t float64) {
	return scoring.PairCleared(run, audits, sd, rho, bias, z, dir)
}

package scoring

import "math"

// Phi is the march-of-nines transform −log10|s − s_opt|, s_opt = 0 when lower is better,
// else 1. A score exactly at the optimum would be +inf; AIRS-Bench uses |0.999 − s_opt|
// instead (so 1.0 accuracy maps to 3 nines, 0 MAE to φ(0.999) ≈ 0.000435).
func Phi(s float64, lowerIsBetter bool) float64 {
	opt := 1.0
	if lowerIsBetter {
		opt = 0
	}
	d := math.Abs(s - opt)
	if d == 0 {
		d = math.Abs(0.999 - opt)
	}
	return -dlog10(d)
}

// NormalizedScore is AIRS-Bench's per-run normalized score
// NS = (φ(s) − φ(worst)) / (φ(sota) − φ(worst)), then, in upstream's order:
// NaN → 0, ±inf → 100, negative → 0, no upper clip. valid=false (failed run, no score)
// gives 0. worst = SOTA makes the denominator 0: a run better than both is +inf → 100,
// one equal to both is 0/0 → 0, one worse (possible only with the estimated worst) is
// −inf → 100, exactly as upstream's replace-inf-then-clip order does.
//
// As upstream (normalize_score_log), the |0.999 − s_opt| substitution applies to the run's
// score only: an anchor exactly at the optimum has φ = +inf, so SOTA at the optimum gives
// every run 0 (finite/inf, or inf/inf = NaN), and a worst at the optimum gives 0 as well.
func NormalizedScore(s, sota, worst float64, lowerIsBetter, valid bool) float64 {
	if !valid {
		return 0
	}
	fs, fw, ft := Phi(s, lowerIsBetter), phiAnchor(worst, lowerIsBetter), phiAnchor(sota, lowerIsBetter)
	return cleanNS((fs - fw) / (ft - fw))
}

// phiAnchor is φ without the exact-optimum substitution (+inf at the optimum).
func phiAnchor(s float64, lowerIsBetter bool) float64 {
	opt := 1.0
	if lowerIsBetter {
		opt = 0
	}
	return -dlog10(math.Abs(s - opt))
}

// LinearScore is the linear variant (s − worst) / (sota − worst), cleaned as upstream's
// normalize_score: NaN → 0, clipped at 0 (so −inf → 0). Upstream keeps +inf (worst = SOTA
// and a run better than both); JSON cannot carry it, so it is 100 here, as in the log
// variant. For lower-is-better tasks both differences are negative when s beats worst, so
// the ratio is positive either way.
func LinearScore(s, sota, worst float64, valid bool) float64 {
	if !valid {
		return 0
	}
	v := (s - worst) / (sota - worst)
	switch {
	case math.IsNaN(v) || v < 0:
		return 0
	case math.IsInf(v, 1):
		return 100
	}
	return v
}

func cleanNS(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, 0):
		return 100
	case v < 0:
		return 0
	}
	return v
}

// PopulationWorst is the worst valid score (max when lower is better, else min); ok is
// false when there is none.
func PopulationWorst(scores []float64, lowerIsBetter bool) (worst float64, ok bool) {
	for _, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			continue
		}
		if !ok || (lowerIsBetter && s > worst) || (!lowerIsBetter && s < worst) {
			worst, ok = s, true
		}
	}
	return worst, ok
}

// Tie is evalmesh's symmetric form of numpy.isclose(a, b, atol=1e-6) (rtol 1e-5):
// |a − b| ≤ 1e-6 + 1e-5·max(|a|, |b|), so that the verdict cannot depend on which player
// is called a.
func Tie(a, b float64) bool {
	// max by hand: math.Max's NaN and ±0 handling is not needed for finite scores and
	// would cost a call in the innermost loop of game counting.
	m, n := math.Abs(a), math.Abs(b)
	if n > m {
		m = n
	}
	// float64(): without it arm64 & co. may fuse this into one FMA, and a score pair
	// right at the boundary would tie on one architecture and not on another.
	return math.Abs(a-b) <= 1e-6+float64(1e-5*m)
}

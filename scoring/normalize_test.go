package scoring

import (
	"math"
	"testing"
)

func TestNormalizedScore(t *testing.T) {
	phi := func(s, opt float64) float64 { return -math.Log10(math.Abs(s - opt)) }
	tests := []struct {
		name           string
		s, sota, worst float64
		lower, valid   bool
		want           float64
	}{
		{"at sota", 0.9, 0.9, 0.5, false, true, 1},
		{"at worst", 0.5, 0.9, 0.5, false, true, 0},
		{"between", 0.8, 0.9, 0.5, false, true, (phi(0.8, 1) - phi(0.5, 1)) / (phi(0.9, 1) - phi(0.5, 1))},
		// Exact optimum: |0.999 − 1| inside the log, so 1.0 accuracy is "three nines".
		{"exact optimum higher", 1, 0.9, 0.5, false, true, (3 - phi(0.5, 1)) / (1 - phi(0.5, 1))},
		{"exact optimum lower", 0, 0.1, 1, true, true, (-math.Log10(0.999) - 0) / (1 - 0)},
		{"beyond sota no upper clip", 0.99, 0.9, 0.5, false, true, (2 - phi(0.5, 1)) / (1 - phi(0.5, 1))},
		{"worse than estimated worst clipped", 0.3, 0.9, 0.5, false, true, 0},
		{"invalid", 0.95, 0.9, 0.5, false, false, 0},
		// worst = SOTA: 0/0 → NaN → 0 at that score, x/0 → ±inf → 100 elsewhere.
		{"worst = sota, at it", 0.7, 0.7, 0.7, false, true, 0},
		{"worst = sota, better", 0.8, 0.7, 0.7, false, true, 100},
		{"worst = sota, worse (estimated anchor)", 0.6, 0.7, 0.7, false, true, 100},
		// Lower is better with a huge worst (KaggleWebTraffic MASE, estimated 5.03e14).
		{"huge worst lower", 1.0, 0.622, 502962963078372, true, true, (0 - phi(502962963078372, 0)) / (phi(0.622, 0) - phi(502962963078372, 0))},
		{"huge worst at sota", 0.622, 0.622, 502962963078372, true, true, 1},
		{"huge worst at worst", 502962963078372, 0.622, 502962963078372, true, true, 0},
		// Higher is better with a negative score (Spearman): φ(−0.5) = −log10(1.5).
		{"negative spearman", -0.5, 0.854, -0.5870786, false, true, (phi(-0.5, 1) - phi(-0.5870786, 1)) / (phi(0.854, 1) - phi(-0.5870786, 1))},
		// The 0.999 substitution is for the run's score only (upstream normalize_score_log):
		// an anchor at the optimum has φ = +inf. SOTA at the optimum: finite/inf = 0, and
		// a run at the optimum too is 0 — not 1, as substituting into the anchor would give.
		{"sota at optimum", 0.9, 1, 0.5, false, true, 0},
		{"sota and run at optimum", 1, 1, 0.5, false, true, 0},
		{"sota at optimum lower", 0, 0, 3, true, true, 0},
		// Worst at the optimum (every valid run perfect): (3 − inf)/(φ(sota) − inf) = NaN → 0.
		{"worst at optimum", 1, 0.9, 1, false, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NormalizedScore(tt.s, tt.sota, tt.worst, tt.lower, tt.valid)
			if !near(got, tt.want, 1e-12) {
				t.Fatalf("NS = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLinearScore(t *testing.T) {
	for _, c := range []struct {
		s, sota, worst, want float64
		valid                bool
	}{
		{0.7, 0.9, 0.5, 0.5, true},
		{0.4, 0.9, 0.5, 0, true}, // clipped
		{1.0, 0.9, 0.5, 1.25, true},
		{3, 1, 5, 0.5, true}, // lower is better: (3−5)/(1−5)
		{0.7, 0.9, 0.5, 0, false},
		{0.5, 0.5, 0.5, 0, true},   // 0/0
		{0.6, 0.5, 0.5, 100, true}, // +inf: upstream keeps inf; JSON cannot
		{0.4, 0.5, 0.5, 0, true},   // −inf clipped at 0, as upstream's clip(lower=0)
	} {
		if got := LinearScore(c.s, c.sota, c.worst, c.valid); !near(got, c.want, 1e-12) {
			t.Errorf("LinearScore(%v, %v, %v) = %v, want %v", c.s, c.sota, c.worst, got, c.want)
		}
	}
}

func TestPopulationWorst(t *testing.T) {
	if w, ok := PopulationWorst([]float64{0.3, math.NaN(), 0.1, 0.2}, false); !ok || w != 0.1 {
		t.Errorf("higher-is-better worst = %v %v", w, ok)
	}
	if w, ok := PopulationWorst([]float64{3, 1e14, 2}, true); !ok || w != 1e14 {
		t.Errorf("lower-is-better worst = %v %v", w, ok)
	}
	if _, ok := PopulationWorst(nil, true); ok {
		t.Error("worst of nothing")
	}
}

func TestTie(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		tie  bool
	}{
		{0, 1e-6, true},
		{0, 1.2e-6, false},
		{0.5, 0.5 + 1e-6, true},
		{0.5, 0.5 + 5e-6, true},  // rtol: 1e-6 + 1e-5·0.500005 ≈ 6.0e-6
		{0.5, 0.5 + 7e-6, false}, // beyond it
		{1e6, 1e6 + 10, true},    // rtol dominates at scale
		{1e6, 1e6 + 11, false},
		{-0.3, -0.3 - 4e-6, true},
	} {
		if got := Tie(c.a, c.b); got != c.tie {
			t.Errorf("Tie(%v, %v) = %v, want %v", c.a, c.b, got, c.tie)
		}
		if Tie(c.a, c.b) != Tie(c.b, c.a) || Tie(c.a, c.b) != Tie(-c.a, -c.b) {
			t.Errorf("Tie(%v, %v) not symmetric or not invariant under negation", c.a, c.b)
		}
	}
}

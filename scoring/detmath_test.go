package scoring

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ulps is the distance between a and b in units in the last place (0 when both are the
// same NaN/inf).
func ulps(a, b float64) uint64 {
	if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
		return 0
	}
	ia, ib := int64(math.Float64bits(a)), int64(math.Float64bits(b))
	if (ia < 0) != (ib < 0) {
		return math.MaxUint64
	}
	if ia > ib {
		return uint64(ia - ib)
	}
	return uint64(ib - ia)
}

// The deterministic functions are Go's portable algorithms (error < 1 ulp): within 2 ulps
// of package math, whose amd64 assembly has its own sub-ulp error the other way, and exact
// on the special cases.
func TestDetMathMatchesMath(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	fns := []struct {
		name string
		got  func(float64) float64
		want func(float64) float64
		gen  func() float64
	}{
		{"log", dlog, math.Log, func() float64 { return math.Ldexp(1+rng.Float64(), rng.IntN(2000)-1000) }},
		{"log10", dlog10, math.Log10, func() float64 { return math.Ldexp(1+rng.Float64(), rng.IntN(200)-100) }},
		{"exp", dexp, math.Exp, func() float64 { return float64(rng.Float64()*1400) - 700 }},
		{"log1p", dlog1p, math.Log1p, func() float64 {
			if rng.IntN(2) == 0 {
				return float64(rng.Float64()*2) - 0.999
			}
			return math.Ldexp(1+rng.Float64(), rng.IntN(120)-60)
		}},
	}
	for _, f := range fns {
		worst := uint64(0)
		for i := 0; i < 200000; i++ {
			x := f.gen()
			if u := ulps(f.got(x), f.want(x)); u > worst {
				worst = u
				if u > 2 {
					t.Fatalf("%s(%v) = %v, math gives %v (%d ulps)", f.name, x, f.got(x), f.want(x), u)
				}
			}
		}
	}
	specials := []struct {
		name string
		got  float64
		want float64
	}{
		{"log(0)", dlog(0), math.Inf(-1)},
		{"log(-1)", dlog(-1), math.NaN()},
		{"log(+inf)", dlog(math.Inf(1)), math.Inf(1)},
		{"log(1)", dlog(1), 0},
		{"log10(1000)", dlog10(1000), 3},
		{"log10(0.001)", dlog10(0.001), -3},
		{"exp(0)", dexp(0), 1},
		{"exp(-inf)", dexp(math.Inf(-1)), 0},
		{"exp(+inf)", dexp(math.Inf(1)), math.Inf(1)},
		{"exp(1000)", dexp(1000), math.Inf(1)},
		{"exp(NaN)", dexp(math.NaN()), math.NaN()},
		{"log1p(-1)", dlog1p(-1), math.Inf(-1)},
		{"log1p(-2)", dlog1p(-2), math.NaN()},
		{"log1p(0)", dlog1p(0), 0},
		{"log1p(1e-300)", dlog1p(1e-300), 1e-300},
	}
	for _, s := range specials {
		if ulps(s.got, s.want) > 1 {
			t.Errorf("%s = %v, want %v", s.name, s.got, s.want)
		}
	}
}

func TestCholeskySolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, P := range []int{1, 2, 3, 7, 40} {
		// A = MᵀM + P·I is positive definite.
		M := make([]float64, P*P)
		for i := range M {
			M[i] = float64(rng.Float64()*2) - 1
		}
		A := make([]float64, P*P)
		for i := 0; i < P; i++ {
			for j := 0; j < P; j++ {
				var s float64
				for k := 0; k < P; k++ {
					s += float64(M[k*P+i] * M[k*P+j])
				}
				A[i*P+j] = s
			}
			A[i*P+i] += float64(P)
		}
		x := make([]float64, P)
		for i := range x {
			x[i] = float64(i) - float64(P)/2
		}
		b := make([]float64, P)
		for i := 0; i < P; i++ {
			b[i] = dot(A[i*P:(i+1)*P], x)
		}
		L := append([]float64(nil), A...)
		if !cholesky(L, P) {
			t.Fatalf("P=%d: positive definite matrix rejected", P)
		}
		got := make([]float64, P)
		choleskySolve(L, P, b, got)
		for i := range got {
			if math.Abs(got[i]-x[i]) > 1e-9 {
				t.Fatalf("P=%d: x[%d] = %v, want %v", P, i, got[i], x[i])
			}
		}
	}
	// Singular (rank 1) and indefinite matrices are refused, as gonum's Factorize did.
	for _, a := range [][]float64{{1, 1, 1, 1}, {1, 2, 2, 1}, {0, 0, 0, 0}, {math.NaN(), 0, 0, 1}} {
		if cholesky(append([]float64(nil), a...), 2) {
			t.Errorf("cholesky accepted %v", a)
		}
	}
}

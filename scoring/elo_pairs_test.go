package scoring

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The parallel pair loops give the serial loops' bits: log-likelihood, gradient and
// sigmoids, with pairs that never played (c = 0 both ways, or one way), equal ratings
// (θ_i − θ_j = 0) and far-apart ones.
func TestPairParallelSameBits(t *testing.T) {
	defer func(old int) { pairParallelMinP = old }(pairParallelMinP)
	for _, P := range []int{2, 3, 17, 300} {
		rng := rand.New(rand.NewPCG(uint64(P), 7))
		c := make([]float64, P*P)
		for i := range c {
			switch rng.IntN(4) {
			case 0: // no games this way
			default:
				c[i] = float64(rng.IntN(50))
			}
		}
		for i := 0; i < P; i++ {
			c[i*P+i] = 0
		}
		theta := make([]float64, P)
		for i := range theta {
			theta[i] = rng.NormFloat64() * 3
			if i%5 == 1 {
				theta[i] = theta[i-1] // a zero difference
			}
			if i%11 == 2 {
				theta[i] = 40 // far from everyone
			}
		}
		pairParallelMinP = 1 << 30
		ll0 := LogLikelihood(c, theta)
		g0, s0 := make([]float64, P), make([]float64, P*(P-1)/2)
		gradientSig(c, theta, g0, s0, nil)
		pairParallelMinP = 1
		ll1 := LogLikelihood(c, theta)
		g1, s1 := make([]float64, P), make([]float64, P*(P-1)/2)
		for i := range s1 {
			s1[i] = math.NaN() // stale values must be overwritten
		}
		gradientSig(c, theta, g1, s1, nil)
		if math.Float64bits(ll0) != math.Float64bits(ll1) {
			t.Fatalf("P %d: log-likelihood serial %v, parallel %v", P, ll0, ll1)
		}
		for i := range g0 {
			if math.Float64bits(g0[i]) != math.Float64bits(g1[i]) {
				t.Fatalf("P %d: gradient %d serial %v, parallel %v", P, i, g0[i], g1[i])
			}
		}
		for k := range s0 {
			if math.Float64bits(s0[k]) != math.Float64bits(s1[k]) {
				t.Fatalf("P %d: sigmoid %d serial %v, parallel %v", P, k, s0[k], s1[k])
			}
		}
	}
}

// A ledger large enough for the parallel loops has the root the serial loops give, under
// both Elo bootstrap policies.
func TestPairParallelSameRoot(t *testing.T) {
	defer func(old int) { pairParallelMinP = old }(pairParallelMinP)
	rs, ti := synthResults(300, 3, 2, 4)
	for _, boot := range []string{EloBootstrapGames, EloBootstrapTasksLinearised} {
		var roots [2]string
		for k, minP := range []int{1 << 30, 1} {
			pairParallelMinP = minP
			l, err := ComputeLedger(rs, ti, Options{BootstrapRounds: 4, EloBootstrap: boot})
			if err != nil {
				t.Fatal(err)
			}
			roots[k] = l.Root()
		}
		if roots[0] != roots[1] {
			t.Fatalf("%s: serial loops root %s, parallel %s", boot, roots[0], roots[1])
		}
	}
}

package scoring

import (
	"math"
	"math/rand/v2"
)

// binomial draws from Binomial(n, p) exactly, with deterministic arithmetic on a given
// stream (so every node draws the same). For n·min(p,1−p) < 10 it inverts the CDF
// (expected O(n·p) steps); otherwise it uses Hörmann's (1993) BTRS transformed rejection
// with squeeze, as PyTorch's binomial sampler does: about 1.2 attempts per draw, and the
// exact log-density ratio only outside the squeeze region.
func binomial(rng *rand.ChaCha8, n int64, p float64) int64 {
	switch {
	case n <= 0 || p <= 0:
		return 0
	case p >= 1:
		return n
	case p > 0.5:
		return n - binomial(rng, n, 1-p)
	}
	if float64(n)*p < 10 { // a product compared, not added: nothing to fuse
		return binomialInversion(rng, n, p)
	}
	return binomialBTRS(rng, n, p)
}

func binomialInversion(rng *rand.ChaCha8, n int64, p float64) int64 {
	q := 1 - p
	s := p / q
	a := float64(n+1) * s
	r0 := dexp(float64(n) * dlog1p(-p))
	bound := min(float64(n), float64(float64(n)*p)+float64(10*math.Sqrt(float64(float64(n)*p*q)+1)))
	for {
		r := r0
		u := uniform01(rng)
		var x int64
		for u > r {
			u -= r
			x++
			if float64(x) > bound {
				break
			}
			r = float64(r * (a/float64(x) - s))
		}
		if float64(x) <= bound {
			return x
		}
	}
}

func binomialBTRS(rng *rand.ChaCha8, n int64, p float64) int64 {
	N := float64(n)
	spq := math.Sqrt(N * p * (1 - p))
	b := 1.15 + float64(2.53*spq)
	a := -0.0873 + float64(0.0248*b) + float64(0.01*p)
	c := float64(N*p) + 0.5
	vr := 0.92 - 4.2/b
	// r, alpha and m serve only the exact test below the squeeze, which about one draw in
	// five reaches: computed there, once per draw (the same values; two divisions fewer
	// on the common path, measured: docs/scoring.md §7).
	var r, alpha, m float64
	slowReady := false
	for {
		u := float64(uniform01(rng)) - 0.5 // Float64 is a product by 2⁻⁵³ (exact, but keep the package FMA-free)
		v := uniform01(rng)
		us := 0.5 - math.Abs(u)
		k := math.Floor(float64((float64(2*a)/us+b)*u) + c)
		if k < 0 || k > N {
			continue
		}
		if us >= 0.07 && v <= vr {
			return int64(k)
		}
		if !slowReady {
			r = p / (1 - p)
			alpha = float64((2.83 + 5.1/b) * spq)
			m = math.Floor(float64((N + 1) * p))
			slowReady = true
		}
		v = dlog(float64(v*alpha) / (a/float64(us*us) + b))
		upper := float64((m+0.5)*dlog((m+1)/float64(r*(N-m+1)))) +
			float64((N+1)*dlog((N-m+1)/(N-k+1))) +
			float64((k+0.5)*dlog(float64(r*(N-k+1))/(k+1))) +
			stirlingTail(m) + stirlingTail(N-m) - stirlingTail(k) - stirlingTail(N-k)
		if v <= upper {
			return int64(k)
		}
	}
}

// stirlingTail is log(k!) − [(k+½)·log(k+1) − (k+1) + ½·log(2π)]: exact below 10, the
// asymptotic series above (error < 1e-10 there).
func stirlingTail(k float64) float64 {
	if k < 10 {
		return stirlingTable[int(k)]
	}
	kp1sq := float64((k + 1) * (k + 1))
	return (1.0/12 - (1.0/360-1.0/1260/kp1sq)/kp1sq) / (k + 1)
}

var stirlingTable = [10]float64{
	0.08106146679532726, 0.04134069595540929, 0.02767792568499834,
	0.02079067210376509, 0.01664469118982119, 0.01387612882307075,
	0.01189670994589177, 0.01041126526197209, 0.009255462182712733,
	0.008330563433362871,
}

// uniform01 is rand.Rand's Float64 on the concrete generator (the same value from the same
// stream): the bootstrap draws hundreds of millions, and the interface call of *rand.Rand
// was a third of each draw's cost.
func uniform01(rng *rand.ChaCha8) float64 { return float64(rng.Uint64()<<11>>11) / (1 << 53) }

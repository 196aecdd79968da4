package scoring

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestStirlingTable(t *testing.T) {
	for k := 0; k < 10; k++ {
		lg, _ := math.Lgamma(float64(k + 1))
		want := lg - ((float64(k)+0.5)*math.Log(float64(k+1)) - float64(k+1) + 0.5*math.Log(2*math.Pi))
		if math.Abs(stirlingTable[k]-want) > 1e-14 {
			t.Errorf("stirlingTable[%d] = %v, want %v", k, stirlingTable[k], want)
		}
	}
	for _, k := range []float64{10, 50, 1e4} {
		lg, _ := math.Lgamma(k + 1)
		want := lg - ((k+0.5)*math.Log(k+1) - (k + 1) + 0.5*math.Log(2*math.Pi))
		if math.Abs(stirlingTail(k)-want) > 1e-10 {
			t.Errorf("stirlingTail(%v) = %v, want %v", k, stirlingTail(k), want)
		}
	}
}

// The sampler's histogram matches the exact pmf (inversion and BTRS regimes, p on both
// sides of ½), and its mean and variance match n·p and n·p·q at bootstrap-sized n.
func TestBinomialDistribution(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{1, 2})
	for _, c := range []struct {
		n int64
		p float64
	}{{20, 0.1}, {60, 0.3}, {200, 0.45}, {100, 0.8}, {1000, 0.02}} {
		const draws = 200000
		hist := make([]int, c.n+1)
		for i := 0; i < draws; i++ {
			k := binomial(rng, c.n, c.p)
			if k < 0 || k > c.n {
				t.Fatalf("Bin(%d, %v) drew %d", c.n, c.p, k)
			}
			hist[k]++
		}
		// Chi-square over cells with expected count ≥ 20.
		var chi2 float64
		cells := 0
		for k := int64(0); k <= c.n; k++ {
			lp := lchoose(c.n, k) + float64(k)*math.Log(c.p) + float64(c.n-k)*math.Log1p(-c.p)
			e := draws * math.Exp(lp)
			if e < 20 {
				continue
			}
			d := float64(hist[k]) - e
			chi2 += d * d / e
			cells++
		}
		// Mean of chi2 is cells−1; 5 standard deviations above it is a certain failure.
		if lim := float64(cells-1) + 5*math.Sqrt(2*float64(cells-1)); chi2 > lim {
			t.Errorf("Bin(%d, %v): chi² %.1f over %d cells, limit %.1f", c.n, c.p, chi2, cells, lim)
		}
	}
	for _, c := range []struct {
		n int64
		p float64
	}{{5_000_000_000, 1.7e-5}, {3_000_000, 0.37}, {80_000, 0.5}} {
		const draws = 20000
		var s, s2 float64
		for i := 0; i < draws; i++ {
			k := float64(binomial(rng, c.n, c.p))
			s += k
			s2 += k * k
		}
		mean := s / draws
		variance := s2/draws - mean*mean
		wantM, wantV := float64(c.n)*c.p, float64(c.n)*c.p*(1-c.p)
		if math.Abs(mean-wantM) > 5*math.Sqrt(wantV/draws) {
			t.Errorf("Bin(%d, %v): mean %.2f, want %.2f", c.n, c.p, mean, wantM)
		}
		if math.Abs(variance/wantV-1) > 0.05 {
			t.Errorf("Bin(%d, %v): variance %.1f, want %.1f", c.n, c.p, variance, wantV)
		}
	}
}

func lchoose(n, k int64) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// indexDrawer is uniform over [0, n), including n that do not divide 2^32.
func TestIndexDrawerUniform(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{4, 4})
	for _, n := range []uint32{1, 3, 7, 1000} {
		d := indexDrawer{rng: rng, n: n}
		hist := make([]float64, n)
		const draws = 300000
		for i := 0; i < draws; i++ {
			k := d.next()
			if k >= n {
				t.Fatalf("n=%d drew %d", n, k)
			}
			hist[k]++
		}
		e := float64(draws) / float64(n)
		var chi2 float64
		for _, h := range hist {
			chi2 += (h - e) * (h - e) / e
		}
		if df := float64(n - 1); chi2 > df+5*math.Sqrt(2*df)+1e-9 && n > 1 {
			t.Errorf("n=%d: chi² %.1f over %d cells", n, chi2, n)
		}
	}
}

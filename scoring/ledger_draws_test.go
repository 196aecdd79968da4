package scoring

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// refStratumDraws is the normalized-score bootstrap's inner loop as it was before
// addStratumDraws: a new indexDrawer per stratum, its fast path inlined. It also counts
// the draws that took the slow path (low half below n: where rejection is possible).
func refStratumDraws(rng *rand.ChaCha8, task []float64, s float64) (float64, int) {
	d := indexDrawer{rng: rng, n: uint32(len(task))}
	slow := 0
	for range task {
		if d.left == 0 {
			d.word, d.left = rng.Uint64(), 2
		}
		k, ok := d.fast()
		if !ok {
			k = d.nextSlow()
			slow++
		}
		s += task[k]
	}
	return s, slow
}

// addStratumDraws draws the indices the old indexDrawer loop drew, adds in the same order,
// and leaves the stream where it left it: strata of 1, 2, odd and even sizes, and one of
// 2^20+1 runs, where about one draw in 4,000 is rejected and drawn again.
func TestAddStratumDrawsMatchesIndexDrawer(t *testing.T) {
	vr := rand.New(rand.NewPCG(5, 6))
	slowTotal := 0
	for _, n := range []int{1, 2, 3, 4, 5, 49, 50, 51, 1000, 1<<20 + 1} {
		task := make([]float64, n)
		for i := range task {
			task[i] = vr.NormFloat64() * math.Pow(10, float64(vr.IntN(12)-6))
		}
		rounds := 3
		if n < 1000 {
			rounds = 200
		}
		a := rand.NewChaCha8([32]byte{byte(n), 7})
		b := rand.NewChaCha8([32]byte{byte(n), 7})
		var sa, sb float64
		for r := 0; r < rounds; r++ {
			var slow int
			sa, slow = refStratumDraws(a, task, sa)
			slowTotal += slow
			sb = addStratumDraws(b, task, sb)
			if math.Float64bits(sa) != math.Float64bits(sb) {
				t.Fatalf("n=%d round %d: sum %v, the indexDrawer loop's %v", n, r, sb, sa)
			}
		}
		if wa, wb := a.Uint64(), b.Uint64(); wa != wb {
			t.Fatalf("n=%d: the streams part after the draws (%x, %x)", n, wb, wa)
		}
	}
	if slowTotal == 0 {
		t.Fatal("no draw reached the rejection test: the comparison did not cover it")
	}
}

// refBootstrapMeans is bootstrapMeans, one worker, with the old inner loop.
func refBootstrapMeans(vals [][]float64, strata [][]int, rounds int, seed [32]byte) [][2]float64 {
	out := make([][2]float64, len(vals))
	means := make([]float64, rounds)
	for a := range vals {
		v, starts := vals[a], strata[a]
		rng := rand.NewChaCha8(roundSeed(seed, "ns", uint64(a)))
		for r := range means {
			var s float64
			for k, lo := range starts {
				hi := len(v)
				if k+1 < len(starts) {
					hi = starts[k+1]
				}
				s, _ = refStratumDraws(rng, v[lo:hi], s)
			}
			means[r] = s / float64(len(v))
		}
		sort.Float64s(means)
		out[a] = [2]float64{quantile(means, 0.025), quantile(means, 0.975)}
	}
	return out
}

// bootstrapMeans gives the intervals, to the bit, that the indexDrawer loop gave: agents
// with one run, one task, strata of uneven sizes, zeros and signed zeros among the scores.
func TestBootstrapMeansMatchesIndexDrawerLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	var vals [][]float64
	var strata [][]int
	for a := 0; a < 23; a++ {
		var v []float64
		var st []int
		for k := rng.IntN(6) + 1; k > 0; k-- {
			st = append(st, len(v))
			for n := rng.IntN(60) + 1; n > 0; n-- {
				switch rng.IntN(5) {
				case 0:
					v = append(v, 0)
				case 1:
					v = append(v, math.Copysign(0, -1))
				default:
					v = append(v, rng.Float64()*2-0.5)
				}
			}
		}
		vals, strata = append(vals, v), append(strata, st)
	}
	seed := [32]byte{3, 1, 4}
	got := bootstrapMeans(vals, strata, 150, seed)
	want := refBootstrapMeans(vals, strata, 150, seed)
	for a := range want {
		for e := 0; e < 2; e++ {
			if math.Float64bits(got[a][e]) != math.Float64bits(want[a][e]) {
				t.Fatalf("agent %d: interval %v, the indexDrawer loop's %v", a, got[a], want[a])
			}
		}
	}
}

// fitNewton from precomputed start sigmoids gives FitNewton's bits: weights with pairs
// that never met, a regularised fit, a start far from the optimum (the line search runs)
// and one at it.
func TestFitNewtonStartSigSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for trial := 0; trial < 40; trial++ {
		P := 2 + rng.IntN(30)
		c := make([]float64, P*P)
		for i := 0; i < P; i++ {
			for j := 0; j < P; j++ {
				if i != j && rng.IntN(4) != 0 {
					c[i*P+j] = float64(rng.IntN(50))
				}
			}
		}
		regulariseIfSeparated(c, P)
		var start []float64
		switch trial % 3 {
		case 1:
			start = make([]float64, P)
			for i := range start {
				start[i] = rng.NormFloat64() * 5
			}
		case 2:
			start = fitRobust(c, P, nil)
		}
		want, werr := FitNewton(c, P, start)
		got, gerr := fitNewton(c, P, start, startSigmoids(P, start))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("trial %d: error %v, FitNewton's %v", trial, gerr, werr)
		}
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("trial %d (P=%d): θ_%d = %v, FitNewton's %v", trial, P, i, got[i], want[i])
			}
		}
	}
}

// radixSortScores puts scores in the order the comparison sort (score, then owner) gives:
// ±0 mixed, repeated scores across owners, negatives, subnormals, huge and tiny values,
// all scores sharing their high bytes, and a single distinct value.
func TestRadixSortScoresMatchesCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	pools := [][]float64{
		{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 5e-324, -5e-324, math.MaxFloat64, -math.MaxFloat64, 1e-300, 3},
		{0.25, 0.2500000001, 0.2499999999, 0.25},
		{7},
	}
	for trial := 0; trial < 60; trial++ {
		pool := pools[trial%len(pools)]
		owners := 1 + rng.IntN(40)
		var G []ownedScore
		for r := 0; r < owners; r++ {
			for n := rng.IntN(30); n > 0; n-- {
				v := pool[rng.IntN(len(pool))]
				if trial%4 == 3 {
					v = rng.Float64()*3 - 1
				}
				G = append(G, ownedScore{v, int32(r)})
			}
		}
		want := slices.Clone(G)
		slices.SortFunc(want, compareOwnedScores)
		got := radixSortScores(slices.Clone(G))
		for i := range want {
			// == on the scores: −0 and +0 of one owner compare equal, so the comparison
			// sort may leave them either way round (and everything that reads the sorted
			// scores — comparisons, Tie — treats them alike).
			if got[i].owner != want[i].owner || got[i].v != want[i].v {
				t.Fatalf("trial %d: position %d holds %v (owner %d), the comparison sort's %v (owner %d)", trial, i, got[i].v, got[i].owner, want[i].v, want[i].owner)
			}
		}
	}
}

// dot2 gives each of its two sums to the bit as dot does, for every length's tail, on
// values of mixed sign and scale (where the order of the additions shows).
func TestDot2MatchesDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for n := 0; n < 40; n++ {
		a, b, c := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := 0; i < n; i++ {
			a[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
			b[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
			c[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
		}
		s, u := dot2(a, b, c)
		if math.Float64bits(s) != math.Float64bits(dot(a, c)) || math.Float64bits(u) != math.Float64bits(dot(b, c)) {
			t.Fatalf("n=%d: dot2 %v, %v; dot %v, %v", n, s, u, dot(a, c), dot(b, c))
		}
	}
}

// refCholesky is cholesky as it was, one row's dot at a time.
func refCholesky(a []float64, P int) bool {
	for j := 0; j < P; j++ {
		rj := a[j*P : j*P+j]
		d := a[j*P+j] - dot(rj, rj)
		if !(d > 0) {
			return false
		}
		d = math.Sqrt(d)
		a[j*P+j] = d
		for i := j + 1; i < P; i++ {
			a[i*P+j] = (a[i*P+j] - dot(a[i*P:i*P+j], rj)) / d
		}
	}
	return true
}

// cholesky, two rows at a time, gives the one-row factor to the bit: odd and even sizes,
// Laplacian-plus-ones matrices as the Newton step builds them.
func TestCholeskyTwoRowsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, P := range []int{1, 2, 3, 4, 5, 8, 17, 64, 201} {
		a := make([]float64, P*P)
		for i := range a {
			a[i] = 1
		}
		for i := 0; i < P; i++ {
			for j := i + 1; j < P; j++ {
				w := rng.Float64() * 100
				a[j*P+i] -= w
				a[i*P+i] += w
				a[j*P+j] += w
			}
		}
		want := slices.Clone(a)
		okw := refCholesky(want, P)
		okg := cholesky(a, P)
		if okw != okg {
			t.Fatalf("P=%d: ok %v, the one-row factor's %v", P, okg, okw)
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(want[i]) {
				t.Fatalf("P=%d: element %d is %v, the one-row factor's %v", P, i, a[i], want[i])
			}
		}
	}
}

// refDlog is dlog as it was, every argument through math.Frexp.
func refDlog(x float64) float64 {
	const (
		Ln2Hi = 6.93147180369123816490e-01
		Ln2Lo = 1.90821492927058770002e-10
		L1    = 6.666666666666735130e-01
		L2    = 3.999999999940941908e-01
		L3    = 2.857142874366239149e-01
		L4    = 2.222219843214978396e-01
		L5    = 1.818357216161805012e-01
		L6    = 1.531383769920937332e-01
		L7    = 1.479819860511658591e-01
	)
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	f1, ki := math.Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 *= 2
		ki--
	}
	f := f1 - 1
	k := float64(ki)
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (L1 + float64(s4*(L3+float64(s4*(L5+float64(s4*L7)))))))
	t2 := float64(s4 * (L2 + float64(s4*(L4+float64(s4*L6)))))
	R := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*Ln2Hi) - ((hfsq - (float64(s*(hfsq+R)) + float64(k*Ln2Lo))) - f)
}

// dlog's split of a normal argument from its bits gives math.Frexp's: the same bits for
// random bit patterns (every sign, exponent and fraction), the edges of the normal range,
// subnormals, zeros, infinities and NaN.
func TestDlogSameBitsAsFrexpPath(t *testing.T) {
	xs := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 5e-324, 2.2250738585072009e-308,
		math.SmallestNonzeroFloat64, 2.2250738585072014e-308, math.MaxFloat64, 1, 2, 0.5, math.Sqrt2 / 2, math.Nextafter(math.Sqrt2/2, 0), -1, -5e-324}
	rng := rand.New(rand.NewPCG(41, 42))
	for i := 0; i < 200000; i++ {
		xs = append(xs, math.Float64frombits(rng.Uint64()))
	}
	for _, x := range xs {
		got, want := dlog(x), refDlog(x)
		if math.Float64bits(got) != math.Float64bits(want) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("dlog(%v) (bits %x) = %v, the Frexp path's %v", x, math.Float64bits(x), got, want)
		}
	}
}

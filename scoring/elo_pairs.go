package scoring

import (
	"runtime"
	"sync"
)

// The MLE fit of a large ledger (5,000 players: 12.5 M pairs) spent most of its time in
// two serial loops over the pairs, LogLikelihood's line search and gradientSig, and nearly
// all of that in exponentials and logarithms (measured: 9 and 3 CPU-s of the ~14 s fit).
// Both are split here into a parallel pass that evaluates the transcendental part of every
// pair into a packed upper triangle, and the original serial pass that adds the terms in
// the original order from it: the same operations on the same values in the same order,
// so the same bits as the serial loops (TestPairParallelSameBits), on any number of cores.
// LogLikelihood also evaluates each pair once instead of twice: log σ(x) and log σ(−x)
// share log1p(e^−|x|).

// pairParallelMinP is the fewest players for which the pair loops run in parallel; below,
// the serial loops (the pass over the pairs is too short to share).
var pairParallelMinP = 256 // a var only so tests can compare the two ways

// packedPool recycles the packed P(P−1)/2 buffers (100 MB at 5,000 players).
var packedPool sync.Pool

// llSlot lets one log-likelihood at a time take the parallel path and its buffer; a call
// made while another holds it (the default bootstrap's workers refit side by side, and
// already keep the cores busy) runs the serial loop, which gives the same bits. So the
// parallel path adds one buffer to the peak RSS, not one per worker.
var llSlot = make(chan struct{}, 1)

func getPacked(n int) []float64 {
	if b, ok := packedPool.Get().(*[]float64); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]float64, n)
}

func putPacked(b []float64) { packedPool.Put(&b) }

// forPairRows runs f(i, row) for every player i < P−1, row the packed triangle's row i
// (pairs (i, j), j = i+1 … P−1), across the cores: rows are handed out in blocks, and as
// f writes only its own row the result does not depend on the split.
func forPairRows(P int, packed []float64, f func(i int, row []float64)) {
	workers := min(runtime.GOMAXPROCS(0), P)
	const block = 16
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				lo := next
				next += block
				mu.Unlock()
				if lo >= P-1 {
					return
				}
				for i := lo; i < min(lo+block, P-1); i++ {
					off := i*P - i*(i+1)/2
					f(i, packed[off:off+P-1-i])
				}
			}
		}()
	}
	wg.Wait()
}

// logLikelihoodPairs is LogLikelihood for large P: L[i,j] = log1p(e^−|θ_i−θ_j|) for every
// pair with games, in parallel; then log σ(θ_i−θ_j) = −L when θ_i−θ_j ≥ 0, else
// (θ_i−θ_j) − L (logSigmoid's two branches, whose exponential is of −|x| in both, and
// θ_j−θ_i = −(θ_i−θ_j) exactly), added in LogLikelihood's order.
func logLikelihoodPairs(c []float64, theta []float64) float64 {
	P := len(theta)
	L := getPacked(P * (P - 1) / 2)
	defer putPacked(L)
	forPairRows(P, L, func(i int, row []float64) {
		for k := range row {
			j := i + 1 + k
			if c[i*P+j] == 0 && c[j*P+i] == 0 {
				continue
			}
			x := theta[i] - theta[j]
			if x >= 0 {
				row[k] = dlog1p(dexp(-x))
			} else {
				row[k] = dlog1p(dexp(x))
			}
		}
	})
	var ll float64
	for i := 0; i < P; i++ {
		for j := 0; j < P; j++ {
			if i == j || c[i*P+j] == 0 {
				continue
			}
			a, b := min(i, j), max(i, j)
			l := L[a*P-a*(a+1)/2+b-a-1]
			x := theta[i] - theta[j]
			var ls float64
			if x >= 0 {
				ls = -l
			} else {
				ls = x - l
			}
			ll += float64(c[i*P+j] * ls)
		}
	}
	return ll
}

// gradientSigPairs is gradientSig for large P: the sigmoids in parallel, into sig, then
// gradientSig's serial sums from them.
func gradientSigPairs(c []float64, theta, g, sig []float64) {
	P := len(theta)
	forPairRows(P, sig, func(i int, row []float64) {
		for k := range row {
			j := i + 1 + k
			if c[i*P+j]+c[j*P+i] == 0 {
				row[k] = 0
				continue
			}
			row[k] = sigmoid(theta[i] - theta[j])
		}
	})
	clear(g)
	k := 0
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			cij, cji := c[i*P+j], c[j*P+i]
			n := cij + cji
			p := sig[k]
			k++
			if n == 0 {
				continue
			}
			v := cij - float64(n*p)
			g[i] += v
			g[j] -= v
		}
	}
}

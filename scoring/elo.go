package scoring

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"sync"
)

// Games holds the seed-vs-seed games between P players, aggregated: Wins[i*P+j] is how
// many games i won against j, Ties[i*P+j] (i < j only) how many they tied. Enumerating the
// games themselves is never needed: the Bradley–Terry likelihood depends on them only
// through these counts, and 200 agents × 100 tasks × 50 seeds is 5e9 games.
type Games struct {
	P    int
	Wins []int64
	Ties []int64
}

// NewGames returns empty counts for p players.
func NewGames(p int) *Games {
	return &Games{P: p, Wins: make([]int64, p*p), Ties: make([]int64, p*p)}
}

// Add adds o's counts to g (same P).
func (g *Games) Add(o *Games) {
	for i, v := range o.Wins {
		g.Wins[i] += v
	}
	for i, v := range o.Ties {
		g.Ties[i] += v
	}
}

// Total is the number of games.
func (g *Games) Total() int64 {
	var n int64
	for _, v := range g.Wins {
		n += v
	}
	for _, v := range g.Ties {
		n += v
	}
	return n
}

// playerRuns is one player's runs on one task: valid scores in "goodness" units (negated
// when lower is better, so larger is always better), and the number of invalid runs.
type playerRuns struct {
	player  int
	good    []float64
	invalid int64
}

// addTaskGames counts every seed-vs-seed game between the players of one task into g.
// Better score wins; Tie (|a−b| ≤ 1e-6 + 1e-5·max) is a tie; invalid vs invalid is a
// tie; invalid loses to any valid score. Tie is invariant under negation, so comparing
// goodness values is the same as comparing raw scores by the task's direction.
//
// Counting without enumerating: merge every valid score of the task into one sorted list
// G. The scores a value x beats form a prefix of G (length lo(x)), found for all x by one
// pass of two pointers. With C[k][b] = how many of player b's scores lie in G[:k], player
// a's wins over b are Σ_{x of a} C[lo(x)][b] — one row added per score, for all b at once —
// so a task costs O(|G|·players) additions instead of O(seeds²·players²) comparisons.
// b's wins over a come from b's rows; the rest of the n_a·n_b games are ties.
func addTaskGames(g *Games, runs []playerRuns) { addTaskGamesParallel(g, runs, 1) }

// ownedScore is one valid run's score and the index of the player it belongs to.
type ownedScore struct {
	v     float64
	owner int32
}

// sortedScores is every valid score of runs, sorted by score then by owner: the order
// both game counters walk with their two pointers.
func sortedScores(runs []playerRuns) []ownedScore {
	n := 0
	for r := range runs {
		n += len(runs[r].good)
	}
	G := make([]ownedScore, 0, n)
	for r := range runs {
		for _, v := range runs[r].good {
			G = append(G, ownedScore{v, int32(r)})
		}
	}
	if len(G) < radixMinScores {
		slices.SortFunc(G, compareOwnedScores)
		return G
	}
	return radixSortScores(G)
}

func compareOwnedScores(a, b ownedScore) int {
	if c := cmp.Compare(a.v, b.v); c != 0 {
		return c
	}
	return cmp.Compare(a.owner, b.owner)
}

// radixMinScores is the fewest scores sortedScores radix-sorts; below, the comparison
// sort (a var only so tests can send small inputs both ways).
var radixMinScores = 256

// radixSortScores sorts G, which is in owner order, by score then owner: a stable LSD
// radix sort on the scores' bits, a byte a pass, skipping the bytes all scores share. It
// replaced the comparison sort of a task's scores (6,000 a task at 1M results; the sort
// was a third of counting the games, measured: docs/scoring.md §7). Stable on owner
// order, so equal scores stay by owner; −0 and +0 are the same key, as cmp.Compare has
// them (scores are finite: NaN never reaches here). TestRadixSortScoresMatchesCompare
// holds it to the comparison sort's order.
func radixSortScores(G []ownedScore) []ownedScore {
	key := func(v float64) uint64 {
		if v == 0 {
			v = 0 // −0 sorts with +0
		}
		b := math.Float64bits(v)
		if b>>63 != 0 {
			return ^b
		}
		return b | 1<<63
	}
	var and, or uint64 = ^uint64(0), 0
	for _, it := range G {
		k := key(it.v)
		and &= k
		or |= k
	}
	buf := make([]ownedScore, len(G))
	src, dst := G, buf
	for shift := uint(0); shift < 64; shift += 8 {
		if (and>>shift)&0xff == (or>>shift)&0xff {
			continue // every key has this byte
		}
		var count [256]int
		for _, it := range src {
			count[(key(it.v)>>shift)&0xff]++
		}
		pos := 0
		for i, c := range count {
			count[i] = pos
			pos += c
		}
		for _, it := range src {
			b := (key(it.v) >> shift) & 0xff
			dst[count[b]] = it
			count[b]++
		}
		src, dst = dst, src
	}
	return src
}

// addTaskGamesParallel is addTaskGames with the pairs split across workers goroutines by
// rows: each pair of the task's players is one distinct cell of g, so the workers never
// write the same count and the result does not depend on scheduling.
//
// The win counts are those of the running-count description above, computed without its
// R×R table (200 MB a task at 5,000 players): lo(x), the length of the prefix of G that x
// beats, is found for every x by the one pass of two pointers; then a's wins over b are
// Σ_{x of a} #{y of b at a position < lo(x)}, and as a's lo values and b's positions both
// rise along G, two pointers count that in O(n_a + n_b) per pair.
func addTaskGamesParallel(g *Games, runs []playerRuns, workers int) {
	P, R := g.P, len(runs)
	G := sortedScores(runs)
	M := len(G)
	// Owner r's items are slots start[r]..start[r+1]-1, in G's order: posOf their places
	// in G, loOf their lo values.
	start := make([]int, R+1)
	for _, it := range G {
		start[it.owner+1]++
	}
	for r := 0; r < R; r++ {
		start[r+1] += start[r]
	}
	fill := slices.Clone(start[:R])
	posOf := make([]int32, M)
	loOf := make([]int32, M)
	lo := 0
	for k, it := range G {
		x := it.v
		for lo < M && G[lo].v < x && !Tie(x, G[lo].v) {
			lo++
		}
		s := fill[it.owner]
		fill[it.owner]++
		posOf[s], loOf[s] = int32(k), int32(lo)
	}
	wins := func(a, b int) int64 {
		pb := posOf[start[b]:start[b+1]]
		var w int64
		j := 0
		for _, l := range loOf[start[a]:start[a+1]] {
			for j < len(pb) && pb[j] < l {
				j++
			}
			w += int64(j)
		}
		return w
	}
	rows := func(first, step int) {
		for a := first; a < R; a += step {
			ra := &runs[a]
			i := ra.player
			na := int64(len(ra.good))
			for b := a + 1; b < R; b++ {
				rb := &runs[b]
				j := rb.player
				nb := int64(len(rb.good))
				aw, bw := wins(a, b), wins(b, a)
				t := na*nb - aw - bw
				aw += na * rb.invalid
				bw += nb * ra.invalid
				t += ra.invalid * rb.invalid
				g.Wins[i*P+j] += aw
				g.Wins[j*P+i] += bw
				g.Ties[min(i, j)*P+max(i, j)] += t
			}
		}
	}
	workers = min(max(1, workers), R)
	if workers == 1 {
		rows(0, 1)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rows(w, workers)
		}(w)
	}
	wg.Wait()
}

// addTaskGamesLocked is addTaskGames holding mu (when not nil) while it adds into g, so
// workers counting different tasks can share one g (integer sums: the order they add in
// does not matter).
func addTaskGamesLocked(g *Games, runs []playerRuns, mu *sync.Mutex) {
	P, R := g.P, len(runs)
	G := sortedScores(runs)
	M := len(G)
	// cnt[b] counts player b's scores in G[:lo], kept as lo advances: lo(x) never decreases
	// along G, so one running vector stands for the whole prefix-count table (which at
	// 5,000 players was 300 MB a task, and its copying most of the cost).
	cnt := make([]int64, R)
	W := taskWins.get(R * R)
	defer taskWins.put(W)
	lo := 0
	for _, it := range G {
		x := it.v
		for lo < M && G[lo].v < x && !Tie(x, G[lo].v) {
			cnt[G[lo].owner]++
			lo++
		}
		acc := W[int(it.owner)*R : (int(it.owner)+1)*R]
		for b, c := range cnt {
			acc[b] += c
		}
	}
	if mu != nil {
		mu.Lock()
		defer mu.Unlock()
	}
	for a := 0; a < R; a++ {
		for b := a + 1; b < R; b++ {
			ra, rb := &runs[a], &runs[b]
			i, j := ra.player, rb.player
			na, nb := int64(len(ra.good)), int64(len(rb.good))
			aw, bw := W[a*R+b], W[b*R+a]
			t := na*nb - aw - bw
			aw += na * rb.invalid
			bw += nb * ra.invalid
			t += ra.invalid * rb.invalid
			g.Wins[i*P+j] += aw
			g.Wins[j*P+i] += bw
			g.Ties[min(i, j)*P+max(i, j)] += t
		}
	}
}

// taskWins recycles addTaskGames' R×R win table (72 MB a task at 3,000 players): the
// tasks of a ledger reuse a few instead of allocating one each. Buffers come back zeroed.
var taskWins = &slicePool[int64]{}

// newtonHessians and newtonSigs recycle FitNewton's P×P Hessian and its packed sigmoids:
// a ledger's bootstrap fits 100 rounds on the same players, and those two were most of
// its allocations (48 MB at 200 agents), each more for the GC to catch up with.
var newtonHessians, newtonSigs = &slicePool[float64]{}, &slicePool[float64]{}

// slicePool hands out zeroed slices of at least the asked length.
type slicePool[T any] struct{ p sync.Pool }

func (p *slicePool[T]) get(n int) []T {
	if b, ok := p.p.Get().(*[]T); ok && cap(*b) >= n {
		return (*b)[:n]
	}
	return make([]T, n)
}

func (p *slicePool[T]) put(b []T) {
	clear(b)
	p.p.Put(&b)
}

// weights turns game counts into Bradley–Terry "win weights" c[i*P+j]: as upstream (the
// Chatbot Arena recipe), a win counts 2 towards its direction and a tie 1 towards both
// (each game is also added with the players swapped, which doubles everything and does not
// move the maximum). eps is a tie weight added to every ordered pair: 0, or PseudoTie
// when the maximum-likelihood estimate does not exist (see fitWeights).
func weights(g *Games, eps float64) []float64 {
	c := make([]float64, g.P*g.P)
	weightsInto(c, g, 1)
	if eps != 0 {
		addTieWeight(c, g.P, eps)
	}
	return c
}

// weightsInto writes the weights of g's counts times scale into c (P×P), eps 0. Adding a
// tie weight afterwards (addTieWeight) gives the very bits weights(g, eps) gives: the
// counts are integers, exact in float64, and eps was always added last.
func weightsInto(c []float64, g *Games, scale int64) {
	P := g.P
	for i := 0; i < P; i++ {
		for j := 0; j < P; j++ {
			if i == j {
				c[i*P+j] = 0
				continue
			}
			t := scale * g.Ties[min(i, j)*P+max(i, j)]
			c[i*P+j] = float64(2*float64(scale*g.Wins[i*P+j])) + float64(t)
		}
	}
}

// addTieWeight adds eps to the weight of every ordered pair of distinct players.
func addTieWeight(c []float64, P int, eps float64) {
	for i := 0; i < P; i++ {
		row := c[i*P : (i+1)*P]
		for j := range row {
			if j != i {
				row[j] += eps
			}
		}
	}
}

// PseudoTie is the tie weight added to every ordered pair of players when the
// maximum-likelihood estimate does not exist — as if every pair had tied one more game
// (a real tie weighs 1 each way). It is never added when the MLE exists.
//
// Why 1, an absolute weight: it bounds every gap between consecutive ratings. Sort the
// ratings and cut them into the top m players S and the other P−m; summing the
// first-order conditions over S gives Σ_{a∈S,b∉S} c_ab σ(θ_b−θ_a) = Σ c_ba σ(θ_a−θ_b). The
// right side is at least PseudoTie·m(P−m)/2 and the left at most C·e^(−δ), C the weight S
// holds against the rest and δ the gap at the cut, so δ ≤ ln(2C/(PseudoTie·m(P−m))) ≤
// ln(4G+2) with G the most games any one pair played: 400·log10(4G+2) Elo — 311 Elo for
// one game a pair, 2,400 Elo for 250,000 (100 tasks × 50 × 50 seeds). The old vanishing
// weight (1e-12 of the games) put separated players thousands of Elo apart per cut and
// left a Hessian too ill-conditioned to factor. And the gap it gives a player that never
// lost is about the one the MLE would give had one of its games been a tie, so bootstrap
// rounds that happen to be separated do not jump out of line with those that are not.
const PseudoTie = 1.0

// Elo fit kinds reported in the ledger (Ledger.EloFit).
const (
	EloFitMLE         = "mle"
	EloFitRegularised = "regularised"
)

// MLEExists reports whether the Bradley–Terry maximum-likelihood estimate for weights c
// (P players) exists and is unique: Ford's (1957) condition, that the directed graph with
// an edge a→b whenever a has positive win-or-tie weight against b is strongly connected —
// in every split of the players into two groups, each group won or tied at least once
// against the other. Otherwise some group's ratings would go to ±∞.
func MLEExists(c []float64, P int) bool {
	if P < 2 {
		return true
	}
	// Strongly connected ⇔ every player is reachable from player 0 along edges and
	// along reversed edges.
	seen := make([]bool, P)
	stack := make([]int, 0, P)
	reach := func(forward bool) bool {
		clear(seen)
		seen[0] = true
		stack = append(stack[:0], 0)
		n := 1
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for b := 0; b < P; b++ {
				w := c[a*P+b]
				if !forward {
					w = c[b*P+a]
				}
				if !seen[b] && b != a && w > 0 {
					seen[b] = true
					n++
					stack = append(stack, b)
				}
			}
		}
		return n == P
	}
	return reach(true) && reach(false)
}

// fitWeights is the objective the Elo fit maximises for g: the real game weights when the
// MLE exists (the AIRS-Bench reference: a pure, unpenalised fit), otherwise those plus
// PseudoTie on every ordered pair; regularised says which.
func fitWeights(g *Games) (c []float64, regularised bool) {
	c = weights(g, 0)
	return c, regulariseIfSeparated(c, g.P)
}

// regulariseIfSeparated adds PseudoTie to every pair of c when the MLE does not exist
// (fitWeights' rule, in place) and says whether it did.
func regulariseIfSeparated(c []float64, P int) bool {
	if MLEExists(c, P) {
		return false
	}
	addTieWeight(c, P, PseudoTie)
	return true
}

// fitGames fits ratings to g (θ in natural-log units, Σθ = 0) from start (nil = zeros),
// regularising exactly when the MLE does not exist. It never fails: see fitRobust.
func fitGames(g *Games, start []float64) (theta []float64, regularised bool) {
	c, regularised := fitWeights(g)
	return fitRobust(c, g.P, start), regularised
}

// fitRobust maximises the likelihood for weights c whose directed graph is strongly
// connected (so the maximum exists). Newton first — quadratic, the usual path; should it
// fail (a numerically singular Hessian, or no convergence), Hunter's MM, which increases
// the likelihood at every step and converges for any such c, and then Newton again from
// MM's point to polish the last digits. If even that polish fails MM's point is kept:
// a ledger must not fail on valid inputs.
func fitRobust(c []float64, P int, start []float64) []float64 {
	return fitRobustSig(c, P, start, nil)
}

// fitRobustSig is fitRobust with startSig as fitNewton takes it (nil: none).
func fitRobustSig(c []float64, P int, start, startSig []float64) []float64 {
	theta, err := fitNewton(c, P, start, startSig)
	if err == nil {
		return theta
	}
	mm := fitMM(c, P, nil, 100000)
	if theta, err := FitNewton(c, P, mm); err == nil {
		return theta
	}
	return mm
}

// logSigmoid is log(1/(1+e^−x)) without overflow.
func logSigmoid(x float64) float64 {
	if x >= 0 {
		return -dlog1p(dexp(-x))
	}
	return x - dlog1p(dexp(x))
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + dexp(-x))
	}
	e := dexp(x)
	return e / (1 + e)
}

// LogLikelihood is Σ_{i≠j} c_ij log σ(θ_i − θ_j), θ in natural-log units.
func LogLikelihood(c []float64, theta []float64) float64 {
	P := len(theta)
	if P >= pairParallelMinP {
		select {
		case llSlot <- struct{}{}:
			defer func() { <-llSlot }()
			return logLikelihoodPairs(c, theta) // the same bits, across the cores (elo_pairs.go)
		default:
		}
	}
	var ll float64
	for i := 0; i < P; i++ {
		for j := 0; j < P; j++ {
			if i != j && c[i*P+j] != 0 {
				ll += float64(c[i*P+j] * logSigmoid(theta[i]-theta[j]))
			}
		}
	}
	return ll
}

// Gradient is ∂LL/∂θ_i = Σ_j c_ij − n_ij σ(θ_i − θ_j), n_ij = c_ij + c_ji: the first-order
// conditions of the fit are Gradient = 0.
func Gradient(c []float64, theta []float64) []float64 {
	P := len(theta)
	g := make([]float64, P)
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			cij, cji := c[i*P+j], c[j*P+i]
			n := cij + cji
			if n == 0 {
				continue
			}
			v := cij - float64(n*sigmoid(theta[i]-theta[j]))
			g[i] += v
			g[j] -= v
		}
	}
	return g
}

// gradientSig is Gradient (the same bits) that also leaves σ(θ_i − θ_j) for every pair
// i < j with games in sig, the upper triangle packed row by row (0 where there are none):
// the Newton step needs the same sigmoids for its Hessian, and computing them once per
// iteration instead of twice was half of each step's exponentials. known, when not nil, holds
// those sigmoids at theta already (startSigmoids', packed the same way; below
// pairParallelMinP only) and is read instead of evaluating them again.
func gradientSig(c []float64, theta, g, sig, known []float64) {
	P := len(theta)
	if known == nil && P >= pairParallelMinP {
		gradientSigPairs(c, theta, g, sig) // the same bits, across the cores (elo_pairs.go)
		return
	}
	clear(g)
	k := 0
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			cij, cji := c[i*P+j], c[j*P+i]
			n := cij + cji
			if n == 0 {
				sig[k] = 0
				k++
				continue
			}
			var p float64
			if known != nil {
				p = known[k]
			} else {
				p = sigmoid(theta[i] - theta[j])
			}
			sig[k] = p
			k++
			v := cij - float64(n*p)
			g[i] += v
			g[j] -= v
		}
	}
}

var errNoConvergence = errors.New("scoring: Bradley–Terry fit did not converge")

// FitNewton maximises the Bradley–Terry likelihood by Newton's method with a backtracking
// line search, from start (nil = zeros). The gauge is fixed by Σθ = 0: the Hessian is
// −L (L the weighted Laplacian, null space 1), so the step solves (L + 11ᵀ)Δ = g, which
// is positive definite when the comparison graph is connected and gives 1ᵀΔ = 0 because
// 1ᵀg = 0. θ is in natural-log units (P(i beats j) = σ(θ_i − θ_j)).
func FitNewton(c []float64, P int, start []float64) ([]float64, error) {
	return fitNewton(c, P, start, nil)
}

// startSigmoids is σ(θ_i − θ_j) for every pair i < j (packed as gradientSig's sig) at
// start centred, the point FitNewton's first iteration evaluates: what fitNewton takes as
// startSig. The Elo bootstrap refits every round from the same start, so its first
// gradient's sigmoids — a third or more of a round's exponentials — are the same in every
// round and are computed once here (only which pairs have games changes per round).
func startSigmoids(P int, start []float64) []float64 {
	theta := make([]float64, P)
	copy(theta, start)
	center(theta)
	sig := make([]float64, P*(P-1)/2)
	k := 0
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			sig[k] = sigmoid(theta[i] - theta[j])
			k++
		}
	}
	return sig
}

// fitNewton is FitNewton; startSig, when not nil, is startSigmoids(P, start), which its
// first iteration reads instead of evaluating the same sigmoids again (the same bits).
func fitNewton(c []float64, P int, start, startSig []float64) ([]float64, error) {
	theta := make([]float64, P)
	if start != nil {
		copy(theta, start)
	}
	center(theta)
	var total float64
	for _, v := range c {
		total += v
	}
	if total == 0 || P < 2 {
		return theta, nil
	}
	tol := 1e-11 * total
	// The Hessian system is factored by cholesky (detmath.go), not gonum: gonum's BLAS is
	// assembly on amd64 and fused elsewhere, which would let the architecture reach the
	// ledger's bits. Above denseNewtonMaxP players the O(P³) factorisation is the whole
	// cost of a ledger (5,000 agents: minutes per fit), so the step is solved by conjugate
	// gradients instead (O(P²) per iteration; see newtonStepCG). Small ledgers, and so
	// every golden root, keep the exact dense solve.
	dense := P <= denseNewtonMaxP
	var data []float64
	if dense {
		data = newtonHessians.get(P * P)
		defer newtonHessians.put(data)
	}
	// sig: the pairs' sigmoids from gradientSig; the CG step turns them into its edge
	// weights in place.
	sig := newtonSigs.get(P * (P - 1) / 2)
	defer newtonSigs.put(sig)
	g := make([]float64, P)
	d := make([]float64, P)
	next := make([]float64, P)
	for iter := 0; iter < 500; iter++ {
		var known []float64
		if iter == 0 {
			known = startSig // nil unless the caller computed them
		}
		gradientSig(c, theta, g, sig, known)
		if maxAbs(g) <= tol {
			return theta, nil
		}
		if dense {
			// Lower triangle of L + 11ᵀ, row-major.
			for i := range data {
				data[i] = 1
			}
			k := 0
			for i := 0; i < P; i++ {
				for j := i + 1; j < P; j++ {
					n := c[i*P+j] + c[j*P+i]
					p := sig[k]
					k++
					if n == 0 {
						continue
					}
					w := float64(n * p * (1 - p))
					data[j*P+i] -= w
					data[i*P+i] += w
					data[j*P+j] += w
				}
			}
			if ok := cholesky(data, P); !ok {
				return theta, errors.New("scoring: Bradley–Terry Hessian is singular (comparison graph not connected)")
			}
			choleskySolve(data, P, g, d)
		} else if !newtonStepCG(c, P, g, sig, d, 1e-10*maxAbs(g)) {
			return theta, errNoConvergence
		}
		dmax := maxAbs(d)
		step := 1.0
		// Far from the optimum a full Newton step can overshoot (ratings can be tens of
		// natural-log units apart when someone never loses): cap the step, then backtrack
		// on the likelihood. Near the optimum (small steps) take full steps: the
		// likelihood is then flat to rounding and comparing its values would stall.
		if dmax > 2 {
			step = 2 / dmax
		}
		if dmax > 0.1 {
			ll := LogLikelihood(c, theta)
			for k := 0; k < 30; k++ {
				for i := range theta {
					next[i] = theta[i] + float64(step*d[i])
				}
				if LogLikelihood(c, next) >= ll {
					break
				}
				step /= 2
			}
		}
		for i := range theta {
			theta[i] += float64(step * d[i])
		}
		center(theta)
		if step*dmax < 1e-11 {
			return theta, nil
		}
	}
	if maxAbs(Gradient(c, theta)) <= 1e-6*total {
		return theta, nil
	}
	return theta, errNoConvergence
}

// denseNewtonMaxP is the largest number of players whose Newton step is solved by the
// dense Cholesky factorisation; larger fits use conjugate gradients (newtonStepCG).
var denseNewtonMaxP = 400 // a var only so tests and benchmarks can compare the two solvers

// newtonStepCG solves (L + 11ᵀ)d = g, L the Hessian's weighted Laplacian at theta, by
// Jacobi-preconditioned conjugate gradients until the residual is at most tol (in max
// norm); false if it did not get there. wts (P(P−1)/2, the upper triangle packed row by
// row) holds on entry each pair's σ(θ_i − θ_j) at theta, as gradientSig left them, and
// receives L's edge weights in their place. The players of a ledger have all played each other, so L is a dense,
// well-conditioned Laplacian and a few dozen iterations of O(P²) each replace an O(P³)
// factorisation. Hand-written: gonum's CG calls its BLAS, which fuses (see FitNewton). All
// sums run in a fixed order with every product rounded (float64(·)), so the result is the
// same on every architecture.
func newtonStepCG(c []float64, P int, g, wts, d []float64, tol float64) bool {
	diag := make([]float64, P)
	// row(i) holds the weights of (i, j) for j = i+1 … P−1, at row(i)[j−i−1].
	row := func(i int) []float64 {
		off := i*P - i*(i+1)/2
		return wts[off : off+P-1-i]
	}
	for i := 0; i < P; i++ {
		ri := row(i)
		for j := i + 1; j < P; j++ {
			n := c[i*P+j] + c[j*P+i]
			if n == 0 {
				ri[j-i-1] = 0
				continue
			}
			p := ri[j-i-1]
			w := float64(n * p * (1 - p))
			ri[j-i-1] = w
			diag[i] += w
			diag[j] += w
		}
	}
	for i := range diag {
		diag[i]++ // the 11ᵀ term's diagonal
	}
	// mul computes out = (L + 11ᵀ)v.
	mul := func(v, out []float64) {
		var sum float64
		for _, x := range v {
			sum += x
		}
		clear(out)
		for i := 0; i < P; i++ {
			ri, vj, oj := row(i), v[i+1:], out[i+1:]
			vi := v[i]
			var acc float64
			for k, w := range ri {
				if w == 0 {
					continue
				}
				t := float64(w * (vi - vj[k]))
				acc += t
				oj[k] -= t
			}
			out[i] += acc
		}
		for i := range out {
			out[i] += sum
		}
	}
	clear(d)
	r := slices.Clone(g)
	z := make([]float64, P)
	for i := range z {
		z[i] = r[i] / diag[i]
	}
	q := slices.Clone(z)
	hq := make([]float64, P)
	rz := dot(r, z)
	for it := 0; it < 10*P+100; it++ {
		if maxAbs(r) <= tol {
			return true
		}
		mul(q, hq)
		qhq := dot(q, hq)
		if qhq <= 0 || math.IsNaN(qhq) {
			return false
		}
		alpha := rz / qhq
		for i := range d {
			d[i] += float64(alpha * q[i])
			r[i] -= float64(alpha * hq[i])
		}
		for i := range z {
			z[i] = r[i] / diag[i]
		}
		rz2 := dot(r, z)
		beta := rz2 / rz
		rz = rz2
		for i := range q {
			q[i] = z[i] + float64(beta*q[i])
		}
	}
	return maxAbs(r) <= tol
}

// FitMM maximises the same likelihood by Hunter's (2004) minorise–maximise iteration
// γ_i ← W_i / Σ_j n_ij/(γ_i+γ_j): slower (linear convergence) but derivative-free, so it
// serves as an independent check of FitNewton.
func FitMM(c []float64, P int, maxIter int) ([]float64, error) {
	return fitMM(c, P, nil, maxIter), nil
}

// fitMM runs at most maxIter MM steps from start (θ, nil = zeros).
func fitMM(c []float64, P int, start []float64, maxIter int) []float64 {
	gamma := make([]float64, P)
	for i := range gamma {
		gamma[i] = 1
		if start != nil {
			gamma[i] = dexp(start[i])
		}
	}
	W := make([]float64, P)
	for i := 0; i < P; i++ {
		for j := 0; j < P; j++ {
			W[i] += c[i*P+j]
		}
	}
	next := make([]float64, P)
	for iter := 0; iter < maxIter; iter++ {
		var change float64
		for i := 0; i < P; i++ {
			var d float64
			for j := 0; j < P; j++ {
				if j == i {
					continue
				}
				if n := c[i*P+j] + c[j*P+i]; n != 0 {
					d += n / (gamma[i] + gamma[j])
				}
			}
			if d == 0 {
				next[i] = gamma[i]
				continue
			}
			next[i] = W[i] / d
		}
		// Fix the scale by the geometric mean, matching Σθ = 0.
		var lg float64
		for _, v := range next {
			lg += dlog(v)
		}
		s := dexp(lg / float64(P))
		for i := range next {
			next[i] /= s
			change = math.Max(change, math.Abs(dlog(next[i]/gamma[i])))
		}
		copy(gamma, next)
		if change < 1e-13 {
			break
		}
	}
	theta := make([]float64, P)
	for i, v := range gamma {
		theta[i] = dlog(v)
	}
	center(theta)
	return theta
}

// EloScale converts natural-log strength to Elo points: P = 1/(1+10^(−ΔR/400)).
const EloScale = 400 / math.Ln10

// ToElo turns θ into ratings with mean 1000.
func ToElo(theta []float64) []float64 {
	r := make([]float64, len(theta))
	var m float64
	for i, t := range theta {
		r[i] = float64(EloScale * t)
		m += r[i]
	}
	if len(r) > 0 {
		m /= float64(len(r))
	}
	for i := range r {
		r[i] = r[i] - m + 1000
	}
	return r
}

func center(v []float64) {
	if len(v) == 0 {
		return
	}
	var m float64
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	for i := range v {
		v[i] -= m
	}
}

func maxAbs(v []float64) float64 {
	var m float64
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

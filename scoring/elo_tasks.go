package scoring

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
)

// Elo bootstrap policies (Options.EloBootstrap; "elo_bootstrap" in the ledger's policy and
// in the network document).
const (
	// EloBootstrapGames is the default and AIRS-Bench's reference: every round resamples
	// the games (a multinomial over the per-pair outcome counts) and refits the ratings.
	// The intervals say how much the ratings would move were the same runs' games drawn
	// again.
	EloBootstrapGames = "games"
	// EloBootstrapTasksLinearised is the estimating-function bootstrap over tasks (Hu &
	// Kalbfleisch 2000): each round redraws the tasks with replacement and moves the
	// full-data ratings by one Newton step of the resampled likelihood, θ̂ + H⁻¹Σ_t(c_t−1)g_t,
	// with no refit. The intervals say how much the ratings would move were another set of
	// tasks of the same kind drawn: variation across tasks, not across games. It costs T
	// linear solves once (T the number of tasks) and a T-term sum per round, where the
	// default costs a full resample and refit per round; it needs several tasks to mean
	// anything (with one task every round is the MLE and every interval has width zero).
	EloBootstrapTasksLinearised = "tasks-linearised"
)

// ResolveEloBootstrap is an Elo bootstrap policy name with the default applied ("" is
// EloBootstrapGames), or an error naming the policies there are.
func ResolveEloBootstrap(name string) (string, error) {
	switch name {
	case "", EloBootstrapGames:
		return EloBootstrapGames, nil
	case EloBootstrapTasksLinearised:
		return EloBootstrapTasksLinearised, nil
	}
	return "", fmt.Errorf("unknown Elo bootstrap %q: use %q (default) or %q", name, EloBootstrapGames, EloBootstrapTasksLinearised)
}

// withEloBootstrap binds a non-default Elo bootstrap policy into an inputs digest: the
// default leaves the digest (and so every existing root) as it was; any other policy gives
// another digest, so two nodes computing with different policies can never agree on a
// root.
func withEloBootstrap(d [32]byte, policy string) [32]byte {
	if policy == EloBootstrapGames {
		return d
	}
	b := append([]byte("evalmesh ledger elo_bootstrap v1\x00"+policy+"\x00"), d[:]...)
	return sha256.Sum256(b)
}

// taskGameSums is what the estimating-function bootstrap needs of one task's games, per
// player: runs[p], the player's runs on the task (valid or not; 0 when it did not run it:
// every run of one player plays every run of each other, so pair (p, q) played
// runs[p]·runs[q] games), and net[p], its wins minus its losses over those games.
type taskGameSums struct {
	runs, net []int64
}

// taskSums counts a task's runs and net wins per player from its runs (taskRunsOf), by
// the rules addTaskGames counts games with, without a table of pairs: on the sorted valid
// scores G, a valid x beats lo(x) scores (a prefix of G) and is beaten by the suffix from
// hi(x); both pointers only rise along G. Games between one player's own runs are in
// both counts once each way and cancel in net. A valid run also beats every other
// player's invalid runs; an invalid run loses to every other player's valid runs and ties
// invalid ones.
func taskSums(runs []playerRuns, P int) taskGameSums {
	s := taskGameSums{runs: make([]int64, P), net: make([]int64, P)}
	G := sortedScores(runs)
	M := int64(len(G))
	var invalid int64
	for _, r := range runs {
		invalid += r.invalid
	}
	lo, hi := 0, 0
	for _, it := range G {
		x := it.v
		for lo < len(G) && G[lo].v < x && !Tie(x, G[lo].v) {
			lo++
		}
		for hi < len(G) && !(G[hi].v > x && !Tie(x, G[hi].v)) {
			hi++
		}
		s.net[runs[it.owner].player] += int64(lo) - (M - int64(hi))
	}
	for _, r := range runs {
		p, nv := r.player, int64(len(r.good))
		s.runs[p] += nv + r.invalid
		s.net[p] += nv*(invalid-r.invalid) - r.invalid*(M-nv)
	}
	return s
}

// bootstrapEloTasks is the EloBootstrapTasksLinearised bootstrap. theta is the full-data
// fit (Σθ = 0) of the weights weightsInto(games, 2) plus PseudoTie on every pair when
// regularised; sums[t] is task t's taskSums, tasks in ledger order. It returns each
// round's ratings (Elo, mean 1000) as bootstrapElo does.
//
// With ℓ_t task t's part of the fitted log-likelihood (weights 2·(2·wins + ties), the
// doubled battle table), g_t = ∇ℓ_t(θ̂) and H the fit's Hessian (all tasks, and the
// pseudo-ties when regularised — a penalty no task owns, so Σ_t g_t = −∇penalty, 0 for
// the MLE), round b with task multiplicities c (a multinomial: T uniform draws of a task)
// is θ̂ + Σ_t (c_t − 1)·u_t with u_t = H⁻¹g_t. H is singular along the all-ones vector (the
// ratings' gauge): each g_t is centred and (L + 11ᵀ)u_t = g_t solved as the fit's Newton
// step is, which keeps Σu_t = 0.
//
// g_t needs no table of task t's pairs: with runs m and net wins D of each player on it,
// ∂ℓ_t/∂θ_i = 2·(D_i + m_i·(M_t − m_i)) − 4·m_i·Σ_{j≠i} m_j σ(θ_i − θ_j), M_t = Σ_j m_j (each
// of the m_i·m_j games weighs 4 between the two directions, and 2·wins + ties = net +
// games). The sums Σ_j m_j σ(θ_i − θ_j) are shared by every task with the same runs per
// player (the usual ledger, where everyone ran every seed of every task), so they are
// computed once per distinct runs vector, in the one pass over the pairs that also builds
// H's weights.
//
// Determinism: every sum runs in a fixed order, every product is rounded (float64(·)),
// the linear solves are the fit's own (dense Cholesky up to denseNewtonMaxP players, CG
// above, each right-hand side with exactly the arithmetic of newtonStepCG whatever the
// number of workers), and round r draws from ChaCha8 keyed by sha256(seed, "elo-tasks", r).
func bootstrapEloTasks(games *Games, regularised bool, theta []float64, sums []taskGameSums, rounds int, seed [32]byte) [][]float64 {
	P, T := games.P, len(sums)
	out := make([][]float64, rounds)
	if T == 0 || P < 2 {
		for r := range out {
			out[r] = ToElo(theta)
		}
		return out
	}
	g := taskScores(games, regularised, theta, sums)
	u := solveFitHessian(games, regularised, theta, g)
	workers := min(runtime.GOMAXPROCS(0), rounds)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cnt := make([]int64, T)
			tb := make([]float64, P)
			for r := w; r < rounds; r += workers {
				rng := rand.NewChaCha8(roundSeed(seed, "elo-tasks", uint64(r)))
				clear(cnt)
				d := indexDrawer{rng: rng, n: uint32(T)}
				for range T {
					cnt[d.next()]++
				}
				copy(tb, theta)
				for t := 0; t < T; t++ {
					k := float64(cnt[t] - 1)
					if k == 0 {
						continue
					}
					ut := u[t]
					for i := range tb {
						tb[i] += float64(k * ut[i])
					}
				}
				out[r] = ToElo(tb)
			}
		}(w)
	}
	wg.Wait()
	return out
}

// taskScores is each task's score vector g_t = ∇ℓ_t(θ̂) (see bootstrapEloTasks), centred.
func taskScores(games *Games, regularised bool, theta []float64, sums []taskGameSums) [][]float64 {
	P, T := games.P, len(sums)
	// Distinct runs vectors, in task order; kind[t] is task t's.
	var distinct [][]int64
	kind := make([]int, T)
	for t, s := range sums {
		kind[t] = slices.IndexFunc(distinct, func(v []int64) bool { return slices.Equal(v, s.runs) })
		if kind[t] < 0 {
			kind[t] = len(distinct)
			distinct = append(distinct, s.runs)
		}
	}
	// S[k][i] = Σ_{j≠i} m_j σ(θ_i − θ_j) for runs vector k, pairs in row order: (i, j)
	// adds m_j·σ to i and m_i·(1 − σ) = m_i·σ(θ_j − θ_i) to j.
	S := make([][]float64, len(distinct))
	for k := range S {
		S[k] = make([]float64, P)
	}
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			p := sigmoid(theta[i] - theta[j])
			for k, m := range distinct {
				if m[j] != 0 {
					S[k][i] += float64(float64(m[j]) * p)
				}
				if m[i] != 0 {
					S[k][j] += float64(float64(m[i]) * (1 - p))
				}
			}
		}
	}
	g := make([][]float64, T)
	for t, s := range sums {
		var Mt int64
		for _, m := range s.runs {
			Mt += m
		}
		gt := make([]float64, P)
		for i, m := range s.runs {
			if m == 0 {
				continue
			}
			a := float64(2 * (s.net[i] + m*(Mt-m)))
			gt[i] = a - float64(float64(4*m)*S[kind[t]][i])
		}
		center(gt)
		g[t] = gt
	}
	return g
}

// solveFitHessian returns u[t] solving (L + 11ᵀ)u = g[t], L the Hessian's weighted
// Laplacian of the fit at theta (the weights weightsInto(games, 2), plus PseudoTie on
// every pair when regularised), as FitNewton's step solves it: by one dense Cholesky
// factorisation up to denseNewtonMaxP players, else by Jacobi-preconditioned conjugate
// gradients for all right-hand sides at once (cgMulti).
func solveFitHessian(games *Games, regularised bool, theta []float64, g [][]float64) [][]float64 {
	P := games.P
	eps := 0.0
	if regularised {
		eps = 2 * PseudoTie // both directions of the pair
	}
	// n_ij = c_ij + c_ji: integers (and 2·PseudoTie), exact in float64, so the same bits as
	// the fit's c_ij + c_ji.
	pairN := func(i, j int) float64 {
		n := 4 * (games.Wins[i*P+j] + games.Wins[j*P+i] + games.Ties[i*P+j])
		return float64(n) + eps
	}
	u := make([][]float64, len(g))
	for t := range u {
		u[t] = make([]float64, P)
	}
	if P <= denseNewtonMaxP {
		// L + 11ᵀ, lower triangle, row-major, built as FitNewton builds it.
		data := make([]float64, P*P)
		for i := range data {
			data[i] = 1
		}
		for i := 0; i < P; i++ {
			for j := i + 1; j < P; j++ {
				n := pairN(i, j)
				if n == 0 {
					continue
				}
				p := sigmoid(theta[i] - theta[j])
				w := float64(n * p * (1 - p))
				data[j*P+i] -= w
				data[i*P+i] += w
				data[j*P+j] += w
			}
		}
		if !cholesky(data, P) {
			// The fit's comparison graph is strongly connected, so this does not happen;
			// should rounding make it so, the rounds fall back to the MLE (u = 0).
			return u
		}
		for t := range g {
			choleskySolve(data, P, g[t], u[t])
		}
		return u
	}
	// Packed upper triangle of L's edge weights, row by row (newtonStepCG's layout).
	wts := make([]float64, P*(P-1)/2)
	k := 0
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			if n := pairN(i, j); n != 0 {
				p := sigmoid(theta[i] - theta[j])
				wts[k] = float64(n * p * (1 - p))
			}
			k++
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(g))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*len(g)/workers, (w+1)*len(g)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			cgMulti(P, wts, g[lo:hi], u[lo:hi])
		}()
	}
	wg.Wait()
	return u
}

// cgMulti solves (L + 11ᵀ)d_q = b_q for every q, L the Laplacian of the packed edge
// weights wts, by Jacobi-preconditioned conjugate gradients: newtonStepCG's iteration, to
// its tolerance (max-norm residual ≤ 1e-10·max|b_q|), for all the right-hand sides in one
// pass over wts per iteration. The pass over the 12.5 M weights of 5,000 players is what
// an iteration costs, so sharing it among the right-hand sides instead of one solve each
// is most of the saving (measured: docs/scoring.md §7). Each column's arithmetic is
// exactly newtonStepCG's, in the same order, so its result does not depend on which other
// columns it was solved with; a column stops updating once it has converged (or if its
// iteration breaks down, keeping the last iterate).
func cgMulti(P int, wts []float64, b, d [][]float64) {
	K := len(b)
	if K == 0 {
		return
	}
	diag := make([]float64, P)
	k := 0
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			w := wts[k]
			k++
			diag[i] += w
			diag[j] += w
		}
	}
	for i := range diag {
		diag[i]++
	}
	type col struct {
		r, z, q, hq []float64
		rz, tol     float64
		done        bool
	}
	cols := make([]col, K)
	for c := range cols {
		cl := &cols[c]
		clear(d[c])
		cl.r = slices.Clone(b[c])
		cl.z = make([]float64, P)
		for i := range cl.z {
			cl.z[i] = cl.r[i] / diag[i]
		}
		cl.q = slices.Clone(cl.z)
		cl.hq = make([]float64, P)
		cl.rz = dot(cl.r, cl.z)
		cl.tol = 1e-10 * maxAbs(b[c])
	}
	// V[i*A+a] is active column a's q at player i (player-major, so a pair's columns are
	// adjacent); O the same layout for (L + 11ᵀ)q.
	V := make([]float64, P*K)
	O := make([]float64, P*K)
	acc := make([]float64, K)
	active := make([]int, 0, K)
	for it := 0; it < 10*P+100; it++ {
		active = active[:0]
		for c := range cols {
			if cols[c].done {
				continue
			}
			if maxAbs(cols[c].r) <= cols[c].tol {
				cols[c].done = true
				continue
			}
			active = append(active, c)
		}
		A := len(active)
		if A == 0 {
			return
		}
		for a, c := range active {
			q := cols[c].q
			for i := 0; i < P; i++ {
				V[i*A+a] = q[i]
			}
		}
		mulMulti(P, A, wts, V[:P*A], O[:P*A], acc[:A])
		for a, c := range active {
			cl := &cols[c]
			// (L + 11ᵀ)q's gauge term: Σq, summed in player order as newtonStepCG does.
			var sum float64
			for _, x := range cl.q {
				sum += x
			}
			for i := 0; i < P; i++ {
				cl.hq[i] = O[i*A+a] + sum
			}
			qhq := dot(cl.q, cl.hq)
			if qhq <= 0 || math.IsNaN(qhq) {
				cl.done = true
				continue
			}
			alpha := cl.rz / qhq
			dc := d[c]
			for i := range dc {
				dc[i] += float64(alpha * cl.q[i])
				cl.r[i] -= float64(alpha * cl.hq[i])
			}
			for i := range cl.z {
				cl.z[i] = cl.r[i] / diag[i]
			}
			rz2 := dot(cl.r, cl.z)
			beta := rz2 / cl.rz
			cl.rz = rz2
			for i := range cl.q {
				cl.q[i] = cl.z[i] + float64(beta*cl.q[i])
			}
		}
	}
}

// mulMulti computes O = L·V for A columns (player-major, V[i*A+a]), L the Laplacian of
// the packed weights: per column the operations of newtonStepCG's mul, in its order
// (pair (i, j) adds t = w·(v_i − v_j) to row i's running sum and subtracts it from row j;
// row i's sum is added once its row is done). The gauge term is added by the caller.
func mulMulti(P, A int, wts, V, O, acc []float64) {
	clear(O)
	off := 0
	for i := 0; i < P; i++ {
		n := P - 1 - i
		ri := wts[off : off+n]
		off += n
		vi := V[i*A : i*A+A]
		clear(acc)
		for k, w := range ri {
			if w == 0 {
				continue
			}
			j := i + 1 + k
			vj := V[j*A : j*A+A]
			oj := O[j*A : j*A+A]
			for a := range acc {
				t := float64(w * (vi[a] - vj[a]))
				acc[a] += t
				oj[a] -= t
			}
		}
		oi := O[i*A : i*A+A]
		for a := range acc {
			oi[a] += acc[a]
		}
	}
}

// taskSums is taskSums of every task of the ledger, in task order (tasks across the
// cores: each task's sums are its own integers).
func (in *ledgerInputs) taskSums(P int) []taskGameSums {
	out := make([]taskGameSums, len(in.tasks))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(in.tasks)))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ti := w; ti < len(in.tasks); ti += workers {
				sp := in.spans[ti]
				out[ti] = taskSums(taskRunsOf(in.score[sp.lo:sp.hi], in.agentOf[sp.lo:sp.hi], &in.tasks[ti], P), P)
			}
		}(w)
	}
	wg.Wait()
	return out
}

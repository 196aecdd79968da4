package scoring

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// bruteGames enumerates every seed-vs-seed game the slow way.
func bruteGames(runs []playerRuns, P int) *Games {
	g := NewGames(P)
	type run struct {
		v     float64
		valid bool
	}
	all := func(p playerRuns) []run {
		var out []run
		for _, v := range p.good {
			out = append(out, run{v, true})
		}
		for k := int64(0); k < p.invalid; k++ {
			out = append(out, run{0, false})
		}
		return out
	}
	for ai := range runs {
		for bi := ai + 1; bi < len(runs); bi++ {
			i, j := runs[ai].player, runs[bi].player
			for _, x := range all(runs[ai]) {
				for _, y := range all(runs[bi]) {
					switch {
					case !x.valid && !y.valid, x.valid && y.valid && Tie(x.v, y.v):
						g.Ties[min(i, j)*P+max(i, j)]++
					case !y.valid || x.valid && x.v > y.v:
						g.Wins[i*P+j]++
					default:
						g.Wins[j*P+i]++
					}
				}
			}
		}
	}
	return g
}

func TestAddTaskGamesMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 200; trial++ {
		P := 2 + rng.IntN(5)
		var runs []playerRuns
		for p := 0; p < P; p++ {
			pr := playerRuns{player: (p * 3) % P, invalid: int64(rng.IntN(3))}
			n := rng.IntN(8)
			for k := 0; k < n; k++ {
				// Values on a coarse grid plus jitter around the tie threshold.
				v := float64(rng.IntN(5))*0.1 + float64(rng.IntN(5))*4e-7
				if rng.IntN(4) == 0 {
					v = -v * 1e6
				}
				pr.good = append(pr.good, v)
			}
			sort.Float64s(pr.good)
			runs = append(runs, pr)
		}
		got := NewGames(P)
		addTaskGames(got, runs)
		want := bruteGames(runs, P)
		for k := range got.Wins {
			if got.Wins[k] != want.Wins[k] || got.Ties[k] != want.Ties[k] {
				t.Fatalf("trial %d cell %d: wins %d ties %d, enumeration wins %d ties %d", trial, k, got.Wins[k], got.Ties[k], want.Wins[k], want.Ties[k])
			}
		}
	}
}

// randomGames makes a connected tournament with ties among P players of spread skill.
func randomGames(P int, seed uint64) *Games {
	rng := rand.New(rand.NewPCG(seed, 1))
	g := NewGames(P)
	skill := make([]float64, P)
	for i := range skill {
		skill[i] = rng.NormFloat64() * 1.5
	}
	for i := 0; i < P; i++ {
		for j := i + 1; j < P; j++ {
			n := 20 + rng.IntN(200)
			for k := 0; k < n; k++ {
				u := rng.Float64()
				p := sigmoid(skill[i] - skill[j])
				switch {
				case u < 0.1:
					g.Ties[i*P+j]++
				case u < 0.1+0.9*p:
					g.Wins[i*P+j]++
				default:
					g.Wins[j*P+i]++
				}
			}
		}
	}
	return g
}

func TestNewtonAndMMAgree(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		g := randomGames(12, seed)
		c := weights(g, 0)
		tn, err := FitNewton(c, g.P, nil)
		if err != nil {
			t.Fatal(err)
		}
		tm, _ := FitMM(c, g.P, 200000)
		en, em := ToElo(tn), ToElo(tm)
		for i := range en {
			if math.Abs(en[i]-em[i]) > 1e-6 {
				t.Fatalf("seed %d player %d: Newton %.9f, MM %.9f Elo", seed, i, en[i], em[i])
			}
		}
	}
}

// The fit satisfies the likelihood's first-order conditions Σ_j c_ij = Σ_j n_ij σ(θ_i−θ_j)
// to 1e-6 of the total game weight. For a well-posed tournament c is the real games: the
// pure maximum-likelihood fit. Where a player never loses the MLE proper is infinite, the
// fit is regularised (PseudoTie on every pair), and the conditions that hold are those of
// the regularised likelihood — the real games' conditions cannot, as the ratings stay finite.
func TestFitFirstOrderConditions(t *testing.T) {
	check := func(name string, g *Games, wantRegularised bool) {
		c, regularised := fitWeights(g)
		if regularised != wantRegularised {
			t.Fatalf("%s: regularised = %v, want %v", name, regularised, wantRegularised)
		}
		if !regularised && !slices.Equal(c, weights(g, 0)) {
			t.Fatalf("%s: the MLE exists but the fit's weights are not the real games'", name)
		}
		theta, err := FitNewton(c, g.P, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if th, reg := fitGames(g, nil); reg != regularised || !slices.Equal(th, theta) {
			t.Fatalf("%s: fitGames gives %v (regularised %v), Newton %v", name, th, reg, theta)
		}
		var total float64
		for _, v := range c {
			total += v
		}
		grad := Gradient(c, theta)
		var sum float64
		for _, v := range grad {
			sum += v
		}
		if m := maxAbs(grad); m > 1e-6*total {
			t.Errorf("%s: max |∂LL/∂θ| = %g > 1e-6 × total weight %g", name, m, total)
		}
		if math.Abs(sum) > 1e-6*total {
			t.Errorf("%s: gradient does not sum to 0: %g", name, sum)
		}
		var mean float64
		for _, e := range ToElo(theta) {
			mean += e
		}
		if mean /= float64(g.P); math.Abs(mean-1000) > 1e-9 {
			t.Errorf("%s: mean rating %v, want 1000", name, mean)
		}
	}
	check("random", randomGames(30, 3), false)
	g := randomGames(6, 4)
	for j := 1; j < g.P; j++ { // player 0 never loses
		g.Wins[0*g.P+j] += g.Wins[j*g.P+0] + g.Ties[j]
		g.Wins[j*g.P+0], g.Ties[j] = 0, 0
	}
	check("undefeated player", g, true)
}

func TestEloKnownValues(t *testing.T) {
	// a beats b 3 times out of 4: P = 3/4 = 1/(1+10^(−ΔR/400)) → ΔR = 400·log10(3).
	g := NewGames(2)
	g.Wins[0*2+1], g.Wins[1*2+0] = 3, 1
	th, err := FitNewton(weights(g, 0), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := ToElo(th)
	if d := e[0] - e[1]; math.Abs(d-400*math.Log10(3)) > 1e-9 {
		t.Errorf("ΔElo = %v, want %v", d, 400*math.Log10(3))
	}
	if math.Abs(e[0]+e[1]-2000) > 1e-9 {
		t.Errorf("ratings %v do not average 1000", e)
	}
	// A tie counts 1 towards each side: 1 win, 1 loss, 2 ties → equal ratings.
	g = NewGames(2)
	g.Wins[1], g.Wins[2], g.Ties[1] = 1, 1, 2
	th, _ = FitNewton(weights(g, 0), 2, nil)
	if e := ToElo(th); math.Abs(e[0]-1000) > 1e-9 || math.Abs(e[1]-1000) > 1e-9 {
		t.Errorf("balanced ratings %v", e)
	}
	// A win counts 2, a tie 1: 1 win + 1 tie vs nothing → c01 = 3, c10 = 1 → ΔR = 400·log10(3).
	g = NewGames(2)
	g.Wins[1], g.Ties[1] = 1, 1
	th, _ = FitNewton(weights(g, 0), 2, nil)
	if e := ToElo(th); math.Abs(e[0]-e[1]-400*math.Log10(3)) > 1e-9 {
		t.Errorf("win+tie ΔElo = %v", e[0]-e[1])
	}
}

func TestQuantile(t *testing.T) {
	v := []float64{1, 2, 3, 4}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {1, 4}, {0.5, 2.5}, {0.025, 1.075}, {0.975, 3.925}} {
		if got := quantile(v, c.q); !near(got, c.want, 1e-12) {
			t.Errorf("quantile(%v) = %v, want %v (numpy linear)", c.q, got, c.want)
		}
	}
}

// On the games of a synthetic leaderboard (with the sota player, fitted as the ledger fits
// them), Newton and MM agree to 1e-6 Elo.
func TestNewtonAndMMAgreeOnLedgerGames(t *testing.T) {
	rs, ti := synthResults(15, 6, 4, 21)
	l := mustLedger(t, rs, ti, Options{BootstrapRounds: 1})
	agentIdx := map[string]int{}
	var names []string
	for _, r := range rs {
		if _, ok := agentIdx[r.Agent]; !ok {
			agentIdx[r.Agent] = 0
			names = append(names, r.Agent)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		agentIdx[n] = i
	}
	P := len(names) + 1
	g := NewGames(P)
	for _, task := range ti {
		var sub []Result
		for _, r := range rs {
			if r.Task == task.Name {
				sub = append(sub, r)
			}
		}
		sort.Slice(sub, func(i, j int) bool { return sub[i].Agent < sub[j].Agent })
		addTaskGames(g, taskRuns(sub, &task, agentIdx, P))
	}
	c, _ := fitWeights(g)
	tn, err := FitNewton(c, P, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm, _ := FitMM(c, P, 500000)
	en, em := ToElo(tn), ToElo(tm)
	for i := range en {
		if math.Abs(en[i]-em[i]) > 1e-6 {
			t.Fatalf("player %d: Newton %.9f, MM %.9f", i, en[i], em[i])
		}
	}
	// And the ledger's elo_mle is that fit.
	for _, a := range l.Agents {
		p := P - 1
		if a.Agent != SOTAPlayer {
			p = agentIdx[a.Agent]
		}
		if math.Abs(a.EloMLE-en[p]) > 1e-5 {
			t.Errorf("%s: ledger elo_mle %v, fit %v", a.Agent, a.EloMLE, en[p])
		}
	}
}

package scoring

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"strings"
	"testing"
)

// separatedCases are leaderboards whose win graph is not strongly connected, so the
// Bradley–Terry maximum-likelihood estimate does not exist (Ford's condition fails).
// order is the players from best to worst elo_mle that the games imply ("=" joins equals).
func separatedCases() []struct {
	name  string
	rs    []Result
	ti    []TaskInfo
	order string
} {
	two := []TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.8}, {Name: "L", LowerIsBetter: true, Optimum: 0, SOTA: 0.2}}
	res := func(task, agent string, seed int, score float64) Result {
		return Result{Task: task, Agent: agent, Seed: seed, Status: StatusSuccess, Score: fp(score)}
	}
	bad := func(task, agent string, seed int) Result {
		return Result{Task: task, Agent: agent, Seed: seed, Status: "FAILED"}
	}
	// mid and low win, tie and lose against each other and sota; broken only loses.
	var mixed []Result
	for s, v := range []struct{ midT, midL, lowT, lowL float64 }{{0.7, 0.3, 0.6, 0.1}, {0.75, 0.2, 0.72, 0.2}, {0.85, 0.1, 0.8, 0.3}} {
		mixed = append(mixed,
			res("T", "mid", s, v.midT), res("L", "mid", s, v.midL),
			res("T", "low", s, v.lowT), res("L", "low", s, v.lowL),
			bad("T", "broken", s), bad("L", "broken", s))
	}
	// best beats every run of everyone; mid and sota beat each other.
	var top []Result
	for s, v := range []struct{ midT, midL float64 }{{0.7, 0.3}, {0.75, 0.2}, {0.9, 0.1}} {
		top = append(top,
			res("T", "best", s, 0.99), res("L", "best", s, 0.01),
			res("T", "mid", s, v.midT), res("L", "mid", s, v.midL))
	}
	return []struct {
		name  string
		rs    []Result
		ti    []TaskInfo
		order string
	}{
		{"one agent all invalid", mixed, two, "sota mid low broken"},
		{"one agent wins every game", top, two, "best sota mid"},
		{"two agents, one dominating, one seed", []Result{res("T", "a", 0, 0.9), res("T", "b", 0, 0.5)}, two[:1], "a sota b"},
		{"two agents, both below sota, one seed", []Result{res("T", "a", 0, 0.7), res("T", "b", 0, 0.5)}, two[:1], "sota a b"},
		{"one seed each, two tasks", []Result{
			res("T", "a", 0, 0.9), res("T", "b", 0, 0.5), res("T", "c", 0, 0.6),
			res("L", "a", 0, 0.1), bad("L", "b", 0), res("L", "c", 0, 0.3),
		}, two, "a sota c b"},
		{"every run invalid but one", []Result{bad("T", "a", 0), bad("T", "b", 0), res("T", "c", 0, 0.1)}, two[:1], "sota c a=b"},
	}
}

// The bug this pins: ComputeLedger failed ("Hessian is singular") or put players thousands
// of Elo apart whenever the win graph was separated. Now it gives a regularised fit, says
// so, orders the players as the games do, and keeps every gap between consecutive ratings
// within the bound PseudoTie documents: 400·log10(4G+2) Elo, G the most games of a pair.
func TestLedgerSeparatedWinGraph(t *testing.T) {
	for _, c := range separatedCases() {
		t.Run(c.name, func(t *testing.T) {
			const rounds = 50
			l, err := ComputeLedger(c.rs, c.ti, Options{BootstrapRounds: rounds})
			if err != nil {
				t.Fatalf("ComputeLedger: %v", err)
			}
			if l.EloFit != EloFitRegularised || l.EloBootstrapRegularised != rounds {
				t.Errorf("elo_fit %q with %d of %d rounds regularised, want %q in every round (a resample of separated games is separated)",
					l.EloFit, l.EloBootstrapRegularised, rounds, EloFitRegularised)
			}
			if !bytes.Contains(l.Canonical(), []byte(`"elo_fit":"regularised"`)) {
				t.Errorf("canonical JSON does not say the fit was regularised: %s", l.Canonical())
			}
			// Most games any pair played: per task, seeds × seeds (sota has SOTARuns).
			runs := map[[2]string]int{}
			for _, r := range c.rs {
				runs[[2]string{r.Task, r.Agent}]++
			}
			G := 0
			players := append(agentNames(c.rs), SOTAPlayer)
			for i, a := range players {
				for _, b := range players[i+1:] {
					n := 0
					for _, ti := range c.ti {
						na, nb := runs[[2]string{ti.Name, a}], runs[[2]string{ti.Name, b}]
						if a == SOTAPlayer && na+nb > 0 {
							na = SOTARuns
						}
						if b == SOTAPlayer && na+nb > 0 {
							nb = SOTARuns
						}
						n += na * nb
					}
					G = max(G, n)
				}
			}
			bound := 400 * math.Log10(4*float64(G)+2)
			var got []string
			for i, a := range byEloMLE(l) {
				for _, v := range []float64{a.Elo, a.EloMLE, a.EloCI[0], a.EloCI[1]} {
					if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v-1000) > 5000 {
						t.Fatalf("%s: rating %v", a.Agent, v)
					}
				}
				if !(a.EloCI[0] <= a.Elo && a.Elo <= a.EloCI[1]) {
					t.Errorf("%s: median %v outside CI %v", a.Agent, a.Elo, a.EloCI)
				}
				if i > 0 {
					prev := byEloMLE(l)[i-1]
					if gap := prev.EloMLE - a.EloMLE; gap > bound {
						t.Errorf("%s → %s: gap %.1f Elo above the bound %.1f (G = %d)", prev.Agent, a.Agent, gap, bound, G)
					}
					if prev.EloMLE == a.EloMLE {
						got[len(got)-1] += "=" + a.Agent
						continue
					}
				}
				got = append(got, a.Agent)
			}
			if s := strings.Join(got, " "); s != c.order {
				t.Errorf("order by elo_mle %q, want %q (ratings %s)", s, c.order, l.Canonical())
			}
		})
	}
}

func agentNames(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(out, r.Agent) {
			out = append(out, r.Agent)
		}
	}
	return out
}

func byEloMLE(l *Ledger) []Agent {
	a := slices.Clone(l.Agents)
	// Equal ratings by name: the ledger's own order among them follows the bootstrap
	// medians, which this helper must not depend on.
	slices.SortStableFunc(a, func(x, y Agent) int {
		if c := cmp.Compare(y.EloMLE, x.EloMLE); c != 0 {
			return c
		}
		return cmp.Compare(x.Agent, y.Agent)
	})
	return a
}

// When the maximum-likelihood estimate exists the ledger's elo_mle is the pure MLE — the
// fit of the real games alone, no pseudo-ties — and the ledger says "mle".
func TestLedgerMLEWhenItExists(t *testing.T) {
	rs, ti := synthResults(15, 6, 4, 21)
	l := mustLedger(t, rs, ti, Options{BootstrapRounds: 5})
	if l.EloFit != EloFitMLE || !bytes.Contains(l.Canonical(), []byte(`"elo_fit":"mle"`)) {
		t.Fatalf("elo_fit %q, want %q", l.EloFit, EloFitMLE)
	}
	// The same leaderboard with one extra agent that beats every run: separated. (An
	// all-invalid agent would not do here: invalid runs tie the other agents' invalid runs.)
	extra := slices.Clone(rs)
	for _, task := range ti {
		v := 2.0
		if task.LowerIsBetter {
			v = -1
		}
		extra = append(extra, Result{Task: task.Name, Agent: "oracle", Seed: 0, Status: StatusSuccess, Score: fp(v)})
	}
	l2 := mustLedger(t, extra, ti, Options{BootstrapRounds: 5})
	if l2.EloFit != EloFitRegularised || l2.EloBootstrapRegularised != 5 {
		t.Fatalf("with an agent that never loses: elo_fit %q (%d rounds regularised), want %q in all 5",
			l2.EloFit, l2.EloBootstrapRegularised, EloFitRegularised)
	}
	if top := byEloMLE(l2)[0]; top.Agent != "oracle" || top.EloMLE-byEloMLE(l2)[1].EloMLE > 3000 {
		t.Errorf("the undefeated agent is not rated first, within a few thousand Elo: %s", l2.Canonical())
	}
}

// Ford's condition, case by case: the MLE exists exactly when the directed graph with an
// edge a→b for positive win-or-tie weight of a against b is strongly connected.
func TestMLEExists(t *testing.T) {
	for _, c := range []struct {
		name string
		P    int
		wins [][3]int // winner, loser, count
		ties [][3]int
		want bool
	}{
		{"no players", 0, nil, nil, true},
		{"one player", 1, nil, nil, true},
		{"two players, each won once", 2, [][3]int{{0, 1, 1}, {1, 0, 1}}, nil, true},
		{"two players, one tie", 2, nil, [][3]int{{0, 1, 1}}, true},
		{"two players, one never won", 2, [][3]int{{0, 1, 5}}, nil, false},
		{"two players, no games", 2, nil, nil, false},
		{"cycle of three", 3, [][3]int{{0, 1, 1}, {1, 2, 1}, {2, 0, 1}}, nil, true},
		{"chain of three", 3, [][3]int{{0, 1, 1}, {1, 2, 1}, {0, 2, 1}}, nil, false},
		{"tie links a loser back", 3, [][3]int{{0, 1, 3}, {1, 2, 3}}, [][3]int{{0, 2, 1}}, true},
		{"two tied pairs that never met", 4, nil, [][3]int{{0, 1, 1}, {2, 3, 1}}, false},
		{"undefeated player", 3, [][3]int{{0, 1, 2}, {0, 2, 2}, {1, 2, 1}, {2, 1, 1}}, nil, false},
		{"winless player", 3, [][3]int{{1, 0, 2}, {2, 0, 2}, {1, 2, 1}, {2, 1, 1}}, nil, false},
	} {
		g := NewGames(c.P)
		for _, w := range c.wins {
			g.Wins[w[0]*c.P+w[1]] += int64(w[2])
		}
		for _, x := range c.ties {
			g.Ties[min(x[0], x[1])*c.P+max(x[0], x[1])] += int64(x[2])
		}
		if got := MLEExists(weights(g, 0), c.P); got != c.want {
			t.Errorf("%s: MLEExists = %v, want %v", c.name, got, c.want)
		}
		if _, reg := fitWeights(g); reg == c.want && c.P > 0 {
			t.Errorf("%s: fitWeights regularised = %v although the MLE exists = %v", c.name, reg, c.want)
		}
	}
}

// Newton is not the only path. These are the games of a bootstrap round that made the old
// ledger fail: weighted with a vanishing pseudo-tie (1e-12 of the games, the old
// regularisation) and started from the full data's fit, Newton's Hessian is numerically
// singular. fitRobust must still reach the maximum (via MM, then a Newton polish).
func TestFitRobustFallsBackFromSingularNewton(t *testing.T) {
	const P = 4 // a, b, c, sota
	tiny := func(g *Games) []float64 { return weights(g, 1e-12*2*float64(g.Total())/float64(P*(P-1))) }
	full := NewGames(P)
	copy(full.Wins, []int64{0, 2, 2, 20, 0, 0, 0, 0, 0, 2, 0, 0, 0, 20, 20, 0})
	start, err := FitNewton(tiny(full), P, nil)
	if err != nil {
		t.Fatal(err)
	}
	round := NewGames(P)
	copy(round.Wins, []int64{0, 3, 3, 19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 21, 20, 0})
	c := tiny(round)
	if _, err := FitNewton(c, P, start); err == nil {
		t.Skip("Newton no longer fails on this input on this platform; the fallback is not exercised")
	}
	theta := fitRobust(c, P, start)
	var total float64
	for _, v := range c {
		total += v
	}
	if m := maxAbs(Gradient(c, theta)); !(m <= 1e-6*total) {
		t.Fatalf("fallback fit: max |∂LL/∂θ| = %g > 1e-6 × total weight %g (θ %v)", m, total, theta)
	}
	// The ledger's own fit of that round is regularised and plain Newton handles it.
	if _, reg := fitWeights(round); !reg {
		t.Fatal("round not seen as separated")
	}
	cr, _ := fitWeights(round)
	if _, err := FitNewton(cr, P, start); err != nil {
		t.Errorf("Newton on the regularised round: %v", err)
	}
}

// MM alone (what fitRobust falls back to) agrees with Newton to 1e-6 Elo on a regularised
// problem too, so the fallback gives the same ratings.
func TestMMAgreesOnRegularisedFit(t *testing.T) {
	for _, c := range separatedCases() {
		agentIdx := map[string]int{}
		for i, n := range agentNames(c.rs) {
			agentIdx[n] = i
		}
		P := len(agentIdx) + 1
		g := NewGames(P)
		for _, task := range c.ti {
			var sub []Result
			for _, r := range c.rs {
				if r.Task == task.Name {
					sub = append(sub, r)
				}
			}
			slices.SortStableFunc(sub, func(a, b Result) int { return cmp.Compare(a.Agent, b.Agent) })
			addTaskGames(g, taskRuns(sub, &task, agentIdx, P))
		}
		cw, reg := fitWeights(g)
		if !reg {
			t.Fatalf("%s: not regularised", c.name)
		}
		tn, err := FitNewton(cw, P, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tm := fitMM(cw, P, nil, 100000)
		en, em := ToElo(tn), ToElo(tm)
		for i := range en {
			if math.Abs(en[i]-em[i]) > 1e-6 {
				t.Errorf("%s player %d: Newton %.9f, MM %.9f", c.name, i, en[i], em[i])
			}
		}
	}
}

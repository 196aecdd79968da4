package scoring

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// The conjugate-gradient Newton step (used above denseNewtonMaxP players) reaches the same
// ratings as the dense Cholesky step, regularised or not.
func TestNewtonCGMatchesDense(t *testing.T) {
	defer func(old int) { denseNewtonMaxP = old }(denseNewtonMaxP)
	for seed := uint64(1); seed <= 4; seed++ {
		g := randomGames(40, seed)
		c, _ := fitWeights(g)
		denseNewtonMaxP = 1 << 30
		td, err := FitNewton(c, g.P, nil)
		if err != nil {
			t.Fatal(err)
		}
		denseNewtonMaxP = 1
		tc, err := FitNewton(c, g.P, nil)
		if err != nil {
			t.Fatalf("seed %d: CG Newton: %v", seed, err)
		}
		ed, ec := ToElo(td), ToElo(tc)
		for i := range ed {
			if math.Abs(ed[i]-ec[i]) > 1e-7 {
				t.Fatalf("seed %d player %d: dense %.10f, CG %.10f Elo", seed, i, ed[i], ec[i])
			}
		}
	}
}

// BenchmarkLedgerScale is issue 12's ledger-scale benchmark: `score` of agents × 20 tasks ×
// 3 seeds with 100 bootstrap rounds (parse and ledger), for each Elo bootstrap policy
// ("games", the default; "tasks-linearised", elo_tasks.go) and, for the default, the solver
// now in use ("cg": conjugate-gradient Newton steps above denseNewtonMaxP players) and the
// one before ("dense": Cholesky at every size). It reports cpu-s/op and the process's peak RSS
// (maxrss-MB: run one case per process, as bench/ledger-scale.sh does, for it to mean that
// case). EVALMESH_SCALE_AGENTS=N,M,... picks the sizes (default 500,1000); the goal
// is 5000 agents in ≤ 30 s and ≤ 2 GB.
func BenchmarkLedgerScale(b *testing.B) {
	sizes := []int{500, 1000}
	if s := os.Getenv("EVALMESH_SCALE_AGENTS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("EVALMESH_SCALE_AGENTS: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	rounds := 100
	if s := os.Getenv("EVALMESH_SCALE_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	for _, agents := range sizes {
		rs, ti := synthResults(agents, 20, 3, 7)
		data := resultsJSONL(rs)
		rs = nil
		for _, c := range []struct{ boot, solver string }{{EloBootstrapGames, "cg"}, {EloBootstrapGames, "dense"}, {EloBootstrapTasksLinearised, "cg"}} {
			boot, solver := c.boot, c.solver
			b.Run(fmt.Sprintf("agents=%d/boot=%s/solver=%s", agents, boot, solver), func(b *testing.B) {
				defer func(old int) { denseNewtonMaxP = old }(denseNewtonMaxP)
				if solver == "dense" {
					denseNewtonMaxP = 1 << 30
				}
				c0 := testutil.CPUSeconds()
				for b.Loop() {
					parsed, err := ParseResultsJSONL(data)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := ComputeLedger(parsed, ti, Options{BootstrapRounds: rounds, EloBootstrap: boot}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric((testutil.CPUSeconds()-c0)/float64(b.N), "cpu-s/op")
				var ru syscall.Rusage
				if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
					b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MB")
				}
			})
		}
	}
}

// The two ways of counting a task's games — the R×R running-count table (small ledgers)
// and the two-pointer pairs without it (large ones, across workers) — give the same counts,
// with near-ties and invalid runs in the mix.
func TestTaskGamesTableAndPairsAgree(t *testing.T) {
	const P = 40
	for seed := 1; seed <= 5; seed++ {
		var runs []playerRuns
		for p := 0; p < P; p++ {
			pr := playerRuns{player: p, invalid: int64((p * seed) % 3)}
			for k := 0; k < 1+(p+seed)%5; k++ {
				v := math.Round(math.Sin(float64(p*7+k*13+seed))*200) / 1000 // many exact and near ties
				if k%4 == 3 {
					v += 5e-7
				}
				pr.good = append(pr.good, v)
			}
			runs = append(runs, pr)
		}
		table, pairs := NewGames(P), NewGames(P)
		addTaskGamesLocked(table, runs, nil)
		addTaskGamesParallel(pairs, runs, 3)
		for i := range table.Wins {
			if table.Wins[i] != pairs.Wins[i] || table.Ties[i] != pairs.Ties[i] {
				t.Fatalf("seed %d cell %d: table %d/%d, pairs %d/%d (wins/ties)", seed, i, table.Wins[i], table.Ties[i], pairs.Wins[i], pairs.Ties[i])
			}
		}
	}
}

package scoring

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/golden_root.txt from this machine's ledger")

// goldenResults is a fixed, rich input for the cross-architecture check: separated and
// overlapping agents, ties at the 1e-6 boundary, invalid runs, a lower-is-better task
// with huge worst values, negative scores, an agent with no valid run and one that beats
// every run — every numeric path of the ledger (Phi, game counting, Newton and MM, the
// binomial sampler in both regimes, the normalized-score bootstrap, quantiles) is taken.
// It is generated from a fixed PCG stream by integer arithmetic and exact decimal
// parsing only, so the inputs themselves are the same bits on every architecture.
func goldenResults() ([]Result, []TaskInfo) {
	rng := rand.New(rand.NewPCG(20261201, 3))
	var tasks []TaskInfo
	kinds := []struct {
		lower      bool
		opt, sota  float64
		worstMilli int64 // score = value / 1000 (exact decimal, parsed)
		scale      int64
	}{
		{false, 1, 0.854, -587, 1000},         // Spearman-like, negative worst
		{false, 1, 0.942, 0, 1000},            // accuracy
		{true, 0, 5.83, 24183970000, 2000000}, // huge worst, lower is better
		{true, 0, 0.622, 503000000000, 30000}, // MASE 5.03e14-ish anchors
		{false, 1, 0.269, 2, 300},             // RougeL-like
		{true, 0, 0.017, 9700, 3000},
	}
	for i := 0; i < 18; i++ {
		k := kinds[i%len(kinds)]
		w := float64(k.worstMilli) / 1000
		tasks = append(tasks, TaskInfo{Name: fmt.Sprintf("t%02d", i), LowerIsBetter: k.lower, Optimum: k.opt, SOTA: k.sota, EstimatedWorst: &w})
	}
	const agents, seeds = 40, 12
	var out []Result
	num := func(milli int64) *float64 {
		v := mustParse(fmt.Sprintf("%d.%03d", milli/1000, abs64(milli%1000)))
		if milli < 0 && milli > -1000 {
			v = -v
		}
		return &v
	}
	for ti, t := range tasks {
		k := kinds[ti%len(kinds)]
		for a := 0; a < agents; a++ {
			name := fmt.Sprintf("agent%02d", a)
			for s := 0; s < seeds; s++ {
				r := Result{Task: t.Name, Agent: name, Seed: s, Status: "FAILED", AttestationID: fmt.Sprintf("att-%d-%d-%d", ti, a, s)}
				switch {
				case a == 0: // never valid
				case a == 1: // always at the optimum
					r.Status, r.Score = StatusSuccess, num(int64(k.opt*1000))
				case rng.IntN(100) < 20+a: // invalid, more often for later agents
				default:
					// skill decreases with a; noise overlaps neighbours.
					q := int64(1000 - 20*a - rng.IntN(250)) // per-mille quality
					var milli int64
					if k.lower {
						milli = int64(k.sota*1000) + (1000-q)*k.scale/10
					} else {
						milli = int64(k.opt*1000) - (1000-q)*k.scale/1000
					}
					if a%7 == 3 { // ties at 1e-6: some runs land on a shared value
						milli = int64(k.sota * 1000)
					}
					r.Status, r.Score = StatusSuccess, num(milli)
				}
				if a == 5 && s == 0 && !k.lower { // within 1e-6 of SOTA: a tie with sota
					v := k.sota + 1e-6
					r.Status, r.Score = StatusSuccess, &v
				}
				out = append(out, r)
			}
		}
	}
	// A task where two agents sit exactly at the tie threshold (TestTieBoundaryNotFused):
	// a fused threshold would turn these ties into wins and move the whole ledger.
	edge := TaskInfo{Name: "tie-edge", Optimum: 1, SOTA: 1.9}
	w := 0.0
	edge.EstimatedWorst = &w
	tasks = append(tasks, edge)
	for s := 0; s < seeds; s++ {
		for a, v := range []float64{1.7833850977512211, 1.783403931790539, 1.7565293349350029, 1.756547900414007} {
			v := v
			out = append(out, Result{Task: edge.Name, Agent: fmt.Sprintf("agent%02d", 10+a), Seed: s, Status: StatusSuccess, Score: &v})
		}
	}
	return out, tasks
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func mustParse(s string) float64 {
	var v float64
	if _, err := fmt.Sscan(s, &v); err != nil {
		panic(err)
	}
	return v
}

// TestLedgerGoldenRoot pins the ledger root of goldenResults under both worst anchors.
// bench/crossarch.sh runs this test natively and, cross-compiled, under qemu for arm64,
// ppc64le and s390x (the architectures where Go may fuse multiply-adds and where math's
// Exp/Log are different code): docs/design.md §7 requires every honest node to produce the same
// bytes. Regenerate with -update-golden only on a deliberate change of the ledger.
func TestLedgerGoldenRoot(t *testing.T) {
	rs, ti := goldenResults()
	var lines []string
	for _, worst := range []string{"population", "estimated"} {
		l, err := ComputeLedger(rs, ti, Options{Worst: worst})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %s", worst, l.Root()))
		if worst == "population" && l.EloFit != EloFitRegularised {
			t.Errorf("golden input should exercise the regularised fit (agent01 never loses), got %s", l.EloFit)
		}
	}
	got := strings.Join(lines, "\n") + "\n"
	fmt.Fprintf(os.Stderr, "golden ledger roots (%s):\n%s", archName(), got)
	const path = "testdata/golden_root.txt"
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with go test -run GoldenRoot -update-golden)", err)
	}
	if got != string(want) {
		t.Fatalf("ledger roots differ from %s:\ngot:\n%swant:\n%s", path, got, want)
	}
}

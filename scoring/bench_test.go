package scoring

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// synthResults makes agents × tasks × seeds results: agent skill plus noise, ~45 % invalid
// runs spread unevenly (as AIRS-Bench's 55 % valid), half the tasks lower-is-better.
func synthResults(agents, tasks, seeds int, seed uint64) ([]Result, []TaskInfo) {
	rng := rand.New(rand.NewPCG(seed, 42))
	ti := make([]TaskInfo, tasks)
	for t := range ti {
		lower := t%2 == 1
		ti[t] = TaskInfo{Name: fmt.Sprintf("task%03d", t), LowerIsBetter: lower, Optimum: 1, SOTA: 0.8}
		if lower {
			ti[t].Optimum, ti[t].SOTA = 0, 0.2
		}
		w := 0.0
		if lower {
			w = 5
		}
		ti[t].EstimatedWorst = &w
	}
	skill := make([]float64, agents)
	validP := make([]float64, agents)
	for a := range skill {
		skill[a] = rng.Float64()
		validP[a] = 0.3 + 0.6*rng.Float64()
	}
	out := make([]Result, 0, agents*tasks*seeds)
	for t := 0; t < tasks; t++ {
		for a := 0; a < agents; a++ {
			for s := 0; s < seeds; s++ {
				r := Result{Task: ti[t].Name, Agent: fmt.Sprintf("agent%03d", a), Seed: s, Status: "FAILED"}
				if rng.Float64() < validP[a] {
					v := 0.6*skill[a] + 0.4*rng.Float64()
					if ti[t].LowerIsBetter {
						v = 1.5 - v
					}
					r.Status, r.Score = StatusSuccess, &v
				}
				out = append(out, r)
			}
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, ti
}

func resultsJSONL(rs []Result) []byte {
	var b bytes.Buffer
	for _, r := range rs {
		score := "null"
		if r.Score != nil {
			score = fmt.Sprint(*r.Score)
		}
		fmt.Fprintf(&b, `{"task":%q,"agent":%q,"seed":%d,"status":%q,"score":%s}`+"\n", r.Task, r.Agent, r.Seed, r.Status, score)
	}
	return b.Bytes()
}

var benchSizes = []struct{ agents, tasks, seeds int }{{20, 20, 10}, {200, 100, 50}}

// benchMaxResults skips the larger sizes (CI's smoke run of bench/score.sh passes 4000).
var benchMaxResults = flag.Int("score.maxresults", 0, "score benchmark: skip sizes with more results than this (0: none skipped)")

// BenchmarkScore is the benchmark. For each size, "floor" parses the results file
// and sorts the results (the least any ledger must do); "ledger" parses the same file and
// computes the whole ledger with 100 bootstrap rounds. bench/score.sh prints the ratio.
// peak-MiB is the process's peak RSS while each ran (the input file, about 80 MB at 1M
// results, and what earlier runs left to the heap included).
func BenchmarkScore(b *testing.B) {
	for _, sz := range benchSizes {
		if n := sz.agents * sz.tasks * sz.seeds; *benchMaxResults > 0 && n > *benchMaxResults {
			continue
		}
		rs, ti := synthResults(sz.agents, sz.tasks, sz.seeds, 1)
		data := resultsJSONL(rs)
		rs = nil
		name := fmt.Sprintf("results=%d", sz.agents*sz.tasks*sz.seeds)
		b.Run(name+"/floor", func(b *testing.B) {
			defer testutil.ReportPeakRSS(b)()
			c0 := testutil.CPUSeconds()
			for b.Loop() {
				parsed, err := ParseResultsJSONL(data)
				if err != nil {
					b.Fatal(err)
				}
				slices.SortFunc(parsed, compareResults)
			}
			b.ReportMetric((testutil.CPUSeconds()-c0)/float64(b.N), "cpu-s/op")
		})
		b.Run(name+"/ledger", func(b *testing.B) {
			defer testutil.ReportPeakRSS(b)()
			c0 := testutil.CPUSeconds()
			for b.Loop() {
				parsed, err := ParseResultsJSONL(data)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ComputeLedger(parsed, ti, Options{BootstrapRounds: 100}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((testutil.CPUSeconds()-c0)/float64(b.N), "cpu-s/op")
		})
	}
}

// compareResults is the floor's sort order: task, agent, seed (as ComputeLedger orders).
func compareResults(a, b Result) int {
	if c := cmp.Compare(a.Task, b.Task); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Agent, b.Agent); c != 0 {
		return c
	}
	return cmp.Compare(a.Seed, b.Seed)
}

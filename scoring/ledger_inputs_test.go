package scoring

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// referenceDigest is the inputs digest as first written: one pass over a sorted copy of
// the results, every field read from the Result itself.
func referenceDigest(rs []Result, tasks []TaskInfo, worst string, rounds int) [32]byte {
	h := sha256.New()
	var buf []byte
	field := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	score := func(v *float64) {
		if v == nil {
			buf = append(buf, 0)
			return
		}
		buf = append(buf, 1)
		buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(*v))
	}
	field("evalmesh ledger inputs v1")
	field(worst)
	field(strconv.Itoa(rounds))
	for _, t := range tasks {
		field(t.Name)
		field(strconv.FormatBool(t.LowerIsBetter))
		score(&t.Optimum)
		score(&t.SOTA)
		score(t.EstimatedWorst)
	}
	for i := range rs {
		r := &rs[i]
		field(r.Task)
		field(r.Agent)
		buf = binary.AppendVarint(buf, int64(r.Seed))
		field(r.Status)
		score(r.Score)
		field(r.AttestationID)
	}
	h.Write(buf)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// sortInputs' counting sort, its flat per-run arrays and the digest built from them agree
// with a comparison sort of the Results themselves and the digest read from those, on
// inputs with every kind of field: negative and huge seeds, statuses other than
// SUCCESS, NaN, infinite and missing scores, attestation IDs on some runs, and groups
// that arrive already sorted by seed as well as shuffled; by either counting sort.
func TestSortInputsMatchesComparisonSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var ti []TaskInfo
	for k := 0; k < 7; k++ {
		ti = append(ti, TaskInfo{Name: fmt.Sprintf("t%d", k), LowerIsBetter: k%2 == 0, Optimum: 1, SOTA: 0.5})
	}
	seeds := []int{0, 1, 2, -3, 7, math.MaxInt64, math.MinInt64, 1 << 40}
	statuses := []string{StatusSuccess, StatusSuccess, "FAILED", "TIMEOUT"}
	var rs []Result
	for _, task := range ti {
		for a := 0; a < 9; a++ {
			for _, s := range seeds[:rng.IntN(len(seeds))+1] {
				r := Result{Task: task.Name, Agent: fmt.Sprintf("agent-%d", (a*5)%9), Seed: s, Status: statuses[rng.IntN(len(statuses))]}
				switch rng.IntN(6) {
				case 0:
				case 1:
					r.Score = fp(math.NaN())
				case 2:
					r.Score = fp(math.Inf(-1))
				default:
					r.Score = fp(rng.Float64())
				}
				if rng.IntN(3) == 0 {
					r.AttestationID = fmt.Sprintf("att-%d", rng.IntN(1000))
				}
				rs = append(rs, r)
			}
		}
	}
	want := slices.Clone(rs)
	slices.SortFunc(want, compareResults)
	oneTable := groupCountMax
	defer func() { groupCountMax = oneTable }()
	for k := 0; k < 4; k++ {
		// The one counting pass on the (task, agent) groups, then the two passes (by agent,
		// by task) that sortInputs takes when that table would be too large.
		shuffle, twoPasses := k%2 == 1, k >= 2
		groupCountMax = oneTable
		if twoPasses {
			groupCountMax = func(int) int { return 0 }
		}
		in := slices.Clone(rs) // grouped, each group in seed order as listed (not sorted)
		if shuffle {
			rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
		}
		li, err := sortInputs(in, ti, "population")
		if err != nil {
			t.Fatal(err)
		}
		if len(li.runs) != len(want) {
			t.Fatalf("%d sorted runs, want %d", len(li.runs), len(want))
		}
		for i := range want {
			got := li.at(i)
			w := &want[i]
			if got.Task != w.Task || got.Agent != w.Agent || got.Seed != w.Seed {
				t.Fatalf("shuffle=%v twoPasses=%v: sorted result %d is %s/%s/%d, want %s/%s/%d", shuffle, twoPasses, i, got.Task, got.Agent, got.Seed, w.Task, w.Agent, w.Seed)
			}
			if li.agentNames[li.agentOf[i]] != w.Agent {
				t.Fatalf("result %d: agentOf names %q, want %q", i, li.agentNames[li.agentOf[i]], w.Agent)
			}
			ws := validScore(w)
			if gs := li.score[i]; !(gs == ws || math.IsNaN(gs) && math.IsNaN(ws)) {
				t.Fatalf("result %d (%+v): score %v, want %v", i, *w, gs, ws)
			}
		}
		for ti, sp := range li.spans {
			for i := sp.lo; i < sp.hi; i++ {
				if li.at(i).Task != li.tasks[ti].Name {
					t.Fatalf("span of task %s holds a result of %s", li.tasks[ti].Name, li.at(i).Task)
				}
			}
		}
		got := inputsDigests(li, 100, "population", "")
		for k, worst := range []string{"population", ""} {
			if ref := referenceDigest(want, li.tasks, worst, 100); got[k] != ref {
				t.Fatalf("shuffle=%v twoPasses=%v: digest (worst %q) differs from the one read from the sorted Results", shuffle, twoPasses, worst)
			}
		}
	}
}

// A repeated seed is reported whichever way a group is put in seed order: among seeds that
// span exactly as many values as there are runs (the direct placement's case), among ones
// that do not, and already in order.
func TestSortInputsRepeatedSeed(t *testing.T) {
	ti := []TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.5}}
	v := 0.5
	for _, seeds := range [][]int{{2, 0, 2}, {1, 0, 1}, {0, 1, 1}, {5, 9, 5, 7}, {3, 3}} {
		var rs []Result
		for _, s := range seeds {
			rs = append(rs, Result{Task: "T", Agent: "a", Seed: s, Status: StatusSuccess, Score: &v})
		}
		_, err := sortInputs(rs, ti, "population")
		if err == nil || !strings.Contains(err.Error(), `two results for task "T" agent "a" seed`) {
			t.Errorf("seeds %v: error %v, want the repeated seed named", seeds, err)
		}
	}
}

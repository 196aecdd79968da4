package scoring

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

func fp(v float64) *float64 { return &v }

func smallResults() ([]Result, []TaskInfo) {
	rs, ti := synthResults(6, 4, 5, 11)
	for i := range rs {
		rs[i].AttestationID = "bafy" + rs[i].Task + rs[i].Agent + itoa(rs[i].Seed)
	}
	return rs, ti
}

func mustLedger(t *testing.T, rs []Result, ti []TaskInfo, o Options) *Ledger {
	t.Helper()
	l, err := ComputeLedger(rs, ti, o)
	if err != nil {
		t.Fatalf("ComputeLedger: %v", err)
	}
	return l
}

// Property: the ledger is a function of the set of results, not of their order, nor of
// how many cores computed it.
func TestLedgerShuffleInvariant(t *testing.T) {
	rs, ti := smallResults()
	ref := mustLedger(t, rs, ti, Options{})
	rng := rand.New(rand.NewPCG(3, 3))
	for k := 0; k < 10; k++ {
		s := append([]Result(nil), rs...)
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		tasks := append([]TaskInfo(nil), ti...)
		rng.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
		l := mustLedger(t, s, tasks, Options{})
		if l.Root() != ref.Root() || !bytes.Equal(l.Canonical(), ref.Canonical()) {
			t.Fatalf("shuffle %d changed the ledger root: %s vs %s", k, l.Root(), ref.Root())
		}
	}
	prev := runtime.GOMAXPROCS(1)
	l := mustLedger(t, rs, ti, Options{})
	runtime.GOMAXPROCS(prev)
	if l.Root() != ref.Root() {
		t.Fatal("GOMAXPROCS=1 gives a different root")
	}
}

// Property: changing any one input changes the root.
func TestLedgerRootChangesWithAnyScore(t *testing.T) {
	rs, ti := smallResults()
	ref := mustLedger(t, rs, ti, Options{}).Root()
	rng := rand.New(rand.NewPCG(5, 5))
	changed := 0
	for k := 0; k < 40; k++ {
		i := rng.IntN(len(rs))
		s := append([]Result(nil), rs...)
		switch {
		case s[i].Score != nil && k%2 == 0:
			s[i].Score = fp(math.Nextafter(*s[i].Score, math.Inf(1))) // the smallest change there is
		case s[i].Score != nil:
			s[i].Score = nil // score withdrawn
		default:
			s[i].Status, s[i].Score = StatusSuccess, fp(0.5)
		}
		if mustLedger(t, s, ti, Options{}).Root() == ref {
			t.Fatalf("changing result %d (%+v) left the root unchanged", i, rs[i])
		}
		changed++
	}
	s := append([]Result(nil), rs...)
	s[0].AttestationID = "other"
	if mustLedger(t, s, ti, Options{}).Root() == ref {
		t.Fatal("changing an attestation ID left the root unchanged")
	}
	if mustLedger(t, rs, ti, Options{Worst: "estimated"}).Root() == ref {
		t.Fatal("changing the worst anchor left the root unchanged")
	}
}

func TestLedgerErrors(t *testing.T) {
	ti := []TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.9}}
	ok := Result{Task: "T", Agent: "a", Seed: 1, Status: StatusSuccess, Score: fp(0.5)}
	for _, c := range []struct {
		name string
		rs   []Result
		ti   []TaskInfo
		o    Options
		want string
	}{
		{"unknown task", []Result{ok, {Task: "U", Agent: "a", Seed: 1, Status: "FAILED"}}, ti, Options{}, `unknown task "U"`},
		{"duplicate slot", []Result{ok, ok}, ti, Options{}, `two results for task "T" agent "a" seed 1`},
		{"sota agent", []Result{{Task: "T", Agent: "sota", Status: "FAILED"}}, ti, Options{}, "reserved"},
		{"bad worst", []Result{ok}, ti, Options{Worst: "median"}, `unknown worst anchor "median"`},
		{"estimated missing", []Result{ok}, ti, Options{Worst: "estimated"}, `task "T" has no estimated_worst_score`},
		{"duplicate task", []Result{ok}, append(ti, ti[0]), Options{}, "listed twice"},
		{"bad rounds", []Result{ok}, ti, Options{BootstrapRounds: -1}, "bootstrap rounds"},
	} {
		_, err := ComputeLedger(c.rs, c.ti, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}

func agentByName(l *Ledger, name string) *Agent {
	for i := range l.Agents {
		if l.Agents[i].Agent == name {
			return &l.Agents[i]
		}
	}
	return nil
}

// Hand-checked small case: NS, VSR, worst anchors, invalid handling, ranks, JSON shape.
func TestLedgerSmallCase(t *testing.T) {
	ti := []TaskInfo{
		{Name: "Acc", Optimum: 1, SOTA: 0.9, EstimatedWorst: fp(0)},
		{Name: "Err", LowerIsBetter: true, Optimum: 0, SOTA: 1, EstimatedWorst: fp(1e9)},
		{Name: "Dead", Optimum: 1, SOTA: 0.5, EstimatedWorst: fp(0)},
	}
	rs := []Result{
		{Task: "Acc", Agent: "good", Seed: 0, Status: StatusSuccess, Score: fp(0.9)},
		{Task: "Acc", Agent: "good", Seed: 1, Status: StatusSuccess, Score: fp(1.0)},
		{Task: "Acc", Agent: "bad", Seed: 0, Status: StatusSuccess, Score: fp(0.5)},
		{Task: "Acc", Agent: "bad", Seed: 1, Status: "TIMEOUT"},
		{Task: "Err", Agent: "good", Seed: 0, Status: StatusSuccess, Score: fp(1)},
		{Task: "Err", Agent: "bad", Seed: 0, Status: StatusSuccess, Score: fp(1e6)},
		{Task: "Err", Agent: "bad", Seed: 1, Status: StatusSuccess, Score: fp(math.NaN())}, // NaN = invalid
		{Task: "Dead", Agent: "good", Seed: 0, Status: "FAILED"},
		{Task: "Dead", Agent: "bad", Seed: 0, Status: StatusSuccess}, // no score = invalid
	}
	l := mustLedger(t, rs, ti, Options{})
	phi := func(s, opt float64) float64 { return -math.Log10(math.Abs(s - opt)) }
	good, bad := agentByName(l, "good"), agentByName(l, "bad")
	// good: Acc NS(0.9)=1, NS(1.0)=(3−φ(0.5))/(1−φ(0.5)); Err NS(1)=1 (worst 1e6); Dead 0.
	nsAcc1 := (3 - phi(0.5, 1)) / (1 - phi(0.5, 1))
	wantGood := (1 + nsAcc1 + 1 + 0) / 4
	if !near(*good.NormalizedScore, round9(wantGood), 1e-9) {
		t.Errorf("good NS = %v, want %v", *good.NormalizedScore, wantGood)
	}
	if *bad.NormalizedScore != 0 {
		t.Errorf("bad NS = %v, want 0 (every valid run is the population worst)", *bad.NormalizedScore)
	}
	// VSR per task then mean: good 1, 1, 0 → 2/3; bad 1/2, 1/2, 0 → 1/3.
	if !near(*good.ValidSubmissionRate, 2.0/3, 1e-9) || !near(*bad.ValidSubmissionRate, 1.0/3, 1e-9) {
		t.Errorf("VSR good %v bad %v", *good.ValidSubmissionRate, *bad.ValidSubmissionRate)
	}
	var dead *TaskRow
	for i := range l.Tasks {
		if l.Tasks[i].Task == "Dead" {
			dead = &l.Tasks[i]
		}
	}
	if dead == nil || dead.WorstSource != "none" || dead.Worst != nil || dead.ValidRuns != 0 {
		t.Errorf("all-invalid task row: %+v", dead)
	}
	// Estimated anchors: Acc worst 0 → NS(0.5) = φ(0.5)/φ(0.9) > 0.
	le := mustLedger(t, rs, ti, Options{Worst: "estimated"})
	if b := agentByName(le, "bad"); !(*b.NormalizedScore > 0) {
		t.Errorf("estimated anchor: bad NS = %v, want > 0", *b.NormalizedScore)
	}
	// Shape of the JSON: the sota player has Elo fields only; agents ordered by Elo.
	var out map[string]any
	raw, _ := json.Marshal(l)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out["ledger_root"] != l.Root() {
		t.Errorf("ledger_root %v, want %s", out["ledger_root"], l.Root())
	}
	for _, a := range out["agents"].([]any) {
		m := a.(map[string]any)
		for _, k := range []string{"agent", "elo", "elo_mle", "elo_ci", "rank"} {
			if _, ok := m[k]; !ok {
				t.Errorf("agent %v lacks %q", m["agent"], k)
			}
		}
		_, hasNS := m["normalized_score"]
		if (m["agent"] == SOTAPlayer) == hasNS {
			t.Errorf("agent %v: normalized_score present = %v", m["agent"], hasNS)
		}
	}
	for i := 1; i < len(l.Agents); i++ {
		if l.Agents[i].Elo > l.Agents[i-1].Elo {
			t.Errorf("agents not sorted by Elo: %v then %v", l.Agents[i-1].Elo, l.Agents[i].Elo)
		}
	}
	// Ranks follow the CI rule.
	for _, a := range l.Agents {
		want := 1
		for _, b := range l.Agents {
			if b.EloCI[0] > a.EloCI[1] {
				want++
			}
		}
		if a.Rank != want {
			t.Errorf("%s rank %d, want %d", a.Agent, a.Rank, want)
		}
		if !(a.EloCI[0] <= a.Elo && a.Elo <= a.EloCI[1]) {
			t.Errorf("%s: median %v outside CI %v", a.Agent, a.Elo, a.EloCI)
		}
	}
	if good.Elo <= bad.Elo {
		t.Errorf("good Elo %v not above bad %v", good.Elo, bad.Elo)
	}
}

// Every run invalid everywhere: all agents tie each other, lose to sota, score 0.
func TestLedgerAllRunsInvalid(t *testing.T) {
	ti := []TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.5}}
	var rs []Result
	for _, a := range []string{"x", "y", "z"} {
		for s := 0; s < 3; s++ {
			rs = append(rs, Result{Task: "T", Agent: a, Seed: s, Status: "FAILED"})
		}
	}
	l := mustLedger(t, rs, ti, Options{BootstrapRounds: 20})
	if l.Agents[0].Agent != SOTAPlayer {
		t.Fatalf("top player %q, want sota", l.Agents[0].Agent)
	}
	x, y := agentByName(l, "x"), agentByName(l, "y")
	if x.EloMLE != y.EloMLE || *x.NormalizedScore != 0 || *x.ValidSubmissionRate != 0 {
		t.Errorf("x %+v y %+v", x, y)
	}
}

// Ratings and floats in the canonical JSON carry at most 9 significant digits.
func TestCanonicalRounding(t *testing.T) {
	rs, ti := smallResults()
	l := mustLedger(t, rs, ti, Options{})
	dec := json.NewDecoder(bytes.NewReader(l.Canonical()))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case json.Number:
			digits := strings.TrimLeft(strings.Split(strings.Split(strings.TrimPrefix(x.String(), "-"), "e")[0], "E")[0], "0.")
			digits = strings.ReplaceAll(digits, ".", "")
			if len(digits) > 9 {
				t.Errorf("%s has more than 9 significant digits", x)
			}
		}
	}
	walk(v)
}

func TestWriteTable(t *testing.T) {
	rs, ti := smallResults()
	l := mustLedger(t, rs, ti, Options{})
	var b bytes.Buffer
	if err := l.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "elo") || !strings.Contains(b.String(), l.Root()) {
		t.Fatalf("table:\n%s", b.String())
	}
	// Rows follow l.Agents (best Elo first).
	for i, a := range l.Agents {
		if !strings.Contains(lines[i+1], " "+a.Agent+" ") {
			t.Errorf("row %d %q, want agent %s", i+1, lines[i+1], a.Agent)
		}
	}
}

// Scores 1e-6 apart tie (equal ratings); 1.2e-6 apart, the better wins every game.
func TestLedgerTiesAtOneMillionth(t *testing.T) {
	ti := []TaskInfo{{Name: "T", Optimum: 1, SOTA: 0.9}}
	mk := func(d float64) *Ledger {
		var rs []Result
		for s := 0; s < 3; s++ {
			rs = append(rs,
				Result{Task: "T", Agent: "x", Seed: s, Status: StatusSuccess, Score: fp(0)},
				Result{Task: "T", Agent: "y", Seed: s, Status: StatusSuccess, Score: fp(d)})
		}
		return mustLedger(t, rs, ti, Options{BootstrapRounds: 10})
	}
	l := mk(1e-6)
	if x, y := agentByName(l, "x"), agentByName(l, "y"); x.EloMLE != y.EloMLE {
		t.Errorf("1e-6 apart: x %v y %v, want a tie", x.EloMLE, y.EloMLE)
	}
	l = mk(1.2e-6)
	if x, y := agentByName(l, "x"), agentByName(l, "y"); !(y.EloMLE > x.EloMLE+100) {
		t.Errorf("1.2e-6 apart: x %v y %v, want y far ahead", x.EloMLE, y.EloMLE)
	}
}

// No results: a ledger with the sota player alone, not a panic.
func TestLedgerEmpty(t *testing.T) {
	l := mustLedger(t, nil, nil, Options{})
	if len(l.Agents) != 1 || l.Agents[0].Agent != SOTAPlayer || l.Agents[0].Elo != 1000 || len(l.Root()) != 64 {
		t.Fatalf("empty ledger: %s", l.Canonical())
	}
}

// The normalized-score bootstrap is stratified by task (upstream: rliable's
// StratifiedBootstrap): each task's runs are redrawn from that task's runs, so an agent
// scoring 0 on every seed of one task and 10 on every seed of another has a mean of exactly
// 5 in every round — a pooled bootstrap would move runs between tasks and widen the CI.
func TestBootstrapMeansStratifiedByTask(t *testing.T) {
	vals := [][]float64{{0, 0, 0, 0, 10, 10, 10, 10}, {1, 3, 7, 7, 7}}
	strata := [][]int{{0, 4}, {0, 2}}
	ci := bootstrapMeans(vals, strata, 200, [32]byte{1})
	if ci[0] != [2]float64{5, 5} {
		t.Errorf("two constant tasks: CI %v, want [5, 5]", ci[0])
	}
	// Agent 2: task A {1, 3} (2 runs), task B {7, 7, 7}: sum is 21 + two draws from {1, 3},
	// so the mean lies in [23/5, 27/5] in every round.
	if lo, hi := ci[1][0], ci[1][1]; lo < 23.0/5 || hi > 27.0/5 || !(lo < hi) {
		t.Errorf("agent 2: CI %v, want within [4.6, 5.4] and not a point", ci[1])
	}
}

// The worst anchor changes the normalized scores, never the Elo: the bootstrap stream does
// not depend on it.
func TestEloIndependentOfWorstAnchor(t *testing.T) {
	rs, ti := synthResults(8, 4, 5, 9)
	pop := mustLedger(t, rs, ti, Options{Worst: "population", BootstrapRounds: 30})
	est := mustLedger(t, rs, ti, Options{Worst: "estimated", BootstrapRounds: 30})
	if pop.Root() == est.Root() {
		t.Fatal("the two anchors give the same ledger")
	}
	for i := range pop.Agents {
		a, b := pop.Agents[i], est.Agents[i]
		if a.Agent != b.Agent || a.Elo != b.Elo || a.EloMLE != b.EloMLE || a.EloCI != b.EloCI || a.Rank != b.Rank {
			t.Errorf("row %d: population %s %v %v %v rank %d, estimated %s %v %v %v rank %d",
				i, a.Agent, a.Elo, a.EloMLE, a.EloCI, a.Rank, b.Agent, b.Elo, b.EloMLE, b.EloCI, b.Rank)
		}
	}
}

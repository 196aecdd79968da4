package protocol

import (
	"crypto/sha512"
	"fmt"
	"math"
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/libp2p/go-libp2p/core/crypto"
)

func TestAuditDrawnEdges(t *testing.T) {
	beta := sha512.Sum512([]byte("x"))
	for _, c := range []struct {
		beta      []byte
		threshold float64
		want      bool
	}{
		{beta[:], 0, false},
		{beta[:], -1, false},
		{beta[:], math.NaN(), false},
		{beta[:], 1, true},
		{beta[:4], 1, false}, // too short to be a VRF output
		{make([]byte, 64), 1e-9, true},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 0.999999, false},
	} {
		if got := AuditDrawn(c.beta, c.threshold); got != c.want {
			t.Errorf("AuditDrawn(%x…, %v) = %v, want %v", c.beta[:min(4, len(c.beta))], c.threshold, got, c.want)
		}
	}
}

// Real VRF outputs of one node over many runs draw it at the threshold's rate.
func TestAuditDrawnRateWithRealVRF(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	const n, threshold = 1000, 0.3
	drawn := 0
	for i := 0; i < n; i++ {
		_, beta, err := attest.AuditDraw(key, attest.Slot{Campaign: "c", Task: "t", Agent: "a", Seed: i}, 1, "lab:runner")
		if err != nil {
			t.Fatal(err)
		}
		if AuditDrawn(beta, threshold) {
			drawn++
		}
	}
	// 300 expected, sd 14.5: ±4 sd.
	if drawn < 242 || drawn > 358 {
		t.Fatalf("drawn %d of %d at threshold %v", drawn, n, threshold)
	}
}

func TestAuditThreshold(t *testing.T) {
	for _, c := range []struct {
		lambda   float64
		auditors int
		want     float64
	}{
		{0.05, 1, 0.05},
		{0.05, 10, 0.005},
		{3, 2, 1},
		{3, 100, 0.03},
		{0.05, 0, 0},
		{0, 5, 0},
	} {
		if got := AuditThreshold(c.lambda, c.auditors); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("AuditThreshold(%v, %d) = %v, want %v", c.lambda, c.auditors, got, c.want)
		}
	}
}

func stats(n int, mean, sd float64) []TaskStats {
	var s []TaskStats
	for i := 0; i < n; i++ {
		s = append(s, TaskStats{Task: fmt.Sprintf("task%02d", i), Mean: mean, SD: sd, Count: 10})
	}
	return s
}

func results(tasks, perTask int, score float64) []TaskScore {
	var r []TaskScore
	for i := 0; i < tasks; i++ {
		for j := 0; j < perTask; j++ {
			r = append(r, TaskScore{Task: fmt.Sprintf("task%02d", i), Score: score})
		}
	}
	return r
}

// The weight is measured on the lab's unaudited results of an agent taken together: one
// small lift weighs nothing, the same lift over 40 results moves the rank and its movers are
// audited before they count.
func TestImpactWeight(t *testing.T) {
	ref := stats(20, 0.5, 0.1)
	inflate := math.Sqrt(1 + 1.0/10) // the others' mean is of 10 results
	inf := math.Inf(1)
	cases := []struct {
		name     string
		pending  []TaskScore
		total    int
		up, down float64
		movers   int
		weight   float64 // 0: don't check
	}{
		{"one result at the others' mean", results(1, 1, 0.5), 400, 0.01, 0.01, 0, 1},
		{"one small lift", results(1, 1, 0.55), 400, 0.01, 0.01, 0, 1},
		{"the same small lift, 40 times", results(20, 2, 0.55), 400, 0.0041, inf, 8, 0},
		{"40 small lifts, a wide margin", results(20, 2, 0.55), 400, 0.05, inf, 0, 1 + (0.5*math.Sqrt(40)/inflate - ImpactFreeZ)},
		{"a large lift on one result", results(1, 1, 1.0), 400, 0.01, 0.01, 0, 1 + 5/inflate - ImpactFreeZ},
		{"lowering a rival", results(20, 2, 0.3), 400, inf, 0.0187, 3, 1 + 2*math.Sqrt(40)/inflate - ImpactFreeZ},
		{"lowering, with no agent below", results(20, 2, 0.3), 400, 0.0001, inf, 0, 0},
		{"a lift hidden behind lowered results", []TaskScore{{"task00", 0.8}, {"task01", 0.8}, {"task02", 0.2}, {"task03", 0.2}}, 200, 0.0014, inf, 2, 0},
		{"no neighbour", results(20, 2, 0.9), 400, inf, inf, 0, MaxImpactWeight},
		{"tasks nobody else ran", []TaskScore{{Task: "other", Score: 1}}, 400, 0.0001, 0.0001, 0, 1},
	}
	for _, c := range cases {
		imp := ImpactWeight(c.pending, ref, c.total, c.up, c.down, 0.05, 0.01)
		if imp.MovesRank != (c.movers > 0) || len(imp.Movers) != c.movers {
			t.Errorf("%s: moves rank %v with %d movers (shift %v), want %d movers", c.name, imp.MovesRank, len(imp.Movers), imp.Shift, c.movers)
		}
		if c.weight != 0 && math.Abs(imp.Weight-c.weight) > 1e-9 {
			t.Errorf("%s: weight %v (z %v), want %v", c.name, imp.Weight, imp.Z, c.weight)
		}
		if c.name == "tasks nobody else ran" && len(imp.Unreferenced) != 1 {
			t.Errorf("%s: unreferenced %v, want [0]", c.name, imp.Unreferenced)
		}
		if math.Abs(imp.Lambda-0.05*imp.Weight) > 1e-12 {
			t.Errorf("%s: lambda %v, want rate × weight", c.name, imp.Lambda)
		}
	}
}

// In a group that moves a rank, the results carrying the move are the ones held for audit:
// two lifted results among 18 ordinary ones are exactly the movers, and only they get
// RankMoveAudits.
func TestImpactMoversAreTheLiftedResults(t *testing.T) {
	ref := stats(20, 0.5, 0.1)
	pending := results(18, 1, 0.5)
	for i := range pending {
		pending[i].Score += float64(i%3-1) * 0.05 // ordinary noise, summing to 0
	}
	pending = append(pending[:7], append([]TaskScore{{"task07", 0.8}}, pending[7:]...)...)
	pending = append(pending, TaskScore{"task19", 0.85})
	imp := ImpactWeight(pending, ref, 200, 0.002, math.Inf(1), 0.05, 0.01)
	if len(imp.Movers) != 2 || pending[imp.Movers[0]].Score != 0.85 || pending[imp.Movers[1]].Score != 0.8 {
		t.Fatalf("movers %v of %v", imp.Movers, pending)
	}
	if imp.LambdaOf(imp.Movers[0]) != RankMoveAudits || imp.LambdaOf(0) != imp.Lambda {
		t.Fatalf("lambda of a mover %v, of another %v", imp.LambdaOf(imp.Movers[0]), imp.LambdaOf(0))
	}
}

func TestStatisticalFlag(t *testing.T) {
	many := func(n int, v float64) []float64 {
		r := make([]float64, n)
		for i := range r {
			r[i] = v
		}
		return r
	}
	cases := []struct {
		name      string
		residuals []float64
		want      bool
	}{
		{"an honest lab at the others' mean", many(100, 0), false},
		{"a lab biased by the allowance", many(100, DefaultAuditBias), false},
		{"a lab biased below by the allowance", many(100, -DefaultAuditBias), false},
		{"a lift of one spread over 100 results", many(100, 1.0), true},
		{"the same lift over 10 results", many(10, 1.0), false},
		{"a lowering of one spread over 100", many(100, -1.0), true},
		{"too few results", many(3, 10), false},
	}
	for _, c := range cases {
		got, tstat := StatisticalFlag(c.residuals, DefaultAuditBias, DefaultAuditZ, 5)
		if got != c.want {
			t.Errorf("%s: flag %v (T = %.2f), want %v", c.name, got, tstat, c.want)
		}
	}
}

func TestResidualsSkipUnknownTasksAndFloorTheSpread(t *testing.T) {
	ref := []TaskStats{{Task: "a", Mean: 0.5, SD: 0.1, Count: 5}, {Task: "b", Mean: 0.2, SD: 0, Count: 5}, {Task: "c", Mean: 0.9, SD: 0.1, Count: 1}}
	got := Residuals([]TaskScore{{"a", 0.7}, {"b", 0.21}, {"c", 0.1}, {"z", 1}}, ref, 0.05)
	want := []float64{0.2 / (0.1 * math.Sqrt(1.2)), 0.01 / (math.Sqrt(0.005) * math.Sqrt(1.2))}
	if len(got) != len(want) || math.Abs(got[0]-want[0]) > 1e-9 || math.Abs(got[1]-want[1]) > 1e-9 {
		t.Fatalf("residuals %v, want %v", got, want)
	}
}

func TestCompareDeterministic(t *testing.T) {
	sub, other := "aa", "bb"
	cases := []struct {
		name string
		gpu  string
		res  attest.AuditResult
		want string
	}{
		{"same GPU, same submission", "H100", attest.AuditResult{Submission: sub, GPUModel: "H100"}, attest.VerdictMatch},
		{"same GPU, another submission", "H100", attest.AuditResult{Submission: other, GPUModel: "H100"}, attest.VerdictMismatch},
		{"another GPU, another submission", "H100", attest.AuditResult{Submission: other, GPUModel: "A100"}, attest.VerdictInconclusive},
		{"no submission from the auditor", "H100", attest.AuditResult{GPUModel: "H100"}, attest.VerdictInconclusive},
	}
	for _, c := range cases {
		if got, reason := CompareDeterministic(sub, c.gpu, c.res); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, reason, c.want)
		}
	}
}

func TestDecideAudits(t *testing.T) {
	m, mm, in := attest.VerdictMatch, attest.VerdictMismatch, attest.VerdictInconclusive
	cases := []struct {
		name     string
		verdicts map[string][]string
		want     AuditOutcome
	}{
		{"none", nil, AuditOpen},
		{"one match", map[string][]string{"lab:a": {m}}, AuditCleared},
		{"one lone mismatch is not proof", map[string][]string{"lab:a": {mm}}, AuditOpen},
		{"two mismatches", map[string][]string{"lab:a": {mm}, "lab:b": {mm}}, AuditProven},
		{"two mismatches against one match", map[string][]string{"lab:a": {mm}, "lab:b": {mm}, "lab:c": {m}}, AuditProven},
		{"a tie", map[string][]string{"lab:a": {mm}, "lab:b": {mm}, "lab:c": {m}, "lab:d": {m}}, AuditOpen},
		{"a lab both ways has no vote", map[string][]string{"lab:a": {mm, m}, "lab:b": {mm}}, AuditOpen},
		{"inconclusive does not vote", map[string][]string{"lab:a": {in}, "lab:b": {in}}, AuditOpen},
	}
	for _, c := range cases {
		if got := DecideAudits(c.verdicts); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

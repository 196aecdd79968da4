package protocol

import (
	"crypto/sha512"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

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
	// The others' mean is of 10 results; the spread, pooled over 20 tasks × 9 degrees of
	// freedom, is taken at its upper bound.
	inflate := math.Sqrt(1+1.0/10) * SpreadUpper(1, 180)
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
		// Pivotal (a rank change 0.0001 above: the group's own noise could make it): its
		// results beyond OutlierZ spreads either way are held, here all 40, 2 spreads low.
		{"lowering, with a rank change just above", results(20, 2, 0.3), 400, 0.0001, inf, 40, 0},
		{"lowering, far from any rank change", results(20, 2, 0.3), 400, 1, inf, 0, 0},
		// Moves the rank by its lifts alone (2 movers), and pivotal: the lowered results
		// are outliers too.
		{"a lift hidden behind lowered results", []TaskScore{{Task: "task00", Score: 0.8}, {Task: "task01", Score: 0.8}, {Task: "task02", Score: 0.2}, {Task: "task03", Score: 0.2}}, 200, 0.0014, inf, 4, 0},
		{"no neighbour", results(20, 2, 0.9), 400, inf, inf, 0, MaxImpactWeight},
		{"tasks nobody else ran", []TaskScore{{Task: "other", Score: 1}}, 400, 0.0001, 0.0001, 0, 1},
	}
	for _, c := range cases {
		imp := ImpactWeight(c.pending, ref, c.total, c.up, c.down, 0.05, 0.01)
		if len(imp.Movers) != c.movers || imp.MovesRank && c.movers == 0 {
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
// two lifted results among 18 ordinary ones are exactly the movers (the ordinary ones lie
// within OutlierZ spreads, so the group being pivotal adds none), and only they get a
// mover's lambda.
func TestImpactMoversAreTheLiftedResults(t *testing.T) {
	ref := stats(20, 0.5, 0.1)
	pending := results(18, 1, 0.5)
	for i := range pending {
		pending[i].Score += float64(i%3-1) * 0.05 // ordinary noise, summing to 0
	}
	pending = append(pending[:7], append([]TaskScore{{Task: "task07", Score: 0.8}}, pending[7:]...)...)
	pending = append(pending, TaskScore{Task: "task19", Score: 0.85})
	imp := ImpactWeight(pending, ref, 200, 0.002, math.Inf(1), 0.05, 0.01)
	if len(imp.Movers) != 2 || pending[imp.Movers[0]].Score != 0.8 || pending[imp.Movers[1]].Score != 0.85 {
		t.Fatalf("movers %v of %v", imp.Movers, pending)
	}
	if imp.LambdaOf(imp.Movers[0]) != max(imp.Lambda, RankMoveAudits) || imp.LambdaOf(0) != imp.Lambda {
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
	got := Residuals([]TaskScore{{Task: "a", Score: 0.7}, {Task: "b", Score: 0.21}, {Task: "c", Score: 0.1}, {Task: "z", Score: 1}}, ref, 0.05)
	// The pooled spread, √0.005 over 8 degrees of freedom, is taken at its upper bound.
	pooled := SpreadUpper(math.Sqrt(0.005), 8)
	want := []float64{0.2 / (pooled * math.Sqrt(1.2)), 0.01 / (pooled * math.Sqrt(1.2))}
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

// The published rank (Chatbot Arena's convention): separated when the intervals do not
// overlap; the margins are how far the agent's mean may move before a separation starts
// or ends, against each other agent.
func TestRankMargins(t *testing.T) {
	a := RankInterval{Mean: 0.50, Half: 0.02}
	inf := math.Inf(1)
	cases := []struct {
		name     string
		others   []RankInterval
		up, down float64
	}{
		{"alone", nil, inf, inf},
		// 0.60−0.03 = 0.57 above a's upper bound 0.52: rising 0.05 ties them.
		{"one separated above", []RankInterval{{Mean: 0.60, Half: 0.03}}, 0.05, inf},
		{"one separated below", []RankInterval{{Mean: 0.40, Half: 0.03}}, inf, 0.05},
		// Tied with 0.51 ± 0.02: rising until 0.48 + x > 0.53 (x = 0.05) separates a above;
		// falling until 0.52 − x < 0.49 (x = 0.03) separates it below.
		{"tied", []RankInterval{{Mean: 0.51, Half: 0.02}}, 0.05, 0.03},
		{"the nearest change counts", []RankInterval{{Mean: 0.60, Half: 0.03}, {Mean: 0.51, Half: 0.02}, {Mean: 0.40, Half: 0.03}}, 0.05, 0.03},
	}
	for _, c := range cases {
		up, down := RankMargins(a, c.others)
		if math.Abs(up-c.up) > 1e-12 && !(math.IsInf(up, 1) && math.IsInf(c.up, 1)) || math.Abs(down-c.down) > 1e-12 && !(math.IsInf(down, 1) && math.IsInf(c.down, 1)) {
			t.Errorf("%s: up %v down %v, want %v %v", c.name, up, down, c.up, c.down)
		}
	}
	if !SeparatedAbove(RankInterval{Mean: 0.6, Half: 0.03}, a) || SeparatedAbove(a, RankInterval{Mean: 0.6, Half: 0.03}) || SeparatedAbove(RankInterval{Mean: 0.51, Half: 0.02}, a) {
		t.Fatal("SeparatedAbove")
	}
}

// A held mover's expected audits double each epoch it waits undrawn, so its threshold
// reaches 1 and it is audited: never left held, never counted unaudited.
func TestMoverLambdaDoubles(t *testing.T) {
	if MoverLambda(0.02, 0) != RankMoveAudits || MoverLambda(0.02, 3) != 8*RankMoveAudits || MoverLambda(2, 1) != 4 {
		t.Fatalf("MoverLambda: %v %v %v", MoverLambda(0.02, 0), MoverLambda(0.02, 3), MoverLambda(2, 1))
	}
	if AuditThreshold(MoverLambda(0.02, 8), 99) != 1 {
		t.Fatal("after 8 epochs every lab of 100 is drawn")
	}
}

// The pair test: an honest re-run clears; a 3σ lift is told from noise only where a
// same-seed re-run correlates with the original; its false-positive rate on honest pairs is
// 1 − Φ(z).
func TestPairCleared(t *testing.T) {
	const sd = 0.1
	if ok, _ := PairCleared(0.5, []float64{0.5}, sd, 0, DefaultAuditBias, DefaultPairZ, 1); !ok {
		t.Fatal("an identical re-run does not clear")
	}
	if ok, _ := PairCleared(0.8, []float64{0.5}, sd, 0, DefaultAuditBias, DefaultPairZ, 1); !ok {
		t.Fatal("ρ = 0: a 3σ difference is within a pair's noise (√2σ) and the bias allowance, and must clear")
	}
	if ok, tt := PairCleared(0.8, []float64{0.5}, sd, 0.9, DefaultAuditBias, DefaultPairZ, 1); ok {
		t.Fatalf("ρ = 0.9: a 3σ lift clears (t = %.2f)", tt)
	}
	if ok, _ := PairCleared(0.2, []float64{0.5}, sd, 0.9, DefaultAuditBias, DefaultPairZ, 1); !ok {
		t.Fatal("a run below its re-run is not a lift")
	}
	if ok, _ := PairCleared(0.2, []float64{0.5}, sd, 0.9, DefaultAuditBias, DefaultPairZ, -1); ok {
		t.Fatal("a lowering, tested downwards, clears")
	}
	if ok, _ := PairCleared(0.5, nil, sd, 0, 0, DefaultPairZ, 1); ok {
		t.Fatal("no re-run clears")
	}
	// Honest pairs, no bias, three re-runs each correlated 0.5: the stated rate, 1 %.
	rng := rand.New(rand.NewPCG(1, 2))
	const n, rho = 40000, 0.5
	fails := 0
	for i := 0; i < n; i++ {
		shared := rng.NormFloat64()
		e := func() float64 { return sd * (math.Sqrt(rho)*shared + math.Sqrt(1-rho)*rng.NormFloat64()) }
		if ok, _ := PairCleared(e(), []float64{e(), e(), e()}, sd, rho, 0, DefaultPairZ, 1); !ok {
			fails++
		}
	}
	// 400 expected, sd 20: ±4 sd.
	if fails < 320 || fails > 480 {
		t.Fatalf("honest pairs not cleared: %d of %d, want about 1 %%", fails, n)
	}
}

// SpreadUpper against the chi-square quantile.
func TestSpreadUpper(t *testing.T) {
	for _, df := range []int{1, 2, 3, 5, 10, 30, 100, 1000} {
		want := math.Sqrt(float64(df) / distuv.ChiSquared{K: float64(df)}.Quantile(0.05))
		got := SpreadUpper(1, df)
		t.Logf("df %d: %.4f, exact %.4f", df, got, want)
		// Wilson–Hilferty: within 4 % from 3 degrees of freedom, 1 % from 10; conservative
		// (above) where it is off.
		if tol := map[bool]float64{true: 0.04, false: 0.01}[df < 10]; df >= 3 && (math.Abs(got/want-1) > tol || got < want*(1-1e-3)) {
			t.Errorf("df %d: %v, want %v", df, got, want)
		}
	}
	if !math.IsInf(SpreadUpper(1, 0), 1) {
		t.Fatal("no degrees of freedom: unbounded")
	}
}

func TestOutliersAndPivotalSpan(t *testing.T) {
	got := Outliers([]float64{0.05, 0.3, -0.3, 0.11, -0.09}, 0.1, 1, OutlierZ)
	if len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Fatalf("outliers above %v", got)
	}
	if got := Outliers([]float64{0.05, 0.3, -0.3, 0.11, -0.09}, 0.1, -1, OutlierZ); len(got) != 1 || got[0] != 2 {
		t.Fatalf("outliers below %v", got)
	}
	// 16 results of spread 0.1 among 400: PivotalZ · 0.1 · 4 / 400.
	if got := PivotalSpan(16, 0.1, 400); math.Abs(got-PivotalZ*0.001) > 1e-15 {
		t.Fatalf("span %v", got)
	}
}

// RankMovers asks the ledger's own question: the largest contributions in the move's
// direction are taken until the ledger says the rest no longer moves the rank.
func TestRankMovers(t *testing.T) {
	contrib := []float64{0.1, -0.4, 0.3, 0.2, 0}
	asked := 0
	got := RankMovers(contrib, 1, func(taken []int) bool {
		asked++
		return len(taken) < 2 // the ledger: two removed and the rank is back
	})
	if len(got) != 2 || got[0] != 2 || got[1] != 3 || asked != 3 {
		t.Fatalf("movers %v after %d questions", got, asked)
	}
	if got := RankMovers(contrib, -1, func([]int) bool { return true }); len(got) != 1 || got[0] != 1 {
		t.Fatalf("downward movers %v: only the results below", got)
	}
}

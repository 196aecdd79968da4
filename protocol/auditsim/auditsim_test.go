package auditsim

import (
	"math"
	"reflect"
	"testing"

	"github.com/evalmesh/evalmesh/protocol"
)

// The same Config gives the same Result.
func TestRunIsDeterministic(t *testing.T) {
	c := Config{Labs: 4, Networks: 30, Deterministic: true, Seed: 7}
	a, b := Run(c), Run(c)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// The rank rules are what catch a rank-changing fabrication of a deterministic agent before
// the published rank moves: movers and a pivotal group's outliers are held and audited
// before they count. 10 labs: 98.5 % in docs/scoring.md's table; without the pivotal
// outliers (movers alone) it was about 88 % and this test fails. Honest labs
// are never flagged (a deterministic audit of an honest run matches).
func TestDeterministicFabricationCaughtBeforeRankMoves(t *testing.T) {
	r := Run(Config{Labs: 10, Networks: 150, Deterministic: true, Seed: 3})
	if r.Caught.Of < 140 {
		t.Fatalf("the fabrication changed the rank in only %d of 150 networks: the neighbour's lead is not set on the honest results", r.Caught.Of)
	}
	if r.Caught.Share < 0.95 {
		t.Fatalf("caught before the rank moved in %d of %d networks", r.Caught.Count, r.Caught.Of)
	}
	if r.HonestFlagged.Count != 0 {
		t.Fatalf("honest labs flagged in %d networks", r.HonestFlagged.Count)
	}
	if r.Cost <= 0 || r.Cost > 1 {
		t.Fatalf("cost %v", r.Cost)
	}
}

// A stochastic agent's held mover counts only if its re-runs clear it (protocol.PairCleared):
// where a same-seed re-run correlates with the original (ρ = 0.9) a 3σ lift does not clear
// and the fabrication is stopped; where it does not (ρ = 0), the lift is inside a pair's
// noise and mostly clears. The gap is the pair test's doing: without it (every pair
// clearing) both would be near 0.
func TestStochasticPairTestNeedsCorrelatedReruns(t *testing.T) {
	corr := Run(Config{Labs: 10, Networks: 100, RerunCorr: 0.9, Seed: 4})
	plain := Run(Config{Labs: 10, Networks: 100, Seed: 4})
	if corr.Caught.Share < 0.85 || plain.Caught.Share > 0.5 {
		t.Fatalf("caught before the rank moved: ρ = 0.9 %d/%d, ρ = 0 %d/%d", corr.Caught.Count, corr.Caught.Of, plain.Caught.Count, plain.Caught.Of)
	}
	for _, r := range []Result{corr, plain} {
		if r.HonestFlagged.Count != 0 {
			t.Fatalf("ρ = %v: honest labs flagged in %d networks", r.RerunCorr, r.HonestFlagged.Count)
		}
	}
}

// The published interval: a mean stratified by task, its half-width z95·√(s²/N) with s² the
// within-task variance pooled over tasks; unbounded until a task has two results.
func TestLedgerOf(t *testing.T) {
	m := newMoments(2)
	for _, s := range []float64{0.4, 0.6} {
		m[target][0].add(s, 1)
	}
	for _, s := range []float64{0.7, 0.9, 0.8} {
		m[target][1].add(s, 1)
	}
	m[neighbour][0].add(0.5, 1)
	l := ledgerOf(m)
	// Within-task sums of squares 0.02 + 0.02 over 1 + 2 degrees of freedom.
	want := z95 * math.Sqrt(0.04/3/5)
	if math.Abs(l[target].Mean-0.68) > 1e-12 || math.Abs(l[target].Half-want) > 1e-12 {
		t.Fatalf("target %+v, want mean 0.68 half %v", l[target], want)
	}
	if !math.IsInf(l[neighbour].Half, 1) || rankRel(l) != 0 {
		t.Fatalf("one result: %+v, rank %d", l[neighbour], rankRel(l))
	}
	m[neighbour][0].add(0.5, 1)
	m[neighbour][1].add(0.2, 1)
	m[neighbour][1].add(0.2, 1)
	if l = ledgerOf(m); rankRel(l) != 1 {
		t.Fatalf("target %+v above neighbour %+v: rank %d", l[target], l[neighbour], rankRel(l))
	}
}

func TestBound(t *testing.T) {
	b := bound(0, 3000)
	if math.Abs(b.Upper-(1-math.Pow(0.05, 1.0/3000))) > 1e-6 {
		t.Fatalf("upper bound of 0/3000 = %v, want 1 − 0.05^(1/3000)", b.Upper)
	}
	b = bound(300, 300)
	if math.Abs(b.Lower-math.Pow(0.05, 1.0/300)) > 1e-6 {
		t.Fatalf("lower bound of 300/300 = %v, want 0.05^(1/300)", b.Lower)
	}
}

func TestCheckNamesTheFlag(t *testing.T) {
	for _, c := range []Config{{Labs: 2}, {Labs: 5, Rate: 2}, {Labs: 5, FabShare: 1.5}, {Labs: 5, RerunCorr: 1}} {
		if err := c.WithDefaults().Check(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// RunSizes runs each size on its own goroutine and gives what Run gives.
func TestRunSizesMatchesRun(t *testing.T) {
	c := Config{Networks: 10, Seed: 2}
	rs := RunSizes(c, []int{3, 4}, []bool{true, false}, 2)
	c.Labs, c.Deterministic = 4, false
	if len(rs) != 4 || !reflect.DeepEqual(rs[3], Run(c)) {
		t.Fatalf("RunSizes[3] = %+v, Run = %+v", rs[3], Run(c))
	}
}

// The default rate is the protocol's.
func TestDefaultsUseTheProtocolRate(t *testing.T) {
	if Defaults.Rate != protocol.DefaultAuditRate || Defaults.PairZ != protocol.DefaultPairZ {
		t.Fatalf("defaults %+v", Defaults)
	}
}

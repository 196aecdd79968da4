package auditsim

import (
	"math"
	"reflect"
	"testing"
)

// The same Config gives the same Result.
func TestRunIsDeterministic(t *testing.T) {
	c := Config{Labs: 4, Networks: 30, Deterministic: true, Seed: 7}
	a, b := Run(c), Run(c)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// Audits are what catch the fabrication: at the default rate a deterministic fabricator is
// caught in most networks and honest labs never are (a deterministic audit of an honest run
// always matches); at a rate near 0, with a lift too small to make its runs movers, it is
// caught less often.
func TestAuditsCatchDeterministicFabrication(t *testing.T) {
	c := Config{Labs: 5, Networks: 120, Deterministic: true, Seed: 3}
	r := Run(c)
	if r.CaughtAny.Share < 0.5 {
		t.Fatalf("caught in %.0f %% of networks at the default rate", 100*r.CaughtAny.Share)
	}
	if r.HonestFlagged.Count != 0 {
		t.Fatalf("honest labs flagged in %d networks", r.HonestFlagged.Count)
	}
	if r.Cost <= 0 || r.Cost > 1 {
		t.Fatalf("cost %v", r.Cost)
	}
	c.Rate = 1e-9
	c.Lift = 1e-6
	c.RankSlack = 1e6
	low := Run(c)
	if low.CaughtAny.Share >= r.CaughtAny.Share {
		t.Fatalf("nearly no audits caught as many (%.2f) as the default rate (%.2f)", low.CaughtAny.Share, r.CaughtAny.Share)
	}
}

// Stochastic honest labs are not flagged by the statistical test over many networks (its
// false-positive rate is 1e-6 per test).
func TestStochasticHonestLabsNotFlagged(t *testing.T) {
	r := Run(Config{Labs: 6, Networks: 100, Seed: 5})
	if r.HonestFlagged.Count != 0 {
		t.Fatalf("honest labs flagged in %d of %d networks", r.HonestFlagged.Count, r.HonestFlagged.Of)
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
	for _, c := range []Config{{Labs: 2}, {Labs: 5, Rate: 2}, {Labs: 5, FabShare: 1.5}} {
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

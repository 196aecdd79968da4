package protocol

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func testLabs(n int) []string {
	var labs []string
	for i := range n {
		labs = append(labs, fmt.Sprintf("lab:%02d", i))
	}
	return labs
}

func TestRescorersDistinctNeverSelfDeterministic(t *testing.T) {
	labs := testLabs(6)
	counts := map[string]int{}
	for i := range 3000 {
		run := fmt.Sprintf("bafyrun%d", i)
		runner := labs[i%len(labs)]
		got := Rescorers(run, runner, labs, 3)
		if len(got) != 3 {
			t.Fatalf("%s: %d re-scorers, want 3", run, len(got))
		}
		if slices.Contains(got, runner) {
			t.Fatalf("%s: runner's lab %s re-scores its own run: %v", run, runner, got)
		}
		if s := slices.Compact(slices.Sorted(slices.Values(got))); len(s) != 3 {
			t.Fatalf("%s: re-scorers not distinct: %v", run, got)
		}
		// The order does not depend on the order of the trust file.
		rev := slices.Clone(labs)
		slices.Reverse(rev)
		if again := Rescorers(run, runner, rev, 3); !slices.Equal(again, got) {
			t.Fatalf("%s: %v with labs reversed, %v before", run, again, got)
		}
		for _, l := range got {
			counts[l]++
		}
	}
	// Load spreads: each lab re-scores about 3000*3/6 = 1500 runs (it is not the runner of
	// a sixth of them, so 3/5 of the rest).
	for _, l := range labs {
		if counts[l] < 1300 || counts[l] > 1700 {
			t.Errorf("lab %s re-scores %d of 3000 runs; want about 1500", l, counts[l])
		}
	}
	// Fewer other labs than replication: all of them; none when the runner is alone.
	if got := Rescorers("r", "lab:00", labs[:3], 5); len(got) != 2 || slices.Contains(got, "lab:00") {
		t.Errorf("3 labs, replication 5: %v", got)
	}
	if got := Rescorers("r", "lab:00", labs[:1], 2); len(got) != 0 {
		t.Errorf("runner alone: %v", got)
	}
	// Duplicate entries count once.
	if got := Rescorers("r", "lab:00", []string{"lab:01", "lab:01", "lab:02"}, 3); len(got) != 2 {
		t.Errorf("duplicates: %v", got)
	}
}

func TestRescorersDueStepsInAfterTimeout(t *testing.T) {
	labs := testLabs(5)
	run, runner := "bafyrun", "lab:00"
	order := RescorerOrder(run, runner, labs)
	if len(order) != 4 {
		t.Fatalf("order %v", order)
	}
	timeout := 10 * time.Minute
	due := func(done map[string]bool, elapsed time.Duration) []string {
		return RescorersDue(run, runner, labs, 2, done, elapsed, timeout)
	}
	if got := due(nil, 0); !slices.Equal(got, order[:2]) {
		t.Fatalf("at 0: %v, want the first two of %v", got, order)
	}
	// The first answers, the second stays silent: after one timeout the third steps in.
	done := map[string]bool{order[0]: true}
	if got := due(done, timeout-time.Second); !slices.Equal(got, order[1:2]) {
		t.Fatalf("before the timeout: %v", got)
	}
	if got := due(done, timeout); !slices.Equal(got, order[1:3]) {
		t.Fatalf("after one timeout: %v, want %v", got, order[1:3])
	}
	// Both silent: after two timeouts the fourth is due too.
	if got := due(done, 2*timeout); !slices.Equal(got, order[1:4]) {
		t.Fatalf("after two timeouts: %v", got)
	}
	// The third answers: replication reached, nobody is due.
	done[order[2]] = true
	if got := due(done, 2*timeout); got == nil || len(got) != 0 {
		t.Fatalf("replication reached: %#v, want empty", got)
	}
	// Nobody answers for a long time: never more than the other labs, never the runner.
	if got := due(nil, 100*timeout); !slices.Equal(got, order) {
		t.Fatalf("all silent: %v", got)
	}
	// A done map naming the runner's own lab does not count towards replication.
	if got := due(map[string]bool{runner: true}, 0); !slices.Equal(got, order[:2]) {
		t.Fatalf("runner in done: %v", got)
	}
}

func TestRendezvousScoreSpreadsSlots(t *testing.T) {
	// Each of 10 nodes is first in rendezvous order for about a tenth of 10,000 slots.
	first := map[string]int{}
	nodes := testLabs(10)
	for s := range 10000 {
		slot := fmt.Sprintf("slot%d", s)
		best, bestScore := "", uint64(0)
		for _, n := range nodes {
			if sc := RendezvousScore(slot, n); best == "" || sc > bestScore {
				best, bestScore = n, sc
			}
		}
		first[best]++
	}
	for _, n := range nodes {
		if first[n] < 850 || first[n] > 1150 {
			t.Errorf("%s first for %d of 10000 slots, want about 1000", n, first[n])
		}
	}
	// Pinned, so that another implementation can check itself against this one.
	// (python3: int.from_bytes(hashlib.sha256(b"slot\x00peer").digest()[:8], "big"))
	if got := RendezvousScore("slot", "peer"); got != 10777893350601957374 {
		t.Fatalf("RendezvousScore(slot, peer) = %d, want 10777893350601957374", got)
	}
	if RendezvousScore("slot", "peer") == RendezvousScore("slotp", "eer") {
		t.Fatal("the separator must keep (slot, peer) pairs apart")
	}
}

package protocol

import (
	"testing"
	"time"
)

// A lost tie is protocol overhead (its unit's time carries over to the next claim); waiting
// for a run to end is not (the unit is free from the run's end).
func TestClaimClockCountsLostTiesNotCapacityWaits(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	freeSince := func(string) time.Time { return t0 } // every slot free since the campaign came
	claim := func(slots ...string) Actions {
		var a Actions
		for _, s := range slots {
			a.Publish = append(a.Publish, ClaimMessage{Kind: ClaimKindClaim, Slot: s})
		}
		return a
	}
	held := func(s ...string) func() []string { return func() []string { return s } }
	var c claimClock
	c.reset(1, t0)
	c.observe(held("a"), claim("a"), freeSince, at(10))  // claims a
	c.observe(held("b"), claim("b"), freeSince, at(200)) // lost a's tie, claims b
	c.observe(held("b"), claim("b"), freeSince, at(250)) // b published again: not a new claim
	c.observe(held("b"), Actions{}, freeSince, at(500))  // b starts
	c.started("b", at(500))
	// b runs for 10 s; its end frees the unit, and c is claimed then and started 300 ms later.
	c.unitFreed(at(10_500))
	c.observe(held("c"), claim("c"), freeSince, at(10_500))
	c.started("c", at(10_800))
	want := []time.Duration{500 * time.Millisecond, 300 * time.Millisecond}
	if len(c.samples) != len(want) || c.samples[0] != want[0] || c.samples[1] != want[1] {
		t.Fatalf("claim→start %v, want %v", c.samples, want)
	}
}

package sim

import (
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// smallConfig draws a small network: fast enough to run a hundred of them in a test.
func smallConfig(t *rapid.T) Config {
	labs := rapid.IntRange(1, 4).Draw(t, "labs")
	c := Config{
		Nodes:        rapid.IntRange(labs, 8).Draw(t, "nodes"),
		Labs:         labs,
		Slots:        rapid.IntRange(1, 60).Draw(t, "slots"),
		Capacity:     rapid.IntRange(1, 3).Draw(t, "capacity"),
		Loss:         rapid.SampledFrom([]float64{0, 0, 0.05, 0.2, 0.5}).Draw(t, "loss"),
		Dup:          rapid.SampledFrom([]float64{0, 0.1}).Draw(t, "dup"),
		Crashes:      0,
		RunMin:       time.Minute,
		RunMax:       time.Duration(rapid.IntRange(1, 30).Draw(t, "runMaxMin")) * time.Minute,
		AgentFail:    rapid.SampledFrom([]float64{0, 0.2}).Draw(t, "agentFail"),
		InfraFail:    rapid.SampledFrom([]float64{0, 0, 0.05}).Draw(t, "infraFail"),
		Hang:         rapid.SampledFrom([]float64{0, 0, 0.02}).Draw(t, "hang"),
		Lease:        time.Duration(rapid.IntRange(1, 10).Draw(t, "leaseMin")) * time.Minute,
		Replication:  max(0, min(2, labs-1)),
		ClaimRecords: rapid.Bool().Draw(t, "claimRecords"),
		Seed:         rapid.Uint64().Draw(t, "seed"),
	}
	c.Crashes = rapid.IntRange(0, min(2, c.Nodes)).Draw(t, "crashes")
	if rapid.Bool().Draw(t, "partition") {
		c.PartitionFrac = rapid.SampledFrom([]float64{0.2, 0.5}).Draw(t, "partitionFrac")
		c.PartitionFor = time.Duration(rapid.IntRange(1, 30).Draw(t, "partitionMin")) * time.Minute
	}
	if labs >= 3 && rapid.Bool().Draw(t, "silent") {
		c.SilentLabs = 1
	}
	if labs >= 2 && rapid.Bool().Draw(t, "sealedTasks") {
		c.Sealed = rapid.SampledFrom([]float64{0.3, 1}).Draw(t, "sealed")
		c.KeylessLabs = rapid.IntRange(1, labs-1).Draw(t, "keylessLabs") // a key holder stays
		c.KeyHolderHeadStart = time.Duration(rapid.IntRange(1, 20).Draw(t, "headStartMin")) * time.Minute
	}
	return c.WithDefaults()
}

// sealedSlots counts the slots of c's campaign whose task is sealed.
func sealedSlots(c Config) int {
	n := 0
	for s := range c.Slots {
		if c.sealed(s) {
			n++
		}
	}
	return n
}

// Nodes without a sealed bundle's key run each of its slots at most once between them
// while that run waits (docs/protocol-claims.md rule 11), when no message is lost and no run
// fails for infrastructure reasons (a failed keyless run waits for nothing, so another may
// follow it; a lost release hides the waiting run).
func TestSimOneKeylessRunPerSealedSlot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := smallConfig(t)
		c.Loss, c.InfraFail, c.Hang, c.Crashes, c.PartitionFrac, c.PartitionFor = 0, 0, 0, 0, 0, 0
		r := Run(c)
		if n := sealedSlots(c); r.KeylessRuns > n {
			t.Fatalf("%d keyless runs of %d sealed slots: %+v", r.KeylessRuns, n, r)
		}
		if r.LostSlots != 0 {
			t.Fatalf("%d slots lost with a key holder up and no failures: %+v", r.LostSlots, r)
		}
	})
	// The case where it matters: one lab of five holds the key to half the tasks, so its
	// nodes are busy while the keyless nodes run out of other work and sit idle beside
	// free sealed slots.
	c := Config{Nodes: 20, Labs: 5, Slots: 400, Sealed: 0.5, KeylessLabs: 4, Seed: 3}.WithDefaults()
	c.Loss, c.Dup, c.InfraFail, c.Hang, c.Crashes, c.PartitionFrac, c.PartitionFor = 0, 0, 0, 0, 0, 0, 0
	r := Run(c)
	if n := sealedSlots(c); r.KeylessRuns > n || r.LostSlots != 0 {
		t.Fatalf("%d keyless runs of %d sealed slots, %d slots lost: %+v", r.KeylessRuns, n, r.LostSlots, r)
	}
}

// Every slot ends finished, except those whose attempts infrastructure failures exhausted
// (none when runs never fail for infrastructure reasons: a crash costs each slot at most
// one attempt, and there are at most 2 of them).
func TestSimEverySlotFinishes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := smallConfig(t)
		r := Run(c)
		if r.Finished+r.FailedSlots != c.Slots || r.LostSlots != c.Slots-r.Finished {
			t.Fatalf("slots %d: finished %d, failed %d, lost %d", c.Slots, r.Finished, r.FailedSlots, r.LostSlots)
		}
		if c.InfraFail == 0 && c.Hang == 0 && r.LostSlots != 0 {
			t.Fatalf("no infra failures or hangs, yet %d slots lost: %+v", r.LostSlots, r)
		}
	})
}

// Found by rapid in TestSimEverySlotFinishes: the key holder node000 runs the one sealed
// slot as attempt 1; its claim and renews never reach keyless node001 (one lost, the rest
// cut off by the partition), but its claim record does. With node000's lease lapsed there,
// node001 claimed attempt 1 again after the head start, its record outranked node000's, so
// the ledger set node000's result aside while node001's run only waited for a key: the slot
// was lost with a key holder up. A claim record raises the attempt a node claims next, as a
// gossip claim does (protocol.ClaimMachine.AttemptClaimed).
func TestSimRecordHeardClaimTakesNextAttempt(t *testing.T) {
	c := Config{Nodes: 3, Labs: 3, Slots: 1, Capacity: 1, Loss: 0.2, RunMin: time.Minute, RunMax: time.Minute,
		Lease: time.Minute, Replication: 2, ClaimRecords: true, Seed: 0, PartitionFrac: 0.2, PartitionFor: time.Minute,
		Sealed: 0.3, KeylessLabs: 2, KeyHolderHeadStart: time.Minute}.WithDefaults()
	r := Run(c)
	if r.Finished != 1 || r.LostSlots != 0 {
		t.Fatalf("the sealed slot was lost with a key holder up: %+v", r)
	}
	if r.KeylessRuns != 1 || r.DuplicateRunsPartitioned != 1 {
		t.Fatalf("want the scenario of the bug (a keyless duplicate run during the partition), got %+v", r)
	}
}

// Found by rapid in TestSimEverySlotFinishes once the test above passed: key holder
// node000 crashes during attempt 1 and comes back cut off from keyless node001; both claim
// attempt 2 and run it, node001's record outranks node000's, and node000's result, out
// first, no longer counts once that record reaches it after the heal, while node001's run
// waits for a key. node000 must take the slot up again (protocol.ClaimMachine.SlotReopened).
func TestSimOutrankedResultReopensSlot(t *testing.T) {
	c := Config{Nodes: 2, Labs: 2, Slots: 1, Capacity: 1, RunMin: time.Minute, RunMax: time.Minute, Lease: time.Minute,
		Replication: 1, ClaimRecords: true, Seed: 0, Crashes: 1, PartitionFrac: 0.5, PartitionFor: 30 * time.Minute,
		Sealed: 0.3, KeylessLabs: 1, KeyHolderHeadStart: time.Minute}.WithDefaults()
	r := Run(c)
	if r.Finished != 1 || r.LostSlots != 0 {
		t.Fatalf("the sealed slot was lost with a key holder up: %+v", r)
	}
	if r.KeylessRuns != 1 || r.Crashes != 1 || r.Runs < 4 {
		t.Fatalf("want the scenario of the bug (a crash, a keyless run, and a run after the reopening), got %+v", r)
	}
}

// No slot is counted twice: the ledger counts one result per slot (the smallest run ID among
// its results), and every result beyond the first comes from a duplicate run. Two results
// of one slot by one lab under one attempt number (equivocation: the ledger would drop both)
// need a duplicate, so they never happen without message loss; with loss the simulator
// reports them (docs/protocol-claims.md, "Attempts"). Each counted run is re-scored by
// enough labs other than its own whenever enough labs answer.
func TestSimNoSlotCountedTwice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := smallConfig(t)
		r := Run(c)
		if r.ExtraResults > r.DuplicateRuns {
			t.Fatalf("%d extra results but only %d duplicate runs", r.ExtraResults, r.DuplicateRuns)
		}
		if r.Equivocations > r.ExtraResults {
			t.Fatalf("%d equivocations but only %d extra results", r.Equivocations, r.ExtraResults)
		}
		if c.Loss == 0 && c.PartitionFor == 0 && r.Equivocations != 0 {
			t.Fatalf("%d equivocations without loss: %+v", r.Equivocations, r)
		}
		if c.Labs-1-c.SilentLabs >= c.Replication && (r.RescoredOK != r.Finished || r.RescoreSelfOrShort != 0) {
			t.Fatalf("re-scored ok %d of %d finished (%d self or short), replication %d, labs %d, silent %d",
				r.RescoredOK, r.Finished, r.RescoreSelfOrShort, c.Replication, c.Labs, c.SilentLabs)
		}
	})
}

// Duplicate runs happen only where messages were lost: with no loss and no partition
// (delays stay under half the settle time), crashes and duplicated messages included, no
// run ever starts while another run of its slot is live or has a result.
func TestSimDuplicatesOnlyWithLoss(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := smallConfig(t)
		c.Loss, c.PartitionFrac, c.PartitionFor = 0, 0, 0
		r := Run(c)
		if r.DuplicateRuns != 0 {
			t.Fatalf("%d duplicate runs without loss: %+v", r.DuplicateRuns, r)
		}
	})
}

// The same seed gives the same result; another seed gives another.
func TestSimDeterministic(t *testing.T) {
	c := Config{Nodes: 6, Labs: 3, Slots: 80, Loss: 0.1, Crashes: 1, PartitionFrac: 0.3, PartitionFor: 10 * time.Minute, Seed: 42}
	a, _ := json.Marshal(Run(c))
	b, _ := json.Marshal(Run(c))
	if string(a) != string(b) {
		t.Fatalf("same seed, different results:\n%s\n%s", a, b)
	}
	c.Seed = 43
	d, _ := json.Marshal(Run(c))
	if string(a) == string(d) {
		t.Fatalf("seeds 42 and 43 gave the same result %s", a)
	}
}

func TestParsePartition(t *testing.T) {
	frac, dur, at, err := ParsePartition("0.3:10m")
	if err != nil || frac != 0.3 || dur != 10*time.Minute || at != 0 {
		t.Fatalf("0.3:10m: %v %v %v %v", frac, dur, at, err)
	}
	if _, _, at, err := ParsePartition("0.5:1h@2h"); err != nil || at != 2*time.Hour {
		t.Fatalf("@2h: %v %v", at, err)
	}
	for _, bad := range []string{"", "0.3", "1.5:10m", "-0.1:1m", "0.3:ten", "0.3:10m@soon", "0.3:-1m", "NaN:1m"} {
		if _, _, _, err := ParsePartition(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParsePartition(f *testing.F) {
	for _, s := range []string{"0.3:10m", "0.5:1h@2h", "0:0s", "1:1m", "0.3:10m@", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		frac, dur, at, err := ParsePartition(s)
		if err == nil && (!(frac >= 0 && frac < 1) || dur < 0 || at < 0) {
			t.Fatalf("%q accepted out of range: %v %v %v", s, frac, dur, at)
		}
	})
}

// A dishonest lab (docs/design.md §9) forges infra releases of every slot and fabricates a
// result of each slot it hears another lab running. Where no message is lost and no run
// fails, it costs the honest nodes nothing: every slot gets an honest result, and no
// honest run is cut short by a fabricated one (only nodes with standing on a slot can).
func TestSimDishonestLabStarvesAndAbortsNothing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := smallConfig(t)
		if c.Labs < 2 {
			c.Labs, c.Nodes = 2, max(c.Nodes, 2)
		}
		c.DishonestLabs = rapid.IntRange(1, c.Labs-1).Draw(t, "dishonestLabs")
		c.Loss, c.InfraFail, c.Hang, c.Crashes, c.PartitionFrac, c.PartitionFor = 0, 0, 0, 0, 0, 0
		c.Sealed, c.KeylessLabs = 0, 0
		r := Run(c)
		if r.LostSlots != 0 || r.AbortedByFabricated != 0 {
			t.Fatalf("%d slots without an honest result, %d honest runs aborted by fabricated results: %+v", r.LostSlots, r.AbortedByFabricated, r)
		}
		if r.ForgedReleases != c.DishonestLabs*c.Slots*c.MaxInfraAttempts {
			t.Fatalf("%d forged releases, want %d", r.ForgedReleases, c.DishonestLabs*c.Slots*c.MaxInfraAttempts)
		}
	})
}

// With claim records (as network create writes) a dishonest lab also signs records of
// attempts other labs' nodes are running, which it never runs: where its draw outranks the
// runner's, the runner gives the attempt up (docs/design.md §9, "Pre-emption"). The attempt
// is the squatter's, not a failure of the runner's lab (protocol.RunGivenUp), so no slot is
// lost however small the retry cap, no honest run is cut short by a fabricated result, and
// every given-up run was given up to a squat or to an honest node that outranked it.
func TestSimSquatsLoseNoSlot(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := smallConfig(t)
		if c.Labs < 2 {
			c.Labs, c.Nodes = 2, max(c.Nodes, 2)
		}
		c.ClaimRecords = true
		c.DishonestLabs = rapid.IntRange(1, c.Labs-1).Draw(t, "dishonestLabs")
		c.MaxInfraAttempts = rapid.IntRange(1, 3).Draw(t, "maxAttempts")
		c.Loss, c.InfraFail, c.Hang, c.Crashes, c.PartitionFrac, c.PartitionFor = 0, 0, 0, 0, 0, 0
		c.Sealed, c.KeylessLabs = 0, 0
		r := Run(c)
		if r.LostSlots != 0 || r.FailedSlots != 0 || r.AbortedByFabricated != 0 {
			t.Fatalf("%d slots without a counted honest result (%d failed), %d honest runs aborted by fabricated results: %+v",
				r.LostSlots, r.FailedSlots, r.AbortedByFabricated, r)
		}
		if r.GivenUpToDishonest > r.SquatClaims {
			t.Fatalf("%d runs given up to %d squat claims", r.GivenUpToDishonest, r.SquatClaims)
		}
	})
}

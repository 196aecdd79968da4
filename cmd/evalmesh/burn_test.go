package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
)

// TestDishonestLabCannotBurnAttempts (docs/design.md §9 "Burning attempts"): lab3 (node 2)
// claims every slot of a campaign whenever it is free, is heard running it (a renew: it
// has standing) and releases it as an infrastructure failure, each message signed by its
// own daemon with its valid key and certificate (the hidden `daemon --test-controls`
// hook), and it goes on claiming after MaxInfraAttempts failures. The honest labs' daemons
// count its failures as one lab's, so no slot fails for the network; they ignore its
// claims once its lab failed a slot MaxInfraAttempts times (rule 6), and say so at WARN;
// they run every slot themselves, and the ledger, the same on all three nodes, counts only
// honest runs of them.
//
// lab3's daemon runs on the docker executor, which cannot run the process agents used
// here (runner.CheckRunnable), so its own claim machine claims nothing: every claim of
// lab3's is the attack's. The honest nodes are kept busy by a slow campaign while lab3
// fails each slot three times, so the order of events is the attack's, not a race.
func TestDishonestLabCannotBurnAttempts(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	c.onDocker(2)
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	tasks := c.addTasks("arithmetic")
	liar, liarLab := c.nodes[2], c.labs.Nodes[2].Lab.ID
	honest := c.nodes[:2]
	specs, err := c.labs.AgentSpecs()
	if err != nil {
		t.Fatal(err)
	}

	// Four gated runs (two per honest node, their capacity) keep the honest nodes busy
	// until lab3's attack is over: they end when the test removes the hold file, not after
	// a time this machine's load could outrun.
	hold := holdFile(t)
	slow := &agentspec.Spec{Name: "gated", Version: "1.0.0", Command: []string{"/bin/sh", "-c", "while [ -e " + hold + " ]; do sleep 0.1; done"}}
	busySlots, busyID := c.campaignOf(1, "busy", tasks, []*agentspec.Spec{slow}, 4)
	// status is d's view of campaign id; ok is false when the daemon did not answer in time
	// (this machine's load), which is no evidence either way.
	status := func(d *daemonProc, id string) (st protocol.CampaignStatus, ok bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		rep, err := d.client.CampaignStatus(ctx, id)
		if err != nil || rep == nil {
			return protocol.CampaignStatus{}, false
		}
		return rep.Status, true
	}
	var seen [2]protocol.CampaignStatus
	defer func() {
		if t.Failed() {
			t.Logf("last statuses of the busy campaign: %s %+v, %s %+v", honest[0].lab.Name, seen[0], honest[1].lab.Name, seen[1])
		}
	}()
	testutil.WaitFor(t, 120*time.Second, "the honest nodes running every gated slot", func() bool {
		for i, d := range honest {
			if st, ok := status(d, busyID); ok {
				seen[i] = st
			}
		}
		// Each node counts every run it hears of, its own and the other's.
		return seen[0].Running == busySlots && seen[1].Running == busySlots
	})

	constant := specs["constant"]
	n, id := c.campaignOf(1, "burned", tasks, []*agentspec.Spec{constant}, 3)
	var slots []string
	for seed := 0; seed < n; seed++ {
		slots = append(slots, protocol.SlotID(attest.Slot{Campaign: id, Task: tasks[0], Agent: constant.CID(), Seed: seed}))
	}
	testutil.WaitFor(t, 60*time.Second, "the burned campaign prepared on the honest nodes", func() bool {
		for _, d := range honest {
			if st, err := d.client.CampaignStatus(context.Background(), id); err != nil || !st.Ready {
				return false
			}
		}
		return true
	})
	// The claims and renews of attempts 1 to MaxInfraAttempts are sent once each with a
	// ten-minute lease: each attempt ends by its release, never by a lapse that a slow
	// status call here would let come first. The fourth claim below is on the daemons' own
	// lease, renewed every second, as a node running it would be.
	longLease, lease := (10 * time.Minute).Milliseconds(), (3 * time.Second).Milliseconds()
	send := func(kind string, attempt int, lease int64) {
		t.Helper()
		for _, s := range slots {
			msg := protocol.ClaimMessage{Kind: kind, Campaign: id, Slot: s, Lamport: uint64(attempt), Attempt: attempt, LeaseMS: lease}
			if kind == protocol.ClaimKindRelease {
				msg.Reason = protocol.ReleaseInfra
			}
			if err := liar.client.TestClaim(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	// each waits until both honest nodes see every slot of the campaign in state want.
	each := func(what string, want func(protocol.CampaignStatus) int) {
		t.Helper()
		testutil.WaitFor(t, 30*time.Second, what+" on both honest nodes", func() bool {
			for _, d := range honest {
				st, ok := status(d, id)
				busy, busyOK := status(d, busyID)
				if !ok || !busyOK {
					return false
				}
				if st.Failed > 0 {
					t.Fatalf("%s: %d slots failed for the network after lab3's failures alone", d.lab.Name, st.Failed)
				}
				if busy.Running == 0 {
					t.Fatalf("%s finished its gated runs before lab3's attack was over", d.lab.Name)
				}
				if want(st) != n {
					return false
				}
			}
			return true
		})
	}
	for attempt := 1; attempt <= protocol.DefaultMaxInfraAttempts; attempt++ {
		send(protocol.ClaimKindClaim, attempt, longLease)
		each(fmt.Sprintf("lab3's claim of attempt %d", attempt), func(st protocol.CampaignStatus) int { return st.Claimed })
		send(protocol.ClaimKindRenew, attempt, longLease)
		each(fmt.Sprintf("lab3 running attempt %d", attempt), func(st protocol.CampaignStatus) int { return st.Running })
		send(protocol.ClaimKindRelease, attempt, 0)
		each(fmt.Sprintf("lab3's infrastructure failure of attempt %d", attempt), func(st protocol.CampaignStatus) int { return st.Unclaimed })
	}
	t.Logf("lab3 failed each of %d slots %d times; it claims them again and renews every second", n, protocol.DefaultMaxInfraAttempts)

	// lab3 claims every slot a fourth time and keeps renewing it, as a node running it would.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	next := protocol.DefaultMaxInfraAttempts + 1
	send(protocol.ClaimKindClaim, next, lease)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, s := range slots {
				msg := protocol.ClaimMessage{Kind: protocol.ClaimKindRenew, Campaign: id, Slot: s, Lamport: uint64(next), Attempt: next, LeaseMS: lease}
				if liar.client.TestClaim(ctx, msg) != nil {
					return
				}
			}
		}
	}()

	// The attack is over: the gated runs end, and the honest nodes then run every burned
	// slot themselves; none is ever failed.
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 180*time.Second, "every slot of both campaigns done on the honest nodes", func() bool {
		done := true
		for _, d := range honest {
			for _, cid := range []string{busyID, id} {
				st, _ := status(d, cid)
				if st.Failed > 0 {
					t.Fatalf("%s: %d slots of %s failed for the network after lab3's failures alone", d.lab.Name, st.Failed, cid)
				}
				done = done && st.Slots > 0 && st.Done == st.Slots
			}
		}
		return done
	})
	stop()

	// The ledger, the same on all three nodes, counts one run of each burned slot, each by
	// an honest lab, at an attempt above lab3's last claim.
	views := c.settle("every node counting every slot of both campaigns", 90*time.Second, func(v ledgerView) bool {
		k := 0
		for _, r := range v.counted {
			if r.campaign == id || r.campaign == busyID {
				k++
			}
		}
		return k == n+busySlots
	})
	for i, v := range views {
		for _, r := range v.all {
			if r.campaign != id {
				continue
			}
			if r.lab == liarLab {
				t.Errorf("%s: lab3 has a run of burned slot seed %d (attempt %d): it got a slot it had failed %d times", c.nodes[i].lab.Name, r.seed, r.attempt, protocol.DefaultMaxInfraAttempts)
			}
			if r.attempt <= next {
				t.Errorf("%s: the honest run of seed %d signs attempt %d, not one above lab3's claims (%d)", c.nodes[i].lab.Name, r.seed, r.attempt, next)
			}
		}
	}
	// The evidence: each honest node names, at WARN, every slot whose claims by lab3 it
	// ignored and why.
	for _, d := range honest {
		log := fullLog(t, d.log)
		for _, s := range slots {
			if !strings.Contains(log, "ignored from "+liar.peerID+" on slot "+s+": claim of attempt 4 by lab "+liarLab+", which failed the slot 3 times") {
				t.Errorf("%s's log does not name lab3's fourth claim of %s as ignored:\n%s", d.lab.Name, s, readLog(d.log))
			}
		}
	}
	t.Logf("%d burned slots: 0 failed, each run once by an honest lab at attempt %d or above; root %.12s on all three nodes", n, next+1, views[0].root)
}

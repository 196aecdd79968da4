package main

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// runningSlots lists the slots of campaign node d reports running on itself.
func (d *daemonProc) runningSlots(campaign string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := d.client.CampaignStatus(ctx, campaign)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range rep.Slots {
		if s.State == "running" {
			out = append(out, s.ID)
		}
	}
	return out
}

// Issue 45 point 4: a node killed with SIGKILL mid-run, for good, holds its slots only
// until the others take it for dead (--dead-after: 15 s here, for a short test; the default
// is 2 min), not for its lease (the default 10 minutes, kept here). Its slot is run again
// by another node well before the lease could have lapsed, and every slot is counted once.
func TestFaultDeadHolderSlotsMoveOn(t *testing.T) {
	skipShortFaults(t)
	saved := faultDaemonArgs
	faultDaemonArgs = []string{"--dead-after", "15s", "--heartbeat", "2s", "--rescore-timeout", "3s", "--redial-max", "2s", "--test-controls"}
	t.Cleanup(func() { faultDaemonArgs = saved })
	c, tasks := runningCluster(t, "arithmetic")
	// Runs of 25 s (they leave no submission: an agent failure, a result that finishes the
	// slot), 3 slots on 3 nodes of 2 units each: every slot starts at once.
	slow := &agentspec.Spec{Name: "slow", Version: "1.0.0", Command: []string{"/bin/sleep", "25"}}
	slots, id := c.campaignOf(1, "dead holder", tasks, []*agentspec.Spec{slow}, 3)
	var victim *daemonProc
	var held []string
	testutil.WaitFor(t, 60*time.Second, "a node other than the campaign's publisher running a slot", func() bool {
		for _, i := range []int{0, 2} {
			if held = c.nodes[i].runningSlots(id); len(held) > 0 {
				victim = c.nodes[i]
				return true
			}
		}
		return false
	})
	victim.signal(syscall.SIGKILL)
	<-victim.exited
	killed := time.Now()
	var survivors []*daemonProc
	for _, d := range c.nodes {
		if d != victim {
			survivors = append(survivors, d)
		}
	}
	var taker string
	testutil.WaitFor(t, 90*time.Second, "a survivor running the dead node's slot", func() bool {
		for _, d := range survivors {
			if slices.Contains(d.runningSlots(id), held[0]) {
				taker = d.lab.Name
				return true
			}
		}
		return false
	})
	took := time.Since(killed)
	if took > 2*time.Minute {
		t.Fatalf("the slot moved on %s after the kill, not within dead-after (15 s) plus a few checks", took)
	}
	// Every slot done on the survivors (the retaken one after its 25 s run), long before a
	// 10-minute lease would have freed it.
	testutil.WaitFor(t, 120*time.Second, "every slot done on both survivors", func() bool {
		for _, d := range survivors {
			if v, err := d.view(id); err != nil || v.done != slots {
				return false
			}
		}
		return true
	})
	t.Logf("%s killed holding %v; %s ran %s again %s after the kill (lease 10m, dead-after 15s); all %d slots done %s after the kill",
		victim.lab.Name, held, taker, held[0], took.Round(time.Second), slots, time.Since(killed).Round(time.Second))
}

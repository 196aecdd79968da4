package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// runsBy counts the runs of campaign that peer signed, as node d reports them.
func (d *daemonProc) runsBy(campaign, peer string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := d.client.CampaignStatus(ctx, campaign)
	if err != nil {
		return -1
	}
	n := 0
	for _, s := range rep.Slots {
		for _, r := range s.Runs {
			if r.PeerID == peer {
				n++
			}
		}
	}
	return n
}

// Issue 45 point 3: a node whose certificate expires within a slot's hard limit (the task's
// wall clock, 120 s, plus 5 min of grace) plus the 10-minute margin claims none of its
// slots, so it fails none of them; a renewed certificate written over the file is taken
// without a restart (logged), and the node claims again.
func TestFaultCertificateRenewedWithoutRestart(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	short := c.labs.Nodes[2]
	cert, err := short.Lab.Certify(short.PeerID, time.Now().Add(-time.Minute), 13*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short.Home.CertPath(), cert.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	tasks := c.addTasks("arithmetic")
	slow := &agentspec.Spec{Name: "slow", Version: "1.0.0", Command: []string{"/bin/sleep", "2"}}
	slots, first := c.campaignOf(1, "before renewal", tasks, []*agentspec.Spec{slow}, 8)
	c.waitAllDone(c.nodes[:2], first, slots)
	if n := c.nodes[0].runsBy(first, short.PeerID); n != 0 {
		t.Fatalf("the node whose certificate ends in 12 minutes ran %d slots, want none", n)
	}
	if c.nodes[2].logHas("failed (infrastructure)") {
		t.Fatalf("the short-certificate node claimed and failed a run:\n%s", readLog(c.nodes[2].log))
	}
	renewed, err := short.Lab.Certify(short.PeerID, time.Now().Add(-time.Minute), 90*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short.Home.CertPath(), renewed.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the daemon to log the renewed certificate", func() bool {
		return c.nodes[2].logHas("node certificate renewed")
	})
	slots, second := c.campaignOf(1, "after renewal", tasks, []*agentspec.Spec{slow}, 8)
	testutil.WaitFor(t, 120*time.Second, "the renewed node to run a slot", func() bool {
		return c.nodes[0].runsBy(second, short.PeerID) > 0
	})
	c.waitAllDone(c.nodes[:2], second, slots)
	for _, line := range strings.Split(readLog(c.nodes[2].log), "\n") {
		if strings.Contains(line, "certificate renewed") {
			t.Log(line)
		}
	}
}

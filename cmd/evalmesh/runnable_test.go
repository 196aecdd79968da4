package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// Issue 45 point 3: a node left on init's default executor (docker) among labs running the
// demo's process agents (no image) cannot run any of them. It must not claim their slots
// (runner.CheckRunnable before the claim machine), so no slot is failed on the network and
// every slot is run by the nodes that can, each counted once.
func TestFaultMisconfiguredNodeBurnsNoAttempts(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	broken := c.labs.Nodes[2]
	h := home.Home{Dir: broken.Home.Dir}
	cfg, err := os.ReadFile(h.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "executor: process") {
		t.Fatalf("demo config has no process executor line:\n%s", cfg)
	}
	if err := os.WriteFile(h.ConfigPath(), []byte(strings.Replace(string(cfg), "executor: process", "executor: docker", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	tasks := c.addTasks("arithmetic", "sentiment")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 2)
	// The docker node hands none of these slots to its claim machine, so its campaign
	// status counts none done; its ledger must still count every run, on the same root.
	c.waitAllDone(c.nodes[:2], id, slots)
	var v view
	testutil.WaitFor(t, 120*time.Second, "the same root, every slot counted, on all three nodes", func() bool {
		var vs []view
		for _, d := range c.nodes {
			w, err := d.view("")
			if err != nil || w.counted != slots {
				return false
			}
			vs = append(vs, w)
		}
		v = vs[0]
		return vs[1].root == v.root && vs[2].root == v.root
	})
	for _, d := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := d.client.CampaignStatus(ctx, id)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.Failed != 0 {
			t.Errorf("%s counts %d slots failed, want 0", d.lab.Name, st.Status.Failed)
		}
	}
	if !c.nodes[2].logHas("not claiming agent") {
		t.Errorf("the docker node never said it leaves the process agents to others:\n%s", readLog(c.nodes[2].log))
	}
	if c.nodes[2].logHas("failed (infrastructure)") {
		t.Errorf("the docker node claimed and failed a run it cannot run:\n%s", readLog(c.nodes[2].log))
	}
	t.Logf("%d slots run by the two process nodes, none failed; the docker node claimed none: root %.12s", v.counted, v.root)
}

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node"
)

// pin status on real daemons: a task bundle every lab fetched is held by all three; a
// submission by the lab that ran it and the lab that re-scored it (the factor, 2, met); a
// folder added on one node only by one lab (not met), and the labs that must fetch it are
// the first two in rendezvous order.
func TestPinStatusSaysWhichLabsHoldAnObject(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents[:1], 1)
	c.converged(id, slots, 120*time.Second)
	ctx := context.Background()
	sub := ""
	envs, err := c.nodes[0].client.StoredEnvelopes(ctx, node.SetAttestations)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range envs {
		e, _ := attest.DecodeEnvelope(env)
		if st, run, _, err := attest.DecodeStatement(e.Payload); err == nil && run != nil {
			for _, s := range st.Subject {
				if role, _ := s.Annotations[attest.AnnotationRole].(string); role == attest.RoleSubmission {
					sub, _ = s.Annotations[attest.AnnotationCID].(string)
				}
			}
		}
	}
	bundle, err := cid.Decode(tasks[0])
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.nodes[2].client.PinStatus(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Met || len(rep.Holding) != 3 || rep.Factor != 2 {
		t.Errorf("bundle %s: held by %v, factor %d, met %v: want all 3 labs, factor 2, met", bundle, rep.Holding, rep.Factor, rep.Met)
	}
	sc, err := cid.Decode(sub)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = c.nodes[0].client.PinStatus(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Met || len(rep.Holding) < 2 {
		t.Errorf("submission %s: held by %v, met %v: want the runner's lab and the re-scorer's", sub, rep.Holding, rep.Met)
	}
	dir := filepath.Join(t.TempDir(), "lonely")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "data.bin"), []byte("held by lab1 alone"), 0o644)
	lonely, err := c.nodes[0].client.Add(ctx, dir, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = c.nodes[1].client.PinStatus(ctx, lonely)
	if err != nil {
		t.Fatal(err)
	}
	lab1 := c.labs.Nodes[0].Lab.ID
	if rep.Met || !slices.Equal(rep.Holding, []string{lab1}) || len(rep.Assigned) != 2 || len(rep.Labs) != 3 {
		t.Errorf("lonely %s: holding %v assigned %v met %v: want lab1 alone, two assigned, not met", lonely, rep.Holding, rep.Assigned, rep.Met)
	}
	for _, l := range rep.Fetch {
		if l == lab1 {
			t.Errorf("lab1, which holds %s, is told to fetch it", lonely)
		}
	}
}

// waitFactorRestored waits until a repair round that began after since, on each of nodes,
// finds every one of the ledger's objects held by the pin factor's number of the labs
// present, and returns the last survey of the first node.
func (c *cluster) waitFactorRestored(nodes []*daemonProc, since time.Time, objects int, what string) *node.PinSurvey {
	c.t.Helper()
	var last *node.PinSurvey
	testutil.WaitFor(c.t, 120*time.Second, what, func() bool {
		for i, d := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			sv, err := d.client.PinSurvey(ctx)
			cancel()
			if err != nil || !sv.At.After(since) || sv.UnderFactor != 0 || sv.Objects < objects {
				return false
			}
			if i == 0 {
				last = sv
			}
		}
		return true
	})
	return last
}

// The test (issue 46): after a campaign, every object the ledger rests on is held
// by two labs (the pin factor); one holder stops for good and the next lab in rendezvous
// order fetches what it held; once the factor is restored, the second original holder stops
// too; verify-ledger from a fresh home, with only the last lab's node to ask, still
// re-scores every counted run and recomputes the same root.
func TestPinRepairKeepsTheLedgerVerifiable(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 1)
	v := c.converged(id, slots, 120*time.Second)
	start := time.Now()
	sv := c.waitFactorRestored(c.nodes, start, 1+2*slots, "every ledger object held by 2 labs")
	t.Logf("%d ledger objects, each held by %d labs (%.1f s after the campaign converged)", sv.Objects, sv.Factor, time.Since(start).Seconds())

	for _, gone := range []int{0, 1} {
		c.nodes[gone].kill()
		killed := time.Now()
		left := c.nodes[gone+1:]
		if len(left) < 2 {
			break // one lab left: the factor cannot be met any more, nothing to wait for
		}
		c.waitFactorRestored(left, killed, sv.Objects, fmt.Sprintf("factor restored after %s stopped", c.nodes[gone].lab.Name))
		t.Logf("%s stopped: factor restored in %.1f s", c.nodes[gone].lab.Name, time.Since(killed).Seconds())
	}
	rep, code := c.verifyLedgerCLI(c.nodes[2])
	if code != 0 || !rep.OK {
		t.Fatalf("verify-ledger against the last lab: exit %d, ok %v, not re-scored %+v, missing %+v", code, rep.OK, rep.NotRescored, rep.MissingBundles)
	}
	if rep.LedgerRoot != v.root || rep.Rescored != slots || rep.Confirmed != slots {
		t.Errorf("recomputed root %.12s (the campaign's %.12s), re-scored %d, confirmed %d of %d", rep.LedgerRoot, v.root, rep.Rescored, rep.Confirmed, slots)
	}
}

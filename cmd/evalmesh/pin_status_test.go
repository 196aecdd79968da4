package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/attest"
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

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/protocol"
)

// startSealed seals the example task arithmetic with seal (a demo.Labs method), its key
// going to labs (indexes), starts the daemons of the cluster's three labs, connects them and
// adds the sealed bundle on lab1; it returns the bundle's CID.
func (c *cluster) startSealed(seal func(ctx context.Context, src, out string, labs []int) (string, error), labs []int) string {
	c.t.Helper()
	gen := filepath.Join(c.labs.Dir, "examples", "tasks")
	if _, err := exampletasks.Generate(gen); err != nil {
		c.t.Fatal(err)
	}
	sealed := filepath.Join(c.labs.Dir, "arithmetic.sealed")
	bundle, err := seal(context.Background(), filepath.Join(gen, "arithmetic"), sealed, labs)
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	if got, err := c.nodes[0].client.Add(context.Background(), sealed, false, nil); err != nil || got.String() != bundle {
		c.t.Fatalf("add the sealed bundle on lab1: %v %v (want %s)", got, err, bundle)
	}
	return bundle
}

// TestRunnersWithoutLabels (docs/design.md §9 "Fabricated runs"): three real daemons under
// a document that seals arithmetic with ledger.scorers naming lab1 and lab2, claim records
// required. lab1 sealed the bundle and granted its key to lab2 only; lab3 holds no key.
// Every slot is run by lab3 alone and signed without a score; lab1 and lab2 re-score each
// submission against their labels and the ledger counts each run with their verdict (the
// solver, which answers every question, ranks first) on every node, with one root.
// Meanwhile lab2, a key holder, tries to run the slots itself: from its own node it
// hand-signs a claim record and a perfect run of every slot as soon as it can cite a
// witness. The honest nodes neither yield to its claim records nor finish a slot with its
// runs: every slot is still run by lab3, no honest run is given up or excluded, and
// lab2's runs are excluded as a scoring lab's on every node.
func TestRunnersWithoutLabels(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	c.labs.Doc.Ledger.Claims = protocol.ClaimsRequired
	bundle := c.startSealed(c.labs.SealScoredBy, []int{0, 1})
	holder, runnerLab := c.labs.Nodes[1].Lab.ID, c.labs.Nodes[2].Lab.ID
	specs, err := c.labs.AgentSpecs()
	if err != nil {
		t.Fatal(err)
	}
	const seeds = 3
	agents := []string{"constant", "solver"}
	id, slots := c.publish(c.nodes[1], []string{bundle}, agents, seeds)

	// lab2 (a key holder, the campaign's own lab) claims and "runs" every slot by hand.
	key, cert := c.nodeKey(1)
	w := c.witnessOf(c.nodes[1], id, holder)
	dir := t.TempDir()
	var forged []string
	for _, a := range agents {
		for seed := 0; seed < seeds; seed++ {
			slot := attest.Slot{Campaign: id, Task: bundle, Agent: specs[a].CID(), Seed: seed}
			env, cid, err := attest.NewClaimRecord(key, cert, slot, 1, w, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, cid+".json"), env, 0o644); err != nil {
				t.Fatal(err)
			}
			forged = append(forged, c.signRun(1, key, cert, slot, 1, fmt.Sprint("labels", a, seed), 1, w, dir))
		}
	}
	c.importInto(c.nodes[1], dir)

	// Only lab3 claims the slots: the scoring labs' claim machines never hold them.
	c.waitAllDone(c.nodes[2:], id, slots)
	views := c.settle("every slot counted from lab3's unscored runs, lab2's excluded", 180*time.Second, func(v ledgerView) bool {
		for _, f := range forged {
			if v.excluded[f] != attest.ExcludeScorerRan {
				return false
			}
		}
		n := 0
		for _, r := range v.counted {
			if r.campaign == id {
				n++
			}
		}
		return n == slots
	})
	for i, v := range views {
		name := c.nodes[i].lab.Name
		for rid, r := range v.all {
			if r.campaign != id || r.lab == holder {
				continue
			}
			if r.lab != runnerLab {
				t.Errorf("%s: run %s by %s, a scoring lab: only lab3 may run the sealed task", name, rid, r.lab)
			}
			if _, ok := v.counted[rid]; !ok {
				t.Errorf("%s: lab3's run %s does not count: %s", name, rid, v.excluded[rid])
			}
			if r.valid || r.score != nil {
				t.Errorf("%s: lab3's run %s carries a score of its own (valid %v)", name, rid, r.valid)
			}
		}
		if len(v.agents) == 0 || v.agents[0] != "solver" {
			t.Errorf("%s: leaderboard %v: the solver, scored 1 by the scoring labs, must rank first", name, v.agents)
		}
		if len(v.misconduct) != 0 {
			t.Errorf("%s: misconduct %+v", name, v.misconduct)
		}
	}
	if log := fullLog(t, c.nodes[2].log); strings.Contains(log, "giving the attempt up") || strings.Contains(log, "aborted run of slot") {
		t.Errorf("lab3 yielded to a scoring lab's claim record:\n%s", log)
	}
	t.Logf("runners without labels: %d slots run by lab3 and counted with lab1's and lab2's verdicts, %d forged runs of lab2 excluded as %q, root %.12s on every node",
		slots, len(forged), attest.ExcludeScorerRan, views[0].root)
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/vstore"
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
	envs, err := c.nodes[0].client.StoredEnvelopes(ctx, vstore.SetAttestations)
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

// docs/design.md §9 "Keyless holders of a sealed bundle", on real daemons: lab1 seals
// arithmetic and grants its key to lab1 and lab2 only. lab3, which holds no grant, fetches
// and pins the ciphertext and announces it in its holdings answers like any holder. The
// campaign naming the bundle asks for more GPUs than any node offers, so nothing runs; each
// daemon fetches the bundle when it learns of the campaign. Then lab2 loses its copy (its
// daemon stops, its block store is wiped, it restarts with the unpacked bundle it had, so
// nothing but repair fetches it again). Counted, lab3 and lab1 would meet the pin factor (2)
// and only one lab able to score from the bundle would keep it; the honest nodes must not
// count lab3: lab2's repair round fetches and pins the bundle again as a ledger object, and
// `pin status --json` on lab1 and lab2 says the factor is met by lab1 and lab2, the key
// labs, with lab3 holding it and not counting; every node reports one ledger root, the
// one it reported before.
func TestPinFactorCountsOnlyKeyHoldersOfASealedBundle(t *testing.T) {
	skipShortFaults(t)
	ctx := context.Background()
	c := newCluster(t, 3)
	bundle := c.startSealed(c.labs.SealGrantedTo, []int{0, 1})
	bc, err := cid.Decode(bundle)
	if err != nil {
		t.Fatal(err)
	}
	// lab3 hoards the ciphertext it cannot open.
	if err := c.nodes[2].client.Pin(ctx, bc, "hoard", nil); err != nil {
		t.Fatalf("lab3 pins the sealed bundle: %v", err)
	}
	c.publishUnrunnable("sealed pins", bundle)
	lab1, lab2, lab3 := c.labs.Nodes[0].Lab.ID, c.labs.Nodes[1].Lab.ID, c.labs.Nodes[2].Lab.ID
	keyLabs := slices.Sorted(slices.Values([]string{lab1, lab2}))
	status := func(d *daemonProc) node.PinStatusReport { return pinStatusCLI(t, d, bundle) }
	testutil.WaitFor(t, 120*time.Second, "every lab holding the bundle, with lab2 knowing its key labs", func() bool {
		rep := status(c.nodes[1])
		return len(rep.Holding) == 2 && len(rep.KeyLabs) == 2 && slices.ContainsFunc(rep.Labs, func(l node.LabHolding) bool { return l.Lab == lab3 && l.Holds })
	})
	before := c.settle("one ledger root with the campaign", 60*time.Second, func(v ledgerView) bool { return v.envelopes > 0 })

	// lab2 loses its copy: a wiped block store, the unpacked bundle kept.
	c.nodes[1].kill()
	if err := os.RemoveAll(c.labs.Nodes[1].Home.PackBlocksDir()); err != nil {
		t.Fatal(err)
	}
	c.start(1)
	c.connect(c.nodes[1], c.nodes[0])
	c.connect(c.nodes[1], c.nodes[2])
	testutil.WaitFor(t, 120*time.Second, "lab2's repair round to fetch and pin the sealed bundle again", func() bool {
		pins, err := c.nodes[1].client.Pins(ctx)
		return err == nil && slices.ContainsFunc(pins, func(p node.PinInfo) bool { return p.CID == bundle && p.Name == "ledger bundle" })
	})
	// The round logs what it fetched once its pins are written.
	testutil.WaitFor(t, 20*time.Second, "lab2's log to say its repair round fetched the bundle", func() bool {
		return c.nodes[1].logHas("fetched and pinned 1")
	})
	for _, d := range c.nodes[:2] {
		rep := status(d)
		if !rep.Met || rep.Factor != 2 || !slices.Equal(slices.Sorted(slices.Values(rep.Holding)), keyLabs) || !slices.Equal(rep.KeyLabs, keyLabs) {
			t.Errorf("%s: pin status met %v factor %d holding %v key labs %v; want met, factor 2, held by and keyed to %v", d.lab.Name, rep.Met, rep.Factor, rep.Holding, rep.KeyLabs, keyLabs)
		}
		for _, l := range rep.Labs {
			if !l.Holds || l.Counts != (l.Lab != lab3) {
				t.Errorf("%s: pin status of %s: holds %v counts %v; want it held, counting only for a key lab", d.lab.Name, l.Name, l.Holds, l.Counts)
			}
		}
	}
	after := c.settle("one ledger root on every node", 60*time.Second, func(ledgerView) bool { return true })
	if after[0].root != before[0].root {
		t.Errorf("ledger root moved from %.12s to %.12s: holdings must not enter it", before[0].root, after[0].root)
	}
	t.Logf("sealed bundle %.16s: lab3's copy not counted; lab2 repaired its lost copy; root %.12s on every node", bundle, after[0].root)
}

// publishUnrunnable publishes from lab1 a campaign of bundle whose one agent asks for more
// GPUs than any node offers: nothing runs, every daemon fetches the bundle when it learns of
// the campaign, and the bundle is the campaign's one ledger object.
func (c *cluster) publishUnrunnable(title, bundle string) {
	c.t.Helper()
	unrunnable := &agentspec.Spec{Name: "needs-64-gpus", Version: "1", Image: "sha256:" + strings.Repeat("0", 64), Command: []string{"true"},
		Resources: agentspec.Resources{GPUs: 64}}
	env, id, err := c.labs.CampaignOfSpecs(0, title, []string{bundle}, []*agentspec.Spec{unrunnable}, 1)
	if err != nil {
		c.t.Fatal(err)
	}
	if got, err := c.nodes[0].client.PublishCampaign(context.Background(), env); err != nil || got != id {
		c.t.Fatalf("publish: %q %v (want %s)", got, err, id)
	}
}

// pinStatusCLI runs `evalmesh pin status CID --json` on d's home, which exits 0 when the
// factor is met and 2 when not.
func pinStatusCLI(t *testing.T, d *daemonProc, c string) node.PinStatusReport {
	t.Helper()
	var rep node.PinStatusReport
	var out, errb bytes.Buffer
	code := run([]string{"--home", d.lab.Home.Dir, "pin", "status", c, "--json"}, &out, &errb)
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || code != map[bool]int{true: 0, false: 2}[rep.Met] {
		t.Fatalf("%s: pin status --json: exit %d, %v: %s%s", d.lab.Name, code, err, out.String(), errb.String())
	}
	return rep
}

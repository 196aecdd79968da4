package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node"
)

// docs/design.md §9 "Claiming holdings it does not keep", on real daemons. lab3's daemon
// (--test-claim-holdings) answers "held" to every holdings request and fetches nothing in
// its repair rounds. A campaign names one task bundle (its agent asks for more GPUs than any
// node offers, so nothing runs and the bundle is the one ledger object); every lab fetches
// it. Then lab2 and lab3 lose their copies (daemon stopped, block store wiped, restarted):
// lab1 holds the one real copy, and lab3's claim with it meets the pin factor (2). Counted,
// nobody would repair, and once lab1 left the bundle would be gone. The honest nodes must
// catch the lie: lab2's repair round spot-checks lab3, gets no block, logs a WARN naming the
// lab and the object, discounts lab3 and fetches and pins the bundle itself; `pin status
// --json` on lab2 says the factor is met by lab1 and lab2, with lab3 present and not
// counting (discounted_until set). Then lab1, the one honest original holder, stops for good,
// and verify-ledger from a fresh home, asking lab2 and lab3, still fetches the bundle and
// recomputes the root every lab reported before.
func TestPinRepairDiscountsALabClaimingHoldingsItDoesNotKeep(t *testing.T) {
	skipShortFaults(t)
	ctx := context.Background()
	c := newCluster(t, 3)
	c.args = map[int][]string{2: {"--test-claim-holdings"}}
	for i := range 3 {
		c.start(i)
	}
	c.connectAll()
	bundle := c.addTasks("arithmetic")[0]
	c.publishUnrunnable("claimed holdings", bundle)
	lab1, lab2, lab3 := c.labs.Nodes[0].Lab.ID, c.labs.Nodes[1].Lab.ID, c.labs.Nodes[2].Lab.ID
	holds := func(d *daemonProc) bool {
		pins, err := d.client.Pins(ctx)
		return err == nil && slices.ContainsFunc(pins, func(p node.PinInfo) bool { return p.CID == bundle })
	}
	testutil.WaitFor(t, 120*time.Second, "every lab to fetch the campaign's bundle", func() bool {
		return holds(c.nodes[1]) && holds(c.nodes[2])
	})
	before := c.settle("one ledger root with the campaign", 60*time.Second, func(v ledgerView) bool { return v.envelopes > 0 })

	// lab2 and lab3 lose their copies; lab3 goes on claiming it.
	for _, i := range []int{1, 2} {
		c.nodes[i].kill()
		if err := os.RemoveAll(c.labs.Nodes[i].Home.PackBlocksDir()); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{1, 2} {
		c.start(i)
	}
	c.connectAll()
	testutil.WaitFor(t, 120*time.Second, "lab2's repair round to fetch and pin the bundle lab3 claims", func() bool {
		pins, err := c.nodes[1].client.Pins(ctx)
		return err == nil && slices.ContainsFunc(pins, func(p node.PinInfo) bool { return p.CID == bundle && p.Name == "ledger bundle" })
	})
	if warn := fmt.Sprintf(`level=WARN msg="lab %s (%s) claims it holds %s but its node %s did not send`, c.nodes[2].lab.Name, lab3, bundle, c.nodes[2].peerID); !c.nodes[1].logHas(warn) {
		t.Errorf("lab2's log has no WARN line naming lab3 (%s) and the bundle %s:\n%s", lab3, bundle, readLog(c.nodes[1].log))
	}
	rep := pinStatusCLI(t, c.nodes[1], bundle)
	if !rep.Met || !slices.Equal(slices.Sorted(slices.Values(rep.Holding)), slices.Sorted(slices.Values([]string{lab1, lab2}))) {
		t.Errorf("lab2: pin status met %v holding %v; want met by lab1 and lab2", rep.Met, rep.Holding)
	}
	for _, l := range rep.Labs {
		liar := l.Lab == lab3
		if l.Counts == liar || (l.DiscountedUntil != nil) != liar || (liar && !l.Present) {
			t.Errorf("lab2: pin status of %s: present %v counts %v discounted until %v; want only lab3 present, discounted and not counting", l.Name, l.Present, l.Counts, l.DiscountedUntil)
		}
	}

	// The one honest original holder leaves; the bundle lives on at lab2.
	c.nodes[0].kill()
	vr, code := c.verifyLedgerCLI(c.nodes[1], c.nodes[2])
	if code != 0 || !vr.OK || len(vr.MissingBundles) != 0 || vr.LedgerRoot != before[0].root {
		t.Fatalf("verify-ledger after lab1 left: exit %d, ok %v, missing %+v, root %.12s (before %.12s)", code, vr.OK, vr.MissingBundles, vr.LedgerRoot, before[0].root)
	}
	t.Logf("lab3's claim of %.16s discounted; lab2 repaired; after lab1 left, verify-ledger recomputed root %.12s", bundle, vr.LedgerRoot)
}

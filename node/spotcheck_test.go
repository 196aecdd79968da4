package node

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// docs/design.md §9 "Claiming holdings it does not keep", on real nodes in one process: lab
// A holds a campaign's bundle (a folder of a 3 MiB file: a root, a file node, leaves); lab C
// (TestClaimHoldings) claims it keeping only its root block — a lab keeping roots only —
// and lab B holds nothing. Counted, A and C meet the factor (2) and B would not repair. B's
// round must spot-check A (pass) and C (fail below the root), discount C alone, fetch and
// pin the bundle; B's pin status lists C as present, discounted, not counting.
func TestRepairPinsDiscountsALabThatKeepsOnlyRoots(t *testing.T) {
	ctx := context.Background()
	fs, nodes := pinNetworkWith(t, func(i int, o *Options) { o.TestClaimHoldings = i == 2 }, "laba", "labb", "labc")
	a, b, c := nodes[0], nodes[1], nodes[2]
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(rand.N(256))
	}
	root, err := a.Add(ctx, writeTree(t, map[string]string{"big.bin": string(big)}), AddOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	blk, err := a.bstore.Get(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.bstore.Put(ctx, blk); err != nil {
		t.Fatal(err)
	}
	storeCampaignOf(t, fs[0], nodes, "claimed", []string{root.String()})
	var warned []string
	b.opts.Warnf = func(format string, args ...any) { warned = append(warned, format) }
	connect(t, a, b)
	connect(t, a, c)
	connect(t, b, c)
	sv, err := b.pins.RepairPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sv.Fetched, []string{root.String()}) {
		t.Fatalf("round on B: fetched %v, failed %v; want the bundle, which only A really holds", sv.Fetched, sv.Failed)
	}
	labA, labC := fs[0].Lab.ID, fs[2].Lab.ID
	d := b.pins.Discounts()
	if _, ok := d[labC]; !ok || len(d) != 1 {
		t.Errorf("B's discounts %v; want lab C's alone", d)
	}
	if pass, fail := promtest.ToFloat64(b.metrics.spotChecks.WithLabelValues("pass")), promtest.ToFloat64(b.metrics.spotChecks.WithLabelValues("fail")); pass != 1 || fail != 1 {
		t.Errorf("spot checks on B: %v passed, %v failed; want A's pass and C's fail", pass, fail)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "did not send block") {
		t.Errorf("B warned %q; want one line for lab C", warned)
	}
	rep, err := b.pins.PinStatus(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Met || !slices.Equal(sortedCopy(rep.Holding), sortedCopy([]string{labA, fs[1].Lab.ID})) {
		t.Errorf("pin status on B: met %v holding %v; want met by A and B", rep.Met, rep.Holding)
	}
	for _, l := range rep.Labs {
		if liar := l.Lab == labC; l.Counts == liar || (l.DiscountedUntil != nil) != liar || !l.Present {
			t.Errorf("pin status on B of %s: present %v counts %v discounted until %v; want C alone discounted", l.Name, l.Present, l.Counts, l.DiscountedUntil)
		}
	}
}

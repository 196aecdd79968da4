package protocol

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"
)

// Spot checks of holdings (docs/design.md §9 "Claiming holdings it does not keep";
// docs/protocol-sync.md §8). A lab's answer that it holds an object is its word alone, and a
// lab that keeps nothing could meet the pin factor with one real copy fewer. So each repair
// round a node asks each other lab's nodes, addressed to that node alone, for a few blocks of
// objects it claims, along a random path from the object's root to a leaf (a lab keeping
// only roots fails at the leaves); a block that does not come discounts every claim of that
// lab for HoldingsDiscountPeriod. What to check and whether a lab is discounted are decided
// here, from a seed the node draws at random each round (crypto/rand) and the results it
// saw; the node fetches the blocks (node/pins/spotcheck.go). None of it enters the ledger.

// SpotChecksPerLab is how many of a lab's claimed objects a repair round checks.
const SpotChecksPerLab = 2

// HoldingsDiscountPeriod is how long one failed spot check discounts a lab's claims: long
// beside a repair round (5 s), so the honest labs fetch and pin what the lab claimed before
// it counts again, and a lab that still lies is caught again while discounted.
const HoldingsDiscountPeriod = 10 * time.Minute

// spotDraw is the seeded draw of a spot check: the first 8 bytes of
// SHA-256(seed ‖ what ‖ 0 ‖ key ‖ 0 ‖ depth).
func spotDraw(seed []byte, what, key string, depth int) uint64 {
	h := sha256.New()
	h.Write(seed)
	h.Write([]byte(what))
	h.Write([]byte{0})
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(depth)))
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// SpotCheckObjects picks, of the objects lab claims, the k this round checks: those first
// in the order of their seeded draw, so each round checks others, and a lab lying about a
// fraction p of its claims is caught in about 1/(p×k) rounds. All of them when k or fewer.
func SpotCheckObjects(seed []byte, lab string, claimed []string, k int) []string {
	out := slices.Clone(claimed)
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(spotDraw(seed, lab, a, 0), spotDraw(seed, lab, b, 0)), cmp.Compare(a, b))
	})
	out = slices.Compact(out)
	return out[:min(k, len(out))]
}

// SpotCheckChild picks which of a block's n links the check of object follows at depth
// (the root's children are depth 0): a path drawn anew each round, so a lab cannot know
// which blocks to keep.
func SpotCheckChild(seed []byte, object string, depth, n int) int {
	if n <= 0 {
		return 0
	}
	return int(spotDraw(seed, "child", object, depth) % uint64(n))
}

// HoldingsDiscounts are, by lab, until when its holdings claims do not count, on this node
// alone. The zero value discounts nobody.
type HoldingsDiscounts map[string]time.Time

// Record notes a spot check of lab at now: a failure discounts lab until now+period (a
// later failure extends it); a pass changes nothing (one failure stands for its period, or
// a lab could lie about most objects and keep the few it is asked for most often).
func (d HoldingsDiscounts) Record(lab string, passed bool, now time.Time, period time.Duration) {
	if !passed && now.Add(period).After(d[lab]) {
		d[lab] = now.Add(period)
	}
}

// Discounted reports whether lab's claims do not count at now.
func (d HoldingsDiscounts) Discounted(lab string, now time.Time) bool {
	return now.Before(d[lab])
}

package pins

import (
	"context"
	"crypto/rand"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/node/xfer"
	"github.com/evalmesh/evalmesh/protocol"
)

// Spot checks of holdings (docs/design.md §9 "Claiming holdings it does not keep";
// protocol/spotcheck.go decides what to check and for how long a failure discounts a lab).

// spotCheckBlockTimeout bounds the wait for one block of a spot check. A node that holds the
// block sends it in one round trip; one that does not says "not found" at once, so only a
// node that stalls waits this out, and it fails.
const spotCheckBlockTimeout = 5 * time.Second

// spotCheckMaxDepth bounds a path from an object's root: a UnixFS DAG of any size this
// network moves is a handful of levels deep, and a claimant must not keep a check walking.
const spotCheckMaxDepth = 64

// spotCheckHoldings checks, for each other lab in claims (by lab, by CID, the nodes of it
// that answered they hold the object), protocol.SpotChecksPerLab of the objects it claims
// along a random path from the root to a leaf, each block asked of one claiming node alone
// over the transfer protocol, and records each lab's result in the keeper's discounts. It
// returns the labs whose claims do not count in this round: those discounted, with until
// when, and those whose node was no longer connected when its turn came, with this round's
// time. Such a lab is not checked and not discounted (a discount for a lost connection
// would punish a network fault as a lie), but it is not there to serve what it claims, and
// counted, a lab could answer the holdings request and hang up before its check, round
// after round. A node that was connected and hangs up when asked fails: were that a pass,
// hanging up would answer every check. A lab's own nodes are not checked: they are this
// node's own operator's.
func (k *Keeper) spotCheckHoldings(ctx context.Context, claims map[string]map[string][]peer.ID, self string, names map[string]string) map[string]time.Time {
	seed := make([]byte, 32)
	_, _ = rand.Read(seed) // crypto/rand.Read never fails (Go ≥ 1.24)
	var wg sync.WaitGroup
	var goneMu sync.Mutex
	gone := map[string]time.Time{}
	for lab, objs := range claims {
		if lab == self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, obj := range protocol.SpotCheckObjects(seed, lab, slices.Sorted(maps.Keys(objs)), protocol.SpotChecksPerLab) {
				peers := objs[obj]
				// Which claiming node answers: drawn like a path's first step (depth -1).
				p := peers[protocol.SpotCheckChild(seed, obj, -1, len(peers))]
				if k.o.Host.Network().Connectedness(p) != network.Connected {
					goneMu.Lock()
					gone[lab] = k.o.Clock.Now()
					goneMu.Unlock()
					return
				}
				block, err := k.spotCheck(ctx, seed, p, obj)
				if ctx.Err() != nil {
					return // the daemon is stopping: no result
				}
				k.mu.Lock()
				if k.discounts == nil {
					k.discounts = protocol.HoldingsDiscounts{}
				}
				now := k.o.Clock.Now()
				k.discounts.Record(lab, err == nil, now, protocol.HoldingsDiscountPeriod)
				until := k.discounts[lab]
				k.mu.Unlock()
				if err == nil {
					k.o.SpotChecked(true)
					continue
				}
				k.o.SpotChecked(false)
				k.o.Warnf("pins: lab %s (%s) claims it holds %s but its node %s did not send block %s of it: %v; none of its holdings claims counts on this node until %s, so the labs that keep their copies restore the factor",
					names[lab], lab, obj, p, block, err, until.UTC().Format(time.RFC3339))
				break // one failure discounts every claim of the lab: nothing more to learn
			}
		}()
	}
	wg.Wait()
	d := k.Discounts()
	for lab, at := range gone {
		if _, ok := d[lab]; !ok {
			d[lab] = at
		}
	}
	return d
}

// spotCheck walks one random path of obj from its root to a leaf, each block asked of p
// alone and verified against its CID, and returns the last block it asked for and why it
// did not come (nil when the path reached a leaf). Nothing it receives is stored.
func (k *Keeper) spotCheck(ctx context.Context, seed []byte, p peer.ID, obj string) (cid.Cid, error) {
	c, err := cid.Decode(obj)
	if err != nil {
		return c, err
	}
	for depth := 0; depth < spotCheckMaxDepth; depth++ {
		bctx, cancel := context.WithTimeout(ctx, spotCheckBlockTimeout) // wall clock: bounds one block asked of one peer (a round trip)
		data, err := xfer.FetchBlock(bctx, k.o.Host, p, c)
		cancel()
		if err != nil {
			return c, err
		}
		links, err := xfer.Links(c, data)
		if err != nil || len(links) == 0 {
			// A leaf, or a block of a codec without links here: it came, verified, which is
			// all a check can ask of the claimant.
			return c, nil
		}
		c = links[protocol.SpotCheckChild(seed, obj, depth, len(links))].Cid
	}
	return c, nil
}

// Discounts are the labs whose holdings claims do not count on this node now, with
// until when.
func (k *Keeper) Discounts() map[string]time.Time {
	now := k.o.Clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]time.Time{}
	for lab, until := range k.discounts {
		if k.discounts.Discounted(lab, now) {
			out[lab] = until
		}
	}
	return out
}

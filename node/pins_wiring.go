package node

import (
	"context"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/node/pins"
)

// newPinKeeper wires package node/pins to this node's stores, host and fetches; New calls
// it once the pinner is open.
func newPinKeeper(n *Node) *pins.Keeper {
	return pins.New(pins.Options{
		Home:         n.home,
		Network:      n.networkName(),
		Host:         n.host,
		Store:        n.store,
		Blockstore:   n.bstore,
		GCLocker:     n.gcl,
		Pinner:       n.pinner,
		BlockService: n.bserv,
		Verified:     n.vstore,
		NetworkDoc:   n.NetworkDoc,
		GuardMeta:    n.guardMeta,
		Fetch: func(ctx context.Context, c cid.Cid) error {
			_, err := n.fetch(ctx, c, nil, n.opts.StallTimeout)
			return err
		},
		FetchMany:     n.fetchMany,
		XferPeers:     n.xferPeers,
		MaxBundleSize: func() int64 { return n.cfg.MaxBundleSize },
		BitswapOnly:   n.opts.BitswapOnly,
		ClaimHoldings: n.opts.TestClaimHoldings,
		SpotChecked: func(pass bool) {
			if pass {
				n.metrics.spotChecks.WithLabelValues("pass").Inc()
			} else {
				n.metrics.spotChecks.WithLabelValues("fail").Inc()
			}
		},
		Clock: n.opts.Clock,
		// Read when a line is written, as the node's own lines are: tests swap them.
		Logf:  func(format string, args ...any) { n.opts.Logf(format, args...) },
		Warnf: func(format string, args ...any) { n.opts.Warnf(format, args...) },
	})
}

// PinKeeper is the node's pinning (package node/pins): holdings, repair rounds, pin status,
// garbage collection.
func (n *Node) PinKeeper() *pins.Keeper { return n.pins }

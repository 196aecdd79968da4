package node

import (
	"context"
	"sort"
	"sync"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/evalmesh/evalmesh/node/api"
)

// Partitions for fault tests are made inside evalmesh, never with firewall rules or other
// addresses: a connection gater refuses every connection to or from a cut-off peer, and
// Partition closes the connections already open. Heal lifts the cut; known peers are then
// re-dialled as after any dropped connection.

// partitionGater is the host's connection gater; with no peer cut off it admits everything.
type partitionGater struct {
	mu  sync.RWMutex
	cut map[peer.ID]bool
}

func (g *partitionGater) isCut(p peer.ID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.cut[p]
}

func (g *partitionGater) InterceptPeerDial(p peer.ID) bool { return !g.isCut(p) }
func (g *partitionGater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool {
	return !g.isCut(p)
}
func (g *partitionGater) InterceptAccept(network.ConnMultiaddrs) bool { return true }
func (g *partitionGater) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !g.isCut(p)
}
func (g *partitionGater) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	return !g.isCut(c.RemotePeer()), 0
}

// Partition cuts this node off from peers: no new connection either way, open ones closed.
func (n *Node) Partition(peers []peer.ID) {
	n.gater.mu.Lock()
	for _, p := range peers {
		n.gater.cut[p] = true
	}
	n.gater.mu.Unlock()
	for _, p := range peers {
		_ = n.host.Network().ClosePeer(p)
	}
}

// Heal lifts every cut made by Partition. Nothing is dialled here: the redialer reconnects
// the known peers at its next try (redial.go), as after a real partition.
func (n *Node) Heal() {
	n.gater.mu.Lock()
	n.gater.cut = map[peer.ID]bool{}
	n.gater.mu.Unlock()
}

// CutOff lists the peers this node is partitioned from, sorted.
func (n *Node) CutOff() []string {
	n.gater.mu.RLock()
	defer n.gater.mu.RUnlock()
	out := make([]string, 0, len(n.gater.cut))
	for p := range n.gater.cut {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out
}

// Partition asks a daemon started with --test-controls to cut itself off from peers.
func (c *Client) Partition(ctx context.Context, peers []string) error {
	return c.call(ctx, "test/partition", api.PartitionRequest{Peers: peers}, nil)
}

// Heal asks a daemon started with --test-controls to lift its partition.
func (c *Client) Heal(ctx context.Context) error {
	return c.call(ctx, "test/heal", nil, nil)
}

// Pace asks a daemon started with --test-controls to send bundle blocks (the streaming
// transfer it serves) at most at bytesPerSecond (0: no limit), so that a fault test can
// interrupt a transfer part way.
func (c *Client) Pace(ctx context.Context, bytesPerSecond int64) error {
	return c.call(ctx, "test/pace", api.PaceRequest{BytesPerSecond: bytesPerSecond}, nil)
}

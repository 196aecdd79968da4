package node

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/protocol"
)

// The network document this node runs and the heads it announces and hears (the heads
// themselves are node/syncer's Heads, wired here).

// LoadNetworkDoc reads HOME/network.json; a home without one has none (nil, nil).
func LoadNetworkDoc(h home.Home) (*protocol.NetworkDoc, error) {
	b, err := os.ReadFile(h.NetworkDocPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d, err := protocol.ParseNetworkDoc(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.NetworkDocPath(), err)
	}
	return d, nil
}

// netDoc is the network document, loaded once: Options.Network, else HOME/network.json.
type netDoc struct {
	once sync.Once
	doc  *protocol.NetworkDoc
	err  error
}

// NetworkDoc is the network document this node runs (nil when the home has none).
func (n *Node) NetworkDoc() (*protocol.NetworkDoc, error) {
	n.netdoc.once.Do(func() {
		if n.opts.Network != nil {
			n.netdoc.doc = n.opts.Network
		} else {
			n.netdoc.doc, n.netdoc.err = LoadNetworkDoc(n.home)
		}
	})
	return n.netdoc.doc, n.netdoc.err
}

// networkName is the document's network, else the config's.
func (n *Node) networkName() string {
	if d, _ := n.NetworkDoc(); d != nil {
		return d.Network
	}
	return n.cfg.Network
}

// newHeads tracks heads under the node's network document, signed with its identity, aged
// by its clock until the mesh sets its own.
func (n *Node) newHeads() *syncer.Heads {
	doc, _ := n.NetworkDoc()
	return syncer.NewHeads(n.syncer, syncer.HeadsOptions{Network: n.networkName(), Doc: doc, Key: n.home.Identity,
		LedgerInput: n.opts.LedgerInput, Now: n.opts.Clock.Now, StaleAfter: syncer.HeadsStaleAfter * mesh.DefaultHeadsInterval,
		Logf: n.opts.Logf})
}

// LedgerStatus compares our head with every peer's latest; heads older than the staleness
// bound are reported stale, never as agreeing.
func (n *Node) LedgerStatus() LedgerStatus {
	o := n.heads.Ours()
	peers := n.heads.Compare(o)
	return LedgerStatus{Network: o.Network, NetworkDoc: o.NetworkDoc, LedgerRoot: o.LedgerRoot,
		Attestations: o.Attestations, Fingerprint: o.Fingerprint, Refused: n.vstore.Attestations().RefusedLen(),
		Campaigns: n.vstore.Campaigns().Len(), Peers: api.OrEmpty(peers), DocumentMajority: n.heads.Verdict(), ClaimingStopped: n.ClaimingStopped()}
}

package node

import (
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Objects the ledger rests on (docs/protocol-sync.md §8). Which objects those are is
// protocol.LedgerObjects' decision, over the campaigns and attestations in the verified
// store; the node keeps what it holds of them through garbage collection (gc.go).

// LedgerObjects lists every object the stored campaigns and attestations name.
func (n *Node) LedgerObjects() []protocol.LedgerObject {
	if n.vstore == nil {
		return nil
	}
	collect := func(set *Set) [][]byte {
		var out [][]byte
		_ = set.Each(func(_ recon.ID, env []byte) error {
			out = append(out, env)
			return nil
		})
		return out
	}
	return protocol.LedgerObjects(collect(n.vstore.Campaigns()), collect(n.vstore.Attestations()))
}

// ledgerRoots are the CIDs of LedgerObjects that parse (a stored envelope names only
// verified ones, but a CID annotation is free text).
func (n *Node) ledgerRoots() []cid.Cid {
	objs := n.LedgerObjects()
	out := make([]cid.Cid, 0, len(objs))
	for _, o := range objs {
		if c, err := cid.Decode(o.CID); err == nil {
			out = append(out, c)
		}
	}
	return out
}

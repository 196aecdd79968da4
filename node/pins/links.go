package pins

import (
	"fmt"
	"math"

	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
)

// Link is a child CID with the cumulative size its parent declares for it.
type Link struct {
	Cid   cid.Cid
	Tsize uint64
}

// Links returns the links of a block of a UnixFS DAG (dag-pb), or none (raw); another codec
// is an error. Holding, garbage collection and fetching walk DAGs with it.
func Links(b blocks.Block) ([]Link, error) {
	switch b.Cid().Type() {
	case cid.Raw:
		return nil, nil
	case cid.DagProtobuf:
		nd, err := merkledag.DecodeProtobuf(b.RawData())
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", b.Cid(), err)
		}
		out := make([]Link, 0, len(nd.Links()))
		for _, l := range nd.Links() {
			out = append(out, Link{l.Cid, l.Size})
		}
		return out, nil
	default:
		return nil, fmt.Errorf("block %s: codec %#x is not part of a UnixFS bundle", b.Cid(), b.Cid().Type())
	}
}

// DeclaredSize is the size a DAG's root claims for the whole DAG: the root block plus the
// cumulative sizes its links carry (dag-pb Tsize); for a raw block, its length. A peer can
// lie about it, so a fetch also stops once more bytes than this arrive.
func DeclaredSize(root blocks.Block) (int64, error) {
	switch root.Cid().Type() {
	case cid.Raw:
		return int64(len(root.RawData())), nil
	case cid.DagProtobuf:
		nd, err := merkledag.DecodeProtobuf(root.RawData())
		if err != nil {
			return 0, fmt.Errorf("root %s: %w", root.Cid(), err)
		}
		total := uint64(len(root.RawData()))
		for _, l := range nd.Links() {
			if l.Size > math.MaxInt64-total {
				return 0, fmt.Errorf("root %s declares more than %d bytes: not a bundle this node can hold", root.Cid(), int64(math.MaxInt64))
			}
			total += l.Size
		}
		return int64(total), nil
	default:
		return 0, fmt.Errorf("root %s: codec %#x is not a UnixFS bundle (want dag-pb or raw)", root.Cid(), root.Cid().Type())
	}
}

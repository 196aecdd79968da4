package pins

import (
	"testing"

	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// FuzzLinks feeds arbitrary bytes, as a peer could send them, to the dag-pb decoding that a
// fetch, a repair round and GC do on every block (links and declared size): it must error,
// never panic, and a declared size is never negative (which would slip under
// max_bundle_size).
func FuzzLinks(f *testing.F) {
	nd := merkledag.NodeWithData([]byte{0x08, 0x01})
	child := merkledag.NewRawNode([]byte("leaf"))
	nd.AddNodeLink("leaf", child)
	f.Add(nd.RawData())
	f.Add([]byte{})
	f.Add([]byte{0x12, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, _ := multihash.Sum(data, multihash.SHA2_256, -1)
		for _, codec := range []uint64{cid.DagProtobuf, cid.Raw} {
			b, _ := blocks.NewBlockWithCid(data, cid.NewCidV1(codec, h))
			if size, err := DeclaredSize(b); err == nil && size < 0 {
				t.Fatalf("declared size %d", size)
			}
			Links(b)
		}
	})
}

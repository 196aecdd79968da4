package node

import (
	"bytes"
	"context"
	"testing"

	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// FuzzBlockLinks feeds arbitrary bytes, as a peer could send them, to the dag-pb decoding that
// Fetch does on every block (links and declared size): it must error, never panic, and a
// declared size is never negative (which would slip under max_bundle_size).
func FuzzBlockLinks(f *testing.F) {
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
			blockLinks(b)
		}
	})
}

// FuzzReadCAR feeds arbitrary bytes as a CAR file to the reader ImportCAR uses: a malformed
// CAR is refused with an error, never a panic, and every block passed on matches its CID.
func FuzzReadCAR(f *testing.F) {
	n := startNode(f, testOptions())
	root := importDir(f, n.LocalDAG(), map[string][]byte{"a": []byte("hello"), "b": randomBytes(1, 1000)})
	var car bytes.Buffer
	if err := n.ExportCAR(context.Background(), root, &car); err != nil {
		f.Fatal(err)
	}
	f.Add(car.Bytes())
	f.Add(car.Bytes()[:len(car.Bytes())/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		readCAR(bytes.NewReader(data), func(b blocks.Block) error {
			if got, err := b.Cid().Prefix().Sum(b.RawData()); err != nil || !got.Equals(b.Cid()) {
				t.Fatalf("block %s passed on with bytes that hash to %s", b.Cid(), got)
			}
			return nil
		})
	})
}

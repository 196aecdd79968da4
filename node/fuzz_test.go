package node

import (
	"bytes"
	"context"
	"testing"

	blocks "github.com/ipfs/go-block-format"
)

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

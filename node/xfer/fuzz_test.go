package xfer

import (
	"bufio"
	"bytes"
	"errors"
	"testing"

	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	mh "github.com/multiformats/go-multihash"
)

func testCID(codec uint64, data string) cid.Cid {
	sum, _ := mh.Sum([]byte(data), mh.SHA2_256, -1)
	return cid.NewCidV1(codec, sum)
}

func TestRequestRoundTrip(t *testing.T) {
	items := []Item{{ModeDAG, testCID(cid.DagProtobuf, "a")}, {ModeBlock, testCID(cid.Raw, "b")}}
	got, err := ReadRequest(bufio.NewReader(bytes.NewReader(AppendRequest(nil, items))))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != items[0] || got[1] != items[1] {
		t.Fatalf("got %v, want %v", got, items)
	}
	for _, bad := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"zero items", []byte{0}},
		{"too many items", []byte{0x81, 0x80, 0x04}},
		{"bad mode", []byte{1, 7, 1, 0}},
		{"long cid", []byte{1, 1, 200, 1}},
		{"truncated", AppendRequest(nil, items)[:10]},
	} {
		if _, err := ReadRequest(bufio.NewReader(bytes.NewReader(bad.in))); err == nil {
			t.Errorf("%s: accepted", bad.name)
		}
	}
}

func FuzzReadRequest(f *testing.F) {
	f.Add(AppendRequest(nil, []Item{{ModeDAG, testCID(cid.DagProtobuf, "a")}}))
	f.Add(AppendRequest(nil, []Item{{ModeBlock, testCID(cid.Raw, "a")}, {ModeDAG, testCID(cid.DagCBOR, "b")}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{1, 1, 2, 1, 0x55})
	f.Fuzz(func(t *testing.T, in []byte) {
		items, err := ReadRequest(bufio.NewReader(bytes.NewReader(in)))
		if err != nil {
			return
		}
		// What decodes re-encodes to the bytes it was read from.
		out := AppendRequest(nil, items)
		if !bytes.HasPrefix(in, out) {
			t.Fatalf("round trip: %x → %v → %x", in, items, out)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	writeBlockFrame(w, []byte("hello"))
	writeErrorFrame(w, "block x: not found")
	w.WriteByte(frameEnd)
	w.Flush()
	f.Add(b.Bytes())
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Add([]byte{2, 0x80, 0x10})
	f.Add([]byte{9})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReader(bytes.NewReader(in))
		for i := 0; i < 64; i++ {
			data, err := readFrame(r)
			var pe *PeerError
			switch {
			case err == nil:
				if len(data) > MaxBlockSize {
					t.Fatalf("accepted a %d-byte block", len(data))
				}
			case errors.As(err, &pe):
				if len(pe.Msg) > maxErrorLen {
					t.Fatalf("accepted a %d-byte error", len(pe.Msg))
				}
			default:
				return
			}
		}
	})
}

// FuzzLinks checks the dag-pb link parser against boxo's decoder: whenever boxo decodes a
// block, the parser must return the same links in the same order.
func FuzzLinks(f *testing.F) {
	n := merkledag.NodeWithData([]byte{8, 1})
	n.AddRawLink("a", &ipld.Link{Cid: testCID(cid.Raw, "x"), Size: 5})
	n.AddRawLink("b", &ipld.Link{Cid: testCID(cid.DagProtobuf, "y"), Size: 1 << 40})
	enc, _ := n.EncodeProtobuf(false)
	f.Add(enc)
	f.Add([]byte{0x12, 0x02, 0x0a, 0x00})
	f.Add([]byte{0x0a, 0x05, 1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := pbLinks(in)
		want, werr := merkledag.DecodeProtobuf(in)
		if werr != nil {
			return
		}
		if err != nil {
			t.Fatalf("boxo decodes %x but pbLinks fails: %v", in, err)
		}
		wl := want.Links()
		if len(got) != len(wl) {
			t.Fatalf("got %d links, boxo %d", len(got), len(wl))
		}
		for i := range got {
			if !got[i].Cid.Equals(wl[i].Cid) || got[i].Size != wl[i].Size {
				t.Fatalf("link %d: got %v/%d, boxo %v/%d", i, got[i].Cid, got[i].Size, wl[i].Cid, wl[i].Size)
			}
		}
	})
}

func TestLinksCBOR(t *testing.T) {
	// {"a": [link], "b": link} in dag-cbor: links found in traversal order.
	l1, l2 := testCID(cid.Raw, "1"), testCID(cid.Raw, "2")
	var b bytes.Buffer
	b.Write([]byte{0xa2, 0x61, 'a', 0x81})
	writeCBORLink(&b, l1)
	b.Write([]byte{0x61, 'b'})
	writeCBORLink(&b, l2)
	got, err := Links(testCID(cid.DagCBOR, "z"), b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Cid.Equals(l1) || !got[1].Cid.Equals(l2) {
		t.Fatalf("got %v", got)
	}
	if _, err := Links(testCID(0x300001, "q"), nil); err == nil {
		t.Fatal("unknown codec walked as a leaf")
	}
}

func writeCBORLink(b *bytes.Buffer, c cid.Cid) {
	cb := append([]byte{0}, c.Bytes()...)
	b.Write([]byte{0xd8, 0x2a, 0x58, byte(len(cb))})
	b.Write(cb)
}

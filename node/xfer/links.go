package xfer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/ipld/go-ipld-prime/datamodel"
	cidlink "github.com/ipld/go-ipld-prime/linking/cid"
	"github.com/ipld/go-ipld-prime/multicodec"
	"github.com/ipld/go-ipld-prime/node/basicnode"
	mc "github.com/multiformats/go-multicodec"
	mh "github.com/multiformats/go-multihash"

	_ "github.com/ipld/go-ipld-prime/codec/dagcbor" // registers the decoder used for walking
	_ "github.com/ipld/go-ipld-prime/codec/dagjson"
)

// Link is a child of a block, in the block's link order. Size is the dag-pb Tsize (the
// cumulative size of the subtree) when the codec records one, else 0.
type Link struct {
	Cid  cid.Cid
	Size uint64
}

// Links returns the children of a block in link order. Raw blocks have none. dag-pb is
// parsed directly (it is the UnixFS hot path); other codecs go through go-ipld-prime's
// decoder registry. A codec with no registered decoder is an error, not a leaf: treating it as
// a leaf would end a transfer early without saying so.
func Links(c cid.Cid, data []byte) ([]Link, error) {
	switch mc.Code(c.Type()) {
	case mc.Raw:
		return nil, nil
	case mc.DagPb:
		return pbLinks(data)
	}
	dec, err := multicodec.LookupDecoder(c.Type())
	if err != nil {
		return nil, fmt.Errorf("block %s: cannot walk codec 0x%x: %w", c, c.Type(), err)
	}
	nb := basicnode.Prototype.Any.NewBuilder()
	if err := dec(nb, bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("block %s: decoding: %w", c, err)
	}
	var out []Link
	collectLinks(nb.Build(), &out, 0)
	return out, nil
}

func collectLinks(n datamodel.Node, out *[]Link, depth int) {
	if depth > 256 {
		return
	}
	switch n.Kind() {
	case datamodel.Kind_Link:
		l, err := n.AsLink()
		if err == nil {
			if cl, ok := l.(cidlink.Link); ok {
				*out = append(*out, Link{Cid: cl.Cid})
			}
		}
	case datamodel.Kind_Map:
		it := n.MapIterator()
		for !it.Done() {
			_, v, err := it.Next()
			if err != nil {
				return
			}
			collectLinks(v, out, depth+1)
		}
	case datamodel.Kind_List:
		it := n.ListIterator()
		for !it.Done() {
			_, v, err := it.Next()
			if err != nil {
				return
			}
			collectLinks(v, out, depth+1)
		}
	}
}

var errPB = errors.New("malformed dag-pb")

// pbLinks parses the Links (field 2) of a dag-pb PBNode and, in each, Hash (field 1) and
// Tsize (field 3). Unknown fields are rejected as dag-pb requires.
func pbLinks(data []byte) ([]Link, error) {
	var out []Link
	for len(data) > 0 {
		field, wire, n := pbTag(data)
		if n <= 0 || wire != 2 {
			return nil, errPB
		}
		data = data[n:]
		l, n := binary.Uvarint(data)
		if n <= 0 || l > uint64(len(data)-n) {
			return nil, errPB
		}
		body := data[n : n+int(l)]
		data = data[n+int(l):]
		switch field {
		case 1: // Data
		case 2:
			lk, err := pbLink(body)
			if err != nil {
				return nil, err
			}
			out = append(out, lk)
		default:
			return nil, errPB
		}
	}
	return out, nil
}

func pbLink(b []byte) (Link, error) {
	var lk Link
	seenHash := false
	for len(b) > 0 {
		field, wire, n := pbTag(b)
		if n <= 0 {
			return lk, errPB
		}
		b = b[n:]
		switch {
		case (field == 1 || field == 2) && wire == 2:
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return lk, errPB
			}
			if field == 1 {
				// Like go-codec-dagpb (what kubo walks with), read a CID from the front of
				// the field and ignore any trailing bytes, so both see the same link.
				_, c, err := cid.CidFromBytes(b[n : n+int(l)])
				if err != nil {
					return lk, fmt.Errorf("dag-pb link hash: %w", err)
				}
				lk.Cid, seenHash = c, true
			}
			b = b[n+int(l):]
		case field == 3 && wire == 0:
			v, n := binary.Uvarint(b)
			if n <= 0 {
				return lk, errPB
			}
			lk.Size = v
			b = b[n:]
		default:
			return lk, errPB
		}
	}
	if !seenHash {
		return lk, fmt.Errorf("%w: link without hash", errPB)
	}
	return lk, nil
}

func pbTag(b []byte) (field uint64, wire uint64, n int) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n > 5 {
		return 0, 0, -1
	}
	return v >> 3, v & 7, n
}

// Verify reports whether data hashes to c.
func Verify(c cid.Cid, data []byte) error {
	p := c.Prefix()
	if p.MhType == mh.IDENTITY {
		dm, err := mh.Decode(c.Hash())
		if err != nil || !bytes.Equal(dm.Digest, data) {
			return fmt.Errorf("block does not match its CID %s", c)
		}
		return nil
	}
	sum, err := mh.Sum(data, p.MhType, p.MhLength)
	if err != nil {
		return fmt.Errorf("hashing block %s: %w", c, err)
	}
	if !bytes.Equal(sum, c.Hash()) {
		return fmt.Errorf("block does not match its CID %s", c)
	}
	return nil
}

// isIdentity reports whether c carries its data inline; such blocks are never sent.
func isIdentity(c cid.Cid) bool { return c.Prefix().MhType == mh.IDENTITY }

// identityData returns the inline data of an identity CID.
func identityData(c cid.Cid) ([]byte, error) {
	dm, err := mh.Decode(c.Hash())
	if err != nil {
		return nil, err
	}
	return dm.Digest, nil
}

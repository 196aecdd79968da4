// Package rawleaf owns the one CID shape that can be hashed two at a time: a raw leaf named
// by CIDv1, codec raw, full-length sha2-256 (every file leaf of a bundle). It says whether a
// CID or prefix has that shape, builds such a CID from a digest, and checks two such leaves
// in one interleaved SHA-256 pass (internal/sha256x2). The packer (tasks), the fetcher
// (node/xfer) and the unpacker (tasks) share it so that all three agree on the shape.
//
// Pure functions, no state: safe for concurrent use.
package rawleaf

import (
	"bytes"
	"crypto/sha256"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"

	"github.com/evalmesh/evalmesh/internal/sha256x2"
)

// Is says whether c names a raw leaf by its full sha2-256.
func Is(c cid.Cid) bool {
	p := c.Prefix()
	return p.Version == 1 && p.Codec == cid.Raw && p.MhType == mh.SHA2_256 && p.MhLength == sha256.Size
}

// IsPrefix says whether p builds the CIDs Is accepts (MhLength -1 is the default length).
func IsPrefix(p cid.Prefix) bool {
	return p.Version == 1 && p.Codec == cid.Raw && p.MhType == mh.SHA2_256 && (p.MhLength == -1 || p.MhLength == sha256.Size)
}

// CID is the raw leaf CID of the bytes whose SHA-256 is digest.
func CID(digest [sha256.Size]byte) cid.Cid {
	m, err := mh.Encode(digest[:], mh.SHA2_256)
	if err != nil {
		panic(err) // sha2-256 with a 32-byte digest always encodes
	}
	return cid.NewCidV1(cid.Raw, m)
}

// Names says whether c, a sha2-256 CID, names the bytes whose SHA-256 is digest.
func Names(c cid.Cid, digest [sha256.Size]byte) bool {
	h := c.Hash()
	return len(h) == 2+sha256.Size && h[0] == mh.SHA2_256 && h[1] == sha256.Size && bytes.Equal(h[2:], digest[:])
}

// Check2 says whether a and b hash to ca and cb, hashing them in one pass when they are the
// same length (every full leaf; otherwise one after the other). A CID whose hash is not a
// full sha2-256 never matches: callers pair only leaves Is accepts.
func Check2(ca, cb cid.Cid, a, b []byte) (okA, okB bool) {
	da, db := sha256x2.Sum256(a, b)
	return Names(ca, da), Names(cb, db)
}

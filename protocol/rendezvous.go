package protocol

import (
	"crypto/sha256"
	"encoding/binary"
)

// RendezvousScore is the rendezvous (highest-random-weight) score of item for member: the
// first 8 bytes, big-endian, of sha256(item || 0x00 || member). Every node computes the same
// scores from the same strings, so an order by score needs no coordination: a node tries
// the slots with its highest scores first (nodes spread out without talking), and the labs
// with the highest scores for a run re-score it. sha256 rather than a faster hash because
// the order is part of the protocol (docs/protocol-claims.md) and must be easy to
// reimplement exactly; it costs ~0.3 µs.
func RendezvousScore(item, member string) uint64 {
	h := sha256.New()
	h.Write([]byte(item))
	h.Write([]byte{0})
	h.Write([]byte(member))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

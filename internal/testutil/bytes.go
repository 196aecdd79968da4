package testutil

import "math/rand/v2"

// RandomBytes is n bytes of deterministic pseudo-random data: the same seed gives the same
// bytes, so a block made from them has the same CID in every run.
func RandomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

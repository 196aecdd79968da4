//go:build !amd64 || purego

package sha256x2

// interleaved is false off amd64: Sum256 hashes one message after the other.
const interleaved = false

func block2(ha, hb *[8]uint32, pa, pb *byte, blocks int) {
	panic("sha256x2: block2 without the SHA extensions")
}

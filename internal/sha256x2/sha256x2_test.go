package sha256x2

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestSum256MatchesCryptoSHA256 checks both digests against crypto/sha256 at every length
// around the padding's edges (0-200 bytes: one or two tail blocks) and at block sizes the
// packer and the fetch hash (256 KiB leaves and their neighbours), with different bytes in
// the two messages so a lane mix-up shows.
func TestSum256MatchesCryptoSHA256(t *testing.T) {
	if !interleaved {
		t.Log("this CPU lacks the SHA extensions: Sum256 is crypto/sha256 twice (checked all the same)")
	}
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{256 << 10, 256<<10 - 1, 256<<10 + 1, 1 << 20, 174 << 10}
	for n := 0; n <= 200; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		a, b := make([]byte, n), make([]byte, n)
		for i := range a {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		da, db := Sum256(a, b)
		if da != sha256.Sum256(a) || db != sha256.Sum256(b) {
			t.Fatalf("length %d: Sum256 = %x, %x; crypto/sha256 = %x, %x", n, da, db, sha256.Sum256(a), sha256.Sum256(b))
		}
	}
}

func TestSum256DifferentLengths(t *testing.T) {
	a, b := []byte("abc"), []byte("abcd")
	da, db := Sum256(a, b)
	if da != sha256.Sum256(a) || db != sha256.Sum256(b) {
		t.Fatalf("different lengths: got %x, %x", da, db)
	}
}

func FuzzSum256(f *testing.F) {
	f.Add([]byte("abc"), []byte("xyz"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		b = append(b, make([]byte, max(0, len(a)-len(b)))...)[:len(a)]
		da, db := Sum256(a, b)
		if da != sha256.Sum256(a) || db != sha256.Sum256(b) {
			t.Fatalf("len %d: got %x, %x", len(a), da, db)
		}
	})
}

// BenchmarkSum256 hashes pairs of 256 KiB blocks: crypto/sha256 one after the other, and
// Sum256's interleaved pass. MB/s counts both messages' bytes; compare the two rows of one
// run.
func BenchmarkSum256(b *testing.B) {
	x, y := make([]byte, 256<<10), make([]byte, 256<<10)
	for i := range x {
		x[i], y[i] = byte(i), byte(i*7)
	}
	b.Run("crypto-sha256-twice", func(b *testing.B) {
		b.SetBytes(int64(2 * len(x)))
		for b.Loop() {
			sha256.Sum256(x)
			sha256.Sum256(y)
		}
	})
	b.Run("sha256x2", func(b *testing.B) {
		b.SetBytes(int64(2 * len(x)))
		for b.Loop() {
			Sum256(x, y)
		}
	})
}

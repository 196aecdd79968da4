//go:build amd64 && !purego

package sha256x2

import "github.com/klauspost/cpuid/v2"

//go:generate sh -c "go run gen/main.go > block2_amd64.s"

// interleaved says whether block2 may run: the CPU has the SHA extensions and the SSE
// levels the rounds use.
var interleaved = cpuid.CPU.Supports(cpuid.SHA, cpuid.SSSE3, cpuid.SSE4)

// block2 runs SHA-256's compression over blocks 64-byte blocks of pa into ha and of pb into
// hb, the two messages' rounds interleaved. blocks must be at least 1.
//
//go:noescape
func block2(ha, hb *[8]uint32, pa, pb *byte, blocks int)

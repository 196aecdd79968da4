// Package vstoretest holds the test fixtures the verified store's tests and node's share:
// a lab with a certified node and its trust store, signed run attestations, and an
// envelope whose signature no longer verifies. It imports no evalmesh package that
// imports vstore, so vstore's own tests use it too. Tests only.
package vstoretest

import (
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
)

// Lab is a test lab with a certified node and a trust store for it.
func Lab(t testing.TB, name string) (*attestgen.Fixture, *attest.TrustStore) {
	t.Helper()
	f, err := attestgen.New(name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := attestgen.Trust(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, tr
}

// SignRuns returns run attestations lo..hi-1 of f's node, signed.
func SignRuns(t testing.TB, f *attestgen.Fixture, lo, hi int) [][]byte {
	t.Helper()
	envs, err := f.Runs(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

// Mutate flips a byte inside the signed payload (base64 text), so the envelope parses but
// its signature no longer verifies.
func Mutate(env []byte) []byte {
	m := append([]byte(nil), env...)
	i := len(m) / 3
	for m[i] == '"' || m[i] == ':' || m[i] == ',' {
		i++
	}
	if m[i] == 'A' {
		m[i] = 'B'
	} else {
		m[i] = 'A'
	}
	return m
}

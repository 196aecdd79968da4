package vstore

import (
	"bytes"
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// verifiedUnder is a caller's attestation value: what it verified, and under which trust
// store object.
type verifiedUnder struct {
	v     *attest.Verified
	trust *attest.TrustStore
}

func verifyUnder(t *testing.T, env []byte, trust *attest.TrustStore) *verifiedUnder {
	t.Helper()
	v, err := attest.VerifyWith(env, trust, attest.VerifyOptions{AtClaimedTime: true})
	if err != nil {
		t.Fatal(err)
	}
	return &verifiedUnder{v, trust}
}

// AddVerified takes an attestation value as its caller verified it only when it was
// verified under the trust store object the store verifies under now: a value verified
// under another one (an equal copy, or the store's before SetTrust) is verified again.
// Either way the order key is the statement's claimed time and the kept values cover
// every stored envelope.
func TestStoreAdmitsAttestationValuesOnlyUnderItsOwnTrustStore(t *testing.T) {
	f, trust := vstoretest.Lab(t, "acme")
	other, err := attestgen.Trust(f) // the same labs, another object
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir(), Options{Trust: trust,
		AdmitAttestation: func(env []byte, value any) (*attest.Verified, *attest.TrustStore, bool) {
			a, ok := value.(*verifiedUnder)
			if !ok || !bytes.Equal(a.v.Envelope, env) {
				return nil, nil, false
			}
			return a.v, a.trust, true
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Values(trust); err != nil { // values kept from here on (keepValues)
		t.Fatal(err)
	}
	set := s.Attestations()
	var handed []any
	set.OnNew(func(_ Source, news []Accepted) {
		for _, a := range news {
			handed = append(handed, a.Value)
		}
	})
	envs := vstoretest.SignRuns(t, f, 0, 4)
	add := func(env []byte, value *verifiedUnder) {
		t.Helper()
		res, err := set.AddVerified([]Accepted{{Envelope: env, Value: value}}, SourceGossip, "p")
		if err != nil || res[0].Status != StatusNew {
			t.Fatalf("%+v %v", res, err)
		}
	}

	same := verifyUnder(t, envs[0], trust)
	add(envs[0], same)
	if n := set.Verifications(); n != 0 || handed[0] != same.v {
		t.Fatalf("a value verified under the store's trust store: %d verifications, OnNew got %p, want 0 and %p", n, handed[0], same.v)
	}
	add(envs[1], verifyUnder(t, envs[1], other))
	if n := set.Verifications(); n != 1 {
		t.Fatalf("a value verified under an equal copy of the trust store: %d verifications, want 1", n)
	}
	s.SetTrust(other)
	add(envs[2], verifyUnder(t, envs[2], trust))
	if n := set.Verifications(); n != 2 {
		t.Fatalf("a value verified under the trust store the store had before SetTrust: %d verifications, want 2", n)
	}
	add(envs[3], verifyUnder(t, envs[3], other))
	if n := set.Verifications(); n != 2 {
		t.Fatalf("a value verified under the store's new trust store: %d verifications, want 2", n)
	}

	want := map[recon.ID]uint64{}
	for _, e := range envs {
		want[DigestOf(e)] = orderTime(verifyUnder(t, e, trust).v)
	}
	set.View(func(st recon.Storage) {
		if st.Len() != len(envs) {
			t.Fatalf("%d stored, want %d", st.Len(), len(envs))
		}
		for i := range st.Len() {
			if it := st.At(i); it.Time != want[it.ID] {
				t.Fatalf("order key %d, want the claimed time %d", it.Time, want[it.ID])
			}
		}
	})
	vs, refused, err := s.Values(trust)
	if err != nil || len(vs) != len(envs) || len(refused) != 0 {
		t.Fatalf("%d values, %d refused (%v), want %d and 0", len(vs), len(refused), err, len(envs))
	}
}

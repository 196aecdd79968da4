package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
)

type claimFixture struct {
	trust *attest.TrustStore
	lab   *attest.Lab
	peer  string
	cert  []byte
	now   time.Time
}

func newClaimFixture(t testing.TB) *claimFixture {
	t.Helper()
	lk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := attest.NewLab(lk)
	if err != nil {
		t.Fatal(err)
	}
	trust := attest.NewTrustStore()
	if _, err := trust.AddLab("lab", lab.Pub); err != nil {
		t.Fatal(err)
	}
	return &claimFixture{trust: trust, lab: lab, now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
		peer: newPeer(t), cert: nil}
}

func newPeer(t testing.TB) string {
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func (f *claimFixture) certFor(t testing.TB, lab *attest.Lab, node string, from time.Time, validity time.Duration) []byte {
	t.Helper()
	c, err := lab.Certify(node, from, validity)
	if err != nil {
		t.Fatal(err)
	}
	return c.Raw()
}

func (f *claimFixture) msg(t testing.TB) *ClaimMessage {
	if f.cert == nil {
		f.cert = f.certFor(t, f.lab, f.peer, f.now.Add(-time.Hour), 24*time.Hour)
	}
	return &ClaimMessage{V: Version, Kind: ClaimKindClaim, Campaign: "bafycampaign", Slot: "bafycampaign/0",
		PeerID: f.peer, Lab: f.lab.ID, Lamport: 7, LeaseMS: 600000, Attempt: 1, Cert: f.cert}
}

func encode(t testing.TB, m *ClaimMessage) []byte {
	t.Helper()
	b, err := EncodeClaim(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClaimRoundTrip(t *testing.T) {
	f := newClaimFixture(t)
	for _, kr := range [][2]string{{ClaimKindClaim, ""}, {ClaimKindRenew, ""}, {ClaimKindRelease, ReleaseInfra},
		{ClaimKindRelease, ReleaseShutdown}, {ClaimKindRelease, ReleaseStale}, {ClaimKindRelease, ReleaseAwaitingKey}} {
		kind := kr[0] + " " + kr[1]
		m := f.msg(t)
		m.Kind = kr[0]
		if kr[0] == ClaimKindRelease {
			m.LeaseMS, m.Reason = 0, kr[1]
		}
		b := encode(t, m)
		got, err := DecodeClaim(b)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if got.Reason != kr[1] {
			t.Fatalf("%s: reason %q after decoding", kind, got.Reason)
		}
		if again := encode(t, got); !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encoding differs:\n%s\n%s", kind, b, again)
		}
	}
}

func TestDecodeClaimRefuses(t *testing.T) {
	f := newClaimFixture(t)
	good := encode(t, f.msg(t))
	edit := func(fn func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		fn(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name string
		in   []byte
		want string // in the error
	}{
		{"not json", []byte("claim"), "not a JSON object"},
		{"no version", edit(func(m map[string]any) { delete(m, "v") }), "missing field v"},
		{"unknown kind", edit(func(m map[string]any) { m["kind"] = "steal" }), `kind "steal" unknown`},
		{"no kind", edit(func(m map[string]any) { delete(m, "kind") }), "missing field kind"},
		{"no slot", edit(func(m map[string]any) { delete(m, "slot") }), "missing field slot"},
		{"no campaign", edit(func(m map[string]any) { m["campaign"] = "" }), "missing field campaign"},
		{"no peer", edit(func(m map[string]any) { delete(m, "peer_id") }), "missing field peer_id"},
		{"no lab", edit(func(m map[string]any) { delete(m, "lab") }), "missing field lab"},
		{"no lamport", edit(func(m map[string]any) { delete(m, "lamport") }), "missing field lamport"},
		{"no cert", edit(func(m map[string]any) { delete(m, "cert") }), "missing field cert"},
		{"null cert", edit(func(m map[string]any) { m["cert"] = nil }), "missing field cert"},
		{"attempt 0", edit(func(m map[string]any) { m["attempt"] = 0 }), "attempt 0"},
		{"no lease", edit(func(m map[string]any) { delete(m, "lease_ms") }), "lease_ms 0 out of range"},
		{"lease too long", edit(func(m map[string]any) { m["lease_ms"] = MaxLeaseMS + 1 }), "out of range"},
		{"reason on claim", edit(func(m map[string]any) { m["reason"] = "infra" }), "only allowed on a release"},
		{"release without reason", edit(func(m map[string]any) { m["kind"] = "release"; m["lease_ms"] = 0 }), `release reason ""`},
		{"release with lease", edit(func(m map[string]any) { m["kind"] = "release"; m["reason"] = "infra" }), "a release has lease_ms 0"},
		{"unknown field", edit(func(m map[string]any) { m["priority"] = 1 }), `unknown field "priority"`},
		{"negative lamport", edit(func(m map[string]any) { m["lamport"] = -1 }), "claim message"},
		{"long slot", edit(func(m map[string]any) { m["slot"] = strings.Repeat("s", 300) }), "slot is 300 bytes"},
		{"trailing data", append(slicesClone(good), []byte(` {}`)...), "not a JSON object"},
		{"too large", append(slicesClone(good), bytes.Repeat([]byte(" "), MaxClaimBytes)...), "larger than"},
	}
	for _, c := range cases {
		_, err := DecodeClaim(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if errors.Is(err, ErrUnknownVersion) {
			t.Errorf("%s: refused as an unknown version, not as malformed", c.name)
		}
	}
	// A newer version with fields this build does not know is ignorable, not malformed.
	v2 := edit(func(m map[string]any) { m["v"] = 2; m["priority"] = 1; m["kind"] = "bid" })
	if _, err := DecodeClaim(v2); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("version 2: %v, want ErrUnknownVersion", err)
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

func TestValidateClaim(t *testing.T) {
	f := newClaimFixture(t)
	good := f.msg(t)
	otherLabKey, _, _ := crypto.GenerateEd25519Key(nil)
	otherLab, _ := attest.NewLab(otherLabKey)
	stranger := newPeer(t)

	with := func(fn func(*ClaimMessage)) []byte {
		m := *good
		fn(&m)
		return encode(t, &m)
	}
	cases := []struct {
		name string
		data []byte
		from string
		now  time.Time
		want Validation
	}{
		{"valid", encode(t, good), f.peer, f.now, Validation{Verdict: Accept}},
		{"sender is not peer_id", encode(t, good), stranger, f.now, Validation{Reject, ClaimReasonSenderMismatch}},
		{"cert of another node", with(func(m *ClaimMessage) {
			m.PeerID = stranger
		}), stranger, f.now, Validation{Reject, ClaimReasonCertNotSender}},
		{"no certificate, only a claimed lab", with(func(m *ClaimMessage) { m.Cert = json.RawMessage(`{"payload":"","payloadType":"x","signatures":[]}`) }),
			f.peer, f.now, Validation{Reject, ClaimReasonBadCert}},
		{"untrusted lab", with(func(m *ClaimMessage) {
			m.Cert = f.certFor(t, otherLab, f.peer, f.now.Add(-time.Hour), 24*time.Hour)
			m.Lab = otherLab.ID
		}), f.peer, f.now, Validation{Reject, ClaimReasonUnknownLab}},
		{"lab field lies", with(func(m *ClaimMessage) { m.Lab = otherLab.ID }), f.peer, f.now, Validation{Reject, ClaimReasonLabMismatch}},
		{"expired cert", encode(t, good), f.peer, f.now.Add(48 * time.Hour), Validation{Reject, ClaimReasonCertExpired}},
		{"cert not yet valid", encode(t, good), f.peer, f.now.Add(-48 * time.Hour), Validation{Ignore, ClaimReasonCertNotYetValid}},
		{"malformed", []byte(`{"v":1}`), f.peer, f.now, Validation{Reject, ClaimReasonMalformed}},
		{"too large", bytes.Repeat([]byte("x"), MaxClaimBytes+1), f.peer, f.now, Validation{Reject, ClaimReasonTooLarge}},
		{"unknown version", []byte(`{"v":9,"kind":"future"}`), f.peer, f.now, Validation{Ignore, ClaimReasonUnknownVersion}},
	}
	for _, c := range cases {
		if got := ValidateClaim(c.data, c.from, f.trust, c.now); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	// A tampered certificate (lab signature broken) is refused.
	bad := bytes.Replace(f.cert, []byte(`"sig":"`), []byte(`"sig":"AAAA`), 1)
	if bytes.Equal(bad, f.cert) {
		t.Fatal("fixture: no signature to tamper with")
	}
	if got := ValidateClaim(with(func(m *ClaimMessage) { m.Cert = bad }), f.peer, f.trust, f.now); got.Verdict != Reject {
		t.Errorf("tampered cert: %+v, want reject", got)
	}
	// Its lab retired from the network: from then on, refused; before, accepted.
	labID, _ := f.trust.LabByName(f.lab.ID)
	f.trust.RetireLab(labID, f.now)
	if got := ValidateClaim(encode(t, good), f.peer, f.trust, f.now); got != (Validation{Reject, ClaimReasonLabRetired}) {
		t.Errorf("lab retired: %+v", got)
	}
	if got := ValidateClaim(encode(t, good), f.peer, f.trust, f.now.Add(-time.Second)); got.Verdict != Accept {
		t.Errorf("before the lab retired: %+v", got)
	}
	f.trust.RetireLab(labID, time.Time{})
	// Revoked node.
	rev, err := f.lab.Revoke([]string{f.peer}, nil, f.now.Add(-time.Minute), "lost")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.trust.AddRevocation(rev); err != nil {
		t.Fatal(err)
	}
	if got := ValidateClaim(encode(t, good), f.peer, f.trust, f.now); got != (Validation{Reject, ClaimReasonCertRevoked}) {
		t.Errorf("revoked: %+v", got)
	}
}

func BenchmarkValidateClaim(b *testing.B) {
	f := newClaimFixture(b)
	data := encode(b, f.msg(b))
	for b.Loop() {
		if v := ValidateClaim(data, f.peer, f.trust, f.now); v.Verdict != Accept {
			b.Fatal(v)
		}
	}
}

func FuzzDecodeClaim(f *testing.F) {
	fx := newClaimFixture(f)
	f.Add(encode(f, fx.msg(f)))
	rel := fx.msg(f)
	rel.Kind, rel.LeaseMS, rel.Reason = ClaimKindRelease, 0, ReleaseShutdown
	f.Add(encode(f, rel))
	rel.Reason = ReleaseAwaitingKey
	f.Add(encode(f, rel))
	f.Add([]byte(`{"v":2,"kind":"bid"}`))
	f.Add([]byte(`{"v":1,"kind":"claim","campaign":"c","slot":"s","peer_id":"p","lab":"l","lamport":1,"lease_ms":1,"attempt":1,"cert":{}}`))
	f.Add([]byte(`{"v":1,"v":1}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeClaim(data)
		if err != nil {
			if m != nil {
				t.Fatal("message returned with an error")
			}
			return
		}
		// What decodes re-encodes, and decodes to the same message.
		b, err := EncodeClaim(m)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		m2, err := DecodeClaim(b)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		b2, _ := EncodeClaim(m2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("not stable:\n%s\n%s", b, b2)
		}
		ValidateClaim(data, m.PeerID, fx.trust, fx.now) // must not panic
	})
}

package attest

import (
	"strings"
	"testing"
	"time"
)

func TestCheckSigningChain(t *testing.T) {
	f := newFixture(t)
	_, otherID := newNode(t)
	otherCert, err := f.lab.Certify(otherID, t0.Add(-time.Hour), 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger := newFixture(t) // a lab f.trust does not list
	strangerCert, err := stranger.lab.Certify(f.nodeID, t0.Add(-time.Hour), 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	revoked := NewTrustStore()
	if _, err := revoked.AddLab("acme", f.lab.Pub); err != nil {
		t.Fatal(err)
	}
	rev, err := f.lab.Revoke([]string{f.nodeID}, nil, t0.Add(-time.Minute), "stolen")
	if err != nil {
		t.Fatal(err)
	}
	if err := revoked.AddRevocation(rev); err != nil {
		t.Fatal(err)
	}
	direct := NewTrustStore()
	if _, err := direct.AddNode("n", mustRaw(t, f)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cert   *NodeCert
		trust  *TrustStore
		at     time.Time
		want   Reason
		detail string
	}{
		{"valid", f.cert, f.trust, t0, "", ""},
		{"valid, no trust file", f.cert, nil, t0, "", ""},
		{"cert for another node", otherCert, f.trust, t0, ReasonSignerMismatch, otherID},
		{"expired", f.cert, f.trust, f.cert.NotAfter, ReasonCertExpired, "expired at"},
		{"not yet valid", f.cert, f.trust, f.cert.NotBefore.Add(-time.Second), ReasonCertNotYetValid, "valid from"},
		{"lab not trusted", strangerCert, f.trust, t0, ReasonUnknownLab, stranger.lab.ID},
		{"untrusted lab, no trust file", strangerCert, nil, t0, "", ""},
		{"revoked", f.cert, revoked, t0, ReasonCertRevoked, "revoked"},
		{"no cert", nil, f.trust, t0, ReasonUnknownNode, "no node certificate"},
		{"no cert, no trust", nil, nil, t0, ReasonUnknownNode, "lab certify"},
		{"no cert, trusted directly", nil, direct, t0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSigningChain(f.node, tc.cert, tc.trust, tc.at)
			if ReasonOf(err) != tc.want || (tc.want == "") != (err == nil) {
				t.Fatalf("CheckSigningChain: %v, want reason %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("error %q does not say %q", err, tc.detail)
			}
		})
	}
}

func mustRaw(t *testing.T, f *fixture) []byte {
	t.Helper()
	raw, err := f.node.GetPublic().Raw()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

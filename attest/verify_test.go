package attest

import (
	"testing"
	"time"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	f := newFixture(t)
	env, id, err := func() ([]byte, string, error) { e, i := f.signRun(t, 0, "sub", 0.9); return e, i, nil }()
	if err != nil {
		t.Fatal(err)
	}
	v, err := Verify(env, f.trust, t0)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if v.ID != id || id != EnvelopeID(env) {
		t.Errorf("ID %s, Sign said %s", v.ID, id)
	}
	if !v.Counts || v.Run == nil || v.Run.Slot.Seed != 0 || *v.Run.Score != 0.9 {
		t.Errorf("run not decoded: %+v", v)
	}
	if v.Node != f.nodeID || v.Lab != f.lab.ID || v.Principal() != f.lab.ID {
		t.Errorf("signer %s/%s, want %s/%s", v.Node, v.Lab, f.nodeID, f.lab.ID)
	}
	if v.Statement.SubmissionDigest() != sha("sub") {
		t.Errorf("submission digest %q", v.Statement.SubmissionDigest())
	}
	// The clock decides the window.
	if _, err := Verify(env, f.trust, t0.Add(60*24*time.Hour)); ReasonOf(err) != ReasonCertExpired {
		t.Errorf("after expiry: %v", err)
	}
}

package protocol

import (
	"strings"
	"testing"
)

// ledger.limits: absent (and "any") keeps a document's hash and counts runs whatever their
// limits; "enforced" turns attest.AcceptPolicy.RequireEnforcedLimits on; anything else is
// refused, naming the values.
func TestNetworkDocLimitsPolicy(t *testing.T) {
	d, _ := signedTestDoc(t, "a", "b")
	before := d.Hash()
	if d.AcceptPolicy().RequireEnforcedLimits {
		t.Fatal("a document without ledger.limits requires enforced limits")
	}
	d.Ledger.Limits = LimitsAny
	if d.Hash() != before {
		t.Fatal(`ledger.limits "any" changed the document's hash`)
	}
	d.Ledger.Limits = LimitsEnforced
	if d.Hash() == before || !d.AcceptPolicy().RequireEnforcedLimits {
		t.Fatal(`ledger.limits "enforced": same hash, or the policy is off`)
	}
	again, err := ParseNetworkDoc(d.Canonical())
	if err != nil || !again.AcceptPolicy().RequireEnforcedLimits {
		t.Fatalf("round trip: %v", err)
	}
	_, err = ParseNetworkDoc([]byte(`{"version":1,"network":"airs","ledger":{"limits":"sometimes"},"signatures":[]}`))
	if err == nil || !strings.Contains(err.Error(), "ledger.limits") {
		t.Fatalf("a bad ledger.limits: %v", err)
	}
}

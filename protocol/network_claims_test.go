package protocol

import (
	"strings"
	"testing"
)

// ledger.claims: absent (and "off") keeps a document's hash and leaves claim records
// optional; "required" turns attest.AcceptPolicy.RequireClaimRecords on where there are two
// labs to claim against each other; anything else is refused, naming the values.
func TestNetworkDocClaimsPolicy(t *testing.T) {
	d, _ := signedTestDoc(t, "a", "b")
	before := d.Hash()
	if d.RequiresClaimRecords() || d.AcceptPolicy().RequireClaimRecords {
		t.Fatal("a document without ledger.claims requires claim records")
	}
	d.Ledger.Claims = ClaimsOff
	if d.Hash() != before {
		t.Fatal(`ledger.claims "off" changed the document's hash`)
	}
	d.Ledger.Claims = ClaimsRequired
	if d.Hash() == before || !d.AcceptPolicy().RequireClaimRecords {
		t.Fatal(`ledger.claims "required": same hash, or the policy is off`)
	}
	again, err := ParseNetworkDoc(d.Canonical())
	if err != nil || !again.RequiresClaimRecords() {
		t.Fatalf("round trip: %v, requires %v", err, again != nil && again.RequiresClaimRecords())
	}
	one, _ := signedTestDoc(t, "solo")
	one.Ledger.Claims = ClaimsRequired
	if one.RequiresClaimRecords() {
		t.Fatal("a network of one lab requires claim records")
	}
	_, err = ParseNetworkDoc([]byte(`{"version":1,"network":"airs","ledger":{"claims":"sometimes"},"signatures":[]}`))
	if err == nil || !strings.Contains(err.Error(), "ledger.claims") {
		t.Fatalf("a bad ledger.claims: %v", err)
	}
}

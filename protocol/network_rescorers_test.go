package protocol

import (
	"strings"
	"testing"
)

// ledger.rescorers: absent (and "by-run-id") keeps a document's hash and lets every lab that
// re-scored a run vote; "drawn" turns attest.AcceptPolicy.RescorerDraw on, over every lab of
// the document and its replication, where there are two labs; anything else is refused,
// naming the values.
func TestNetworkDocRescorersPolicy(t *testing.T) {
	d, _ := signedTestDoc(t, "a", "b", "c")
	d.Ledger.Replication = 1
	before := d.Hash()
	if d.DrawsRescorers() || d.AcceptPolicy().RescorerDraw != nil {
		t.Fatal("a document without ledger.rescorers draws re-scorers")
	}
	d.Ledger.Rescorers = RescorersByRunID
	if d.Hash() != before {
		t.Fatal(`ledger.rescorers "by-run-id" changed the document's hash`)
	}
	d.Ledger.Rescorers = RescorersDrawn
	p := d.AcceptPolicy()
	if d.Hash() == before || p.RescorerDraw == nil {
		t.Fatal(`ledger.rescorers "drawn": same hash, or the policy is off`)
	}
	if len(p.RescorerDraw.Labs) != 3 || p.RescorerDraw.Replication != 1 {
		t.Fatalf("draw %+v: want the document's 3 labs and replication 1", p.RescorerDraw)
	}
	again, err := ParseNetworkDoc(d.Canonical())
	if err != nil || !again.DrawsRescorers() {
		t.Fatalf("round trip: %v, draws %v", err, again != nil && again.DrawsRescorers())
	}
	one, _ := signedTestDoc(t, "solo")
	one.Ledger.Rescorers = RescorersDrawn
	if one.DrawsRescorers() {
		t.Fatal("a network of one lab draws re-scorers")
	}
	_, err = ParseNetworkDoc([]byte(`{"version":1,"network":"airs","ledger":{"rescorers":"random"},"signatures":[]}`))
	if err == nil || !strings.Contains(err.Error(), "ledger.rescorers") {
		t.Fatalf("a bad ledger.rescorers: %v", err)
	}
}

// NewNetworkRules, the rules `evalmesh network create` and the demo network both write,
// turns on every rule against a dishonest trusted lab, overriding a policy that turned one
// off, and leaves the caller's fields alone.
func TestNewNetworkRules(t *testing.T) {
	d, _ := signedTestDoc(t, "a", "b", "c")
	d.Ledger.Replication, d.Ledger.Limits = 2, LimitsEnforced
	d.Ledger.Witnesses, d.Ledger.Misconduct = WitnessesOff, MisconductRecord
	NewNetworkRules(&d.Ledger)
	got, err := ParseNetworkDoc(d.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if !got.RequiresWitness() || got.Ledger.Misconduct != "" || !got.RequiresClaimRecords() || !got.DrawsRescorers() ||
		got.Ledger.Caps == nil || *got.Ledger.Caps != DefaultCaps {
		t.Fatalf("ledger %+v: want witnesses required, misconduct set aside, claim records required, re-scorers drawn, the default caps", got.Ledger)
	}
	if got.Ledger.Replication != 2 || got.Ledger.Limits != LimitsEnforced || got.Ledger.Audits != nil {
		t.Fatalf("ledger %+v: the caller's replication, limits and audits changed", got.Ledger)
	}
}

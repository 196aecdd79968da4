package protocol

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// ledger.caps: absent (and {} or zeros) keeps a document's hash and sets no cap; set, it
// becomes the acceptance policy's per-lab caps; a negative cap is refused, naming the field.
func TestNetworkDocCaps(t *testing.T) {
	d, _ := signedTestDoc(t, "a", "b")
	before := d.Hash()
	if p := d.AcceptPolicy(); p.MaxAgentsPerLab != 0 || p.MaxCampaignsPerLab != 0 {
		t.Fatalf("a document without ledger.caps caps labs: %+v", p)
	}
	d.Ledger.Caps = &LedgerCaps{}
	if d.Hash() != before {
		t.Fatal("ledger.caps {} changed the document's hash")
	}
	d.Ledger.Caps = &LedgerCaps{AgentsPerLab: 3, CampaignsPerLab: 7}
	if d.Hash() == before {
		t.Fatal("ledger.caps set: the hash did not change")
	}
	if p := d.AcceptPolicy(); p.MaxAgentsPerLab != 3 || p.MaxCampaignsPerLab != 7 {
		t.Fatalf("policy %+v: want caps 3 agents, 7 campaigns", p)
	}
	again, err := ParseNetworkDoc(d.Canonical())
	if err != nil || again.Ledger.Caps == nil || *again.Ledger.Caps != (LedgerCaps{3, 7}) {
		t.Fatalf("round trip: %v, %+v", err, again)
	}
	if !strings.Contains(string(d.Canonical()), `"caps":{"agents_per_lab":3,"campaigns_per_lab":7}`) {
		t.Fatalf("canonical form %s", d.Canonical())
	}
	_, err = ParseNetworkDoc([]byte(`{"version":1,"network":"airs","ledger":{"caps":{"agents_per_lab":-1}},"signatures":[]}`))
	if err == nil || !strings.Contains(err.Error(), "ledger.caps") {
		t.Fatalf("a negative cap: %v", err)
	}
	_, err = ParseNetworkDoc([]byte(`{"version":1,"network":"airs","ledger":{"caps":{"runs_per_lab":5}},"signatures":[]}`))
	if err == nil || !strings.Contains(err.Error(), "runs_per_lab") {
		t.Fatalf("an unknown cap: %v", err)
	}
}

// NamesOf hands each campaign's agent spec CIDs to the ledger's windows, which the caps
// count.
func TestNamesOfCampaignAgents(t *testing.T) {
	n := NamesOf([]LedgerCampaign{{ID: "c", Lab: "lab", Created: time.Unix(0, 0), Agents: map[string]string{"cid-b": "b", "cid-a": "a"}}})
	if got := n.Windows["c"].Agents; !slices.Equal(got, []string{"cid-a", "cid-b"}) {
		t.Fatalf("window agents %v", got)
	}
}

package protocol

import (
	"strings"
	"testing"
)

// ledger.audits: absent keeps the hash of a document without the field and turns audits
// off; present with the defaults, however written, is one document (audits on, another
// hash); another rate or "hold" changes it and reaches AuditRate / UnauditedCounts; a rate
// outside [0, 1] or an unknown policy is refused naming the field.
func TestNetworkDocAudits(t *testing.T) {
	d := testDoc(t)
	if strings.Contains(string(d.Canonical()), "audits") || d.AuditRate() != DefaultAuditRate || !d.UnauditedCounts() {
		t.Fatalf("default audits: %s, rate %v", d.Canonical(), d.AuditRate())
	}
	with := func(v string) string {
		return strings.Replace(string(d.Canonical()), `"replication":1`, `"replication":1,"audits":`+v, 1)
	}
	if d.AuditsOn() || d.AcceptPolicy().Audits != nil {
		t.Fatal("a document without ledger.audits audits")
	}
	on, err := ParseNetworkDoc([]byte(with(`{}`)))
	if err != nil {
		t.Fatal(err)
	}
	if on.Hash() == d.Hash() || !on.AuditsOn() || on.AcceptPolicy().Audits == nil || on.AuditRate() != DefaultAuditRate || !on.UnauditedCounts() {
		t.Fatalf("audits {}: hash changed %v, on %v, rate %v", on.Hash() != d.Hash(), on.AuditsOn(), on.AuditRate())
	}
	for _, same := range []string{`{"rate":0.02}`, `{"unaudited":"count"}`, `{"rate":0.02,"unaudited":"count"}`} {
		got, err := ParseNetworkDoc([]byte(with(same)))
		if err != nil {
			t.Fatalf("%s: %v", same, err)
		}
		if got.Hash() != on.Hash() {
			t.Errorf("%s is not the same document as audits {}", same)
		}
	}
	got, err := ParseNetworkDoc([]byte(with(`{"rate":0.2,"unaudited":"hold"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash() == d.Hash() || got.AuditRate() != 0.2 || got.UnauditedCounts() || !got.AcceptPolicy().Audits.HoldUnaudited {
		t.Fatalf("rate 0.2, hold: hash unchanged %v, rate %v, unaudited counts %v", got.Hash() == d.Hash(), got.AuditRate(), got.UnauditedCounts())
	}
	if again, err := ParseNetworkDoc(got.Canonical()); err != nil || again.Hash() != got.Hash() {
		t.Fatalf("canonical form does not round-trip: %v", err)
	}
	// Above 1 is replication (every other lab re-runs each run from the number of other
	// labs on); above MaxAuditRate a slip of the decimal point, refused.
	if rep, err := ParseNetworkDoc([]byte(with(`{"rate":2}`))); err != nil || rep.AuditRate() != 2 {
		t.Fatalf("rate 2 (replication): %v, rate %v", err, rep.AuditRate())
	}
	for v, field := range map[string]string{`{"rate":20}`: "ledger.audits.rate", `{"rate":-0.1}`: "ledger.audits.rate", `{"unaudited":"drop"}`: "ledger.audits.unaudited"} {
		if _, err := ParseNetworkDoc([]byte(with(v))); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", v, err, field)
		}
	}
}

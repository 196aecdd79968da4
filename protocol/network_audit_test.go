package protocol

import (
	"strings"
	"testing"
)

// ledger.audits: the defaults, written or not, keep the hash of a document without the
// field; another rate or "hold" changes it and reaches AuditRate / UnauditedCounts; a rate
// outside [0, 1] or an unknown policy is refused naming the field.
func TestNetworkDocAudits(t *testing.T) {
	d := testDoc(t)
	if strings.Contains(string(d.Canonical()), "audits") || d.AuditRate() != DefaultAuditRate || !d.UnauditedCounts() {
		t.Fatalf("default audits: %s, rate %v", d.Canonical(), d.AuditRate())
	}
	with := func(v string) string {
		return strings.Replace(string(d.Canonical()), `"replication":1`, `"replication":1,"audits":`+v, 1)
	}
	for _, same := range []string{`{}`, `{"rate":0.05}`, `{"unaudited":"count"}`, `{"rate":0.05,"unaudited":"count"}`} {
		got, err := ParseNetworkDoc([]byte(with(same)))
		if err != nil {
			t.Fatalf("%s: %v", same, err)
		}
		if got.Hash() != d.Hash() {
			t.Errorf("%s changed the document's hash", same)
		}
	}
	got, err := ParseNetworkDoc([]byte(with(`{"rate":0.2,"unaudited":"hold"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash() == d.Hash() || got.AuditRate() != 0.2 || got.UnauditedCounts() {
		t.Fatalf("rate 0.2, hold: hash unchanged %v, rate %v, unaudited counts %v", got.Hash() == d.Hash(), got.AuditRate(), got.UnauditedCounts())
	}
	if again, err := ParseNetworkDoc(got.Canonical()); err != nil || again.Hash() != got.Hash() {
		t.Fatalf("canonical form does not round-trip: %v", err)
	}
	for v, field := range map[string]string{`{"rate":1.5}`: "ledger.audits.rate", `{"rate":-0.1}`: "ledger.audits.rate", `{"unaudited":"drop"}`: "ledger.audits.unaudited"} {
		if _, err := ParseNetworkDoc([]byte(with(v))); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", v, err, field)
		}
	}
}

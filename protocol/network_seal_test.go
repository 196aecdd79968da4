package protocol

import (
	"strings"
	"testing"

	"filippo.io/age"
)

// A lab's age recipient in the network document reaches its trust store; a document
// without recipients keeps its canonical form (no empty field appears), so its hash is the
// one older builds compute; a bad recipient is refused naming the lab.
func TestNetworkDocAgeRecipient(t *testing.T) {
	d := testDoc(t)
	if strings.Contains(string(d.Canonical()), "age_recipient") {
		t.Fatalf("an empty recipient is in the canonical form: %s", d.Canonical())
	}
	id, _ := age.GenerateX25519Identity()
	withR := strings.Replace(string(d.Canonical()), `"name":"acme"`, `"name":"acme","age_recipient":"`+id.Recipient().String()+`"`, 1)
	d2, err := ParseNetworkDoc([]byte(withR))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := d2.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	lab, ok := ts.LabByName("acme")
	if !ok || ts.LabRecipient(lab) != id.Recipient().String() {
		t.Fatalf("recipient of acme: %q", ts.LabRecipient(lab))
	}
	bad := strings.Replace(withR, id.Recipient().String(), "age1nope", 1)
	if _, err := ParseNetworkDoc([]byte(bad)); err == nil || !strings.Contains(err.Error(), `lab "acme": age_recipient`) {
		t.Fatalf("bad recipient: %v", err)
	}
}

package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"filippo.io/age"
)

const testBundle = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi"

// ledger.scorers: absent keeps the hash; set, it reaches the acceptance policy by lab ID,
// sorted, and round-trips; labs it names must be in the document with an age recipient,
// and a lab must be left to run.
func TestNetworkDocScorers(t *testing.T) {
	d, labs := signedTestDoc(t, "a", "b", "c")
	for i := range d.Labs {
		id, _ := age.GenerateX25519Identity()
		d.Labs[i].AgeRecipient = id.Recipient().String()
	}
	before := d.Hash()
	if d.AcceptPolicy().Scorers != nil || strings.Contains(string(d.Canonical()), "scorers") {
		t.Fatal("a document without ledger.scorers has scorers")
	}
	d.Ledger.Scorers = map[string][]string{}
	if d.Hash() != before {
		t.Fatal("an empty ledger.scorers changed the hash")
	}
	d.Ledger.Scorers = map[string][]string{testBundle: {"c", "b", "b"}}
	if d.Hash() == before {
		t.Fatal("ledger.scorers did not change the hash")
	}
	again, err := ParseNetworkDoc(d.File())
	if err != nil {
		t.Fatal(err)
	}
	if got := again.ScorersOf(testBundle); len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("scorers %v", got)
	}
	ids := again.AcceptPolicy().Scorers[testBundle]
	if len(ids) != 2 || !((ids[0] == labs["b"].ID && ids[1] == labs["c"].ID) || (ids[0] == labs["c"].ID && ids[1] == labs["b"].ID)) || ids[0] > ids[1] {
		t.Fatalf("policy scorers %v, want the IDs of b and c, sorted", ids)
	}
	for _, bad := range []struct {
		scorers map[string][]string
		want    string
	}{
		{map[string][]string{"not-a-cid": {"b"}}, "not a bundle CID"},
		{map[string][]string{testBundle: {}}, "no lab named"},
		{map[string][]string{testBundle: {"zed"}}, `lab "zed" is not in labs`},
		{map[string][]string{testBundle: {"a", "b", "c"}}, "no lab without its key is left to run it"},
	} {
		x := *again
		x.Ledger.Scorers = bad.scorers
		if _, err := ParseNetworkDoc(rawDoc(t, &x)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q", bad.scorers, err, bad.want)
		}
	}
	x := *again
	x.Labs = append([]NetworkLab(nil), again.Labs...)
	x.Labs[1].AgeRecipient = ""
	if _, err := ParseNetworkDoc(rawDoc(t, &x)); err == nil || !strings.Contains(err.Error(), "lists no age_recipient") {
		t.Errorf("a scorer without a recipient: %v", err)
	}
}

// rawDoc is d's fields as JSON, unchecked (File would refuse an invalid document).
func rawDoc(t *testing.T, d *NetworkDoc) []byte {
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

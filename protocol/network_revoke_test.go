package protocol

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
)

// docWithRevocation is a document of three labs and a revocation by one of them of a node
// of its own.
func docWithRevocation(t testing.TB) (*NetworkDoc, *attest.Revocation) {
	t.Helper()
	d := testDoc(t)
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := attest.NewLab(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.AddLab(NetworkLab{Name: "gamma", Key: base64.StdEncoding.EncodeToString(lab.Pub)}); err != nil {
		t.Fatal(err)
	}
	nodeKey, _, _ := crypto.GenerateEd25519Key(nil)
	node, _ := peer.IDFromPrivateKey(nodeKey)
	rev, err := lab.Revoke([]string{node.String()}, nil, time.Unix(1_800_000_000, 0), "key stolen")
	if err != nil {
		t.Fatal(err)
	}
	return d, rev
}

// The network document carries revocations the versioned way: absent, the hash is the old
// one; added, they change the hash, survive the canonical and file forms, and reach the
// trust store the document makes. A revocation by a lab outside the document, a forged
// one, or the same one twice is refused, naming it.
func TestNetworkDocRevocations(t *testing.T) {
	d, rev := docWithRevocation(t)
	before := d.Hash()
	if strings.Contains(string(d.Canonical()), "revocations") {
		t.Fatalf("a document without revocations has them in its canonical form: %s", d.Canonical())
	}
	if err := d.AddRevocation(rev.Raw()); err != nil {
		t.Fatal(err)
	}
	if d.Hash() == before {
		t.Fatal("adding a revocation left the hash unchanged")
	}
	again, err := ParseNetworkDoc(d.File())
	if err != nil || again.Hash() != d.Hash() {
		t.Fatalf("file form does not parse back to the same document: %v", err)
	}
	ts, err := again.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.Revocations(); len(got) != 1 || got[0].ID != rev.ID {
		t.Fatalf("trust store holds revocations %v, want %s", got, rev.ID)
	}
	if err := d.AddRevocation(rev.Raw()); err == nil || !strings.Contains(err.Error(), rev.ID) {
		t.Fatalf("the same revocation twice: %v", err)
	}
	_, rev2 := docWithRevocation(t)
	if err := d.AddRevocation(rev2.Raw()); err == nil || !strings.Contains(err.Error(), "not a lab of the document") {
		t.Fatalf("a revocation by a lab outside the document: %v", err)
	}
	forged := strings.Replace(string(rev.Raw()), `"sig":"`, `"sig":"AA`, 1)
	if err := d.AddRevocation([]byte(forged)); err == nil {
		t.Fatal("a revocation with a broken signature was taken")
	}
}

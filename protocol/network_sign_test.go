package protocol

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/attest"
)

func newTestLab(t *testing.T) *attest.Lab {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := attest.NewLab(k)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// signedTestDoc is a document of the named labs (fresh keys) and the labs by name.
func signedTestDoc(t *testing.T, names ...string) (*NetworkDoc, map[string]*attest.Lab) {
	t.Helper()
	d, err := ParseNetworkDoc([]byte(`{"version":1,"network":"airs","signatures":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	labs := map[string]*attest.Lab{}
	for _, n := range names {
		labs[n] = newTestLab(t)
		if err := d.AddLab(NetworkLab{Name: n, Key: base64.StdEncoding.EncodeToString(labs[n].Pub)}); err != nil {
			t.Fatal(err)
		}
	}
	return d, labs
}

// The canonical form of a document without signatures or retirements is the one documents
// had before either existed: heads keep announcing the same hash.
func TestNetworkDocCanonicalUnchangedBySignatures(t *testing.T) {
	const key = "8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno="
	const want = `{"version":1,"network":"airs","labs":[{"name":"acme","key":"` + key + `"}],"ledger":{"worst":"population","bootstrap_rounds":100,"replication":1,"executors":["container"]}}`
	plain, err := ParseNetworkDoc([]byte(`{"version":1,"network":"airs","labs":[{"name":"acme","key":"` + key + `"}],"ledger":{"replication":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(plain.Canonical()); got != want {
		t.Fatalf("canonical form moved:\n got %s\nwant %s", got, want)
	}
	signed, err := ParseNetworkDoc([]byte(`{"version":1,"network":"airs","labs":[{"name":"acme","key":"` + key + `"}],"ledger":{"replication":1},"signatures":[{"lab":"acme","sig":"AAAA"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if signed.Hash() != plain.Hash() || len(signed.Signatures) != 1 {
		t.Fatalf("signatures changed the hash (%s, %s) or were lost (%v)", signed.Hash(), plain.Hash(), signed.Signatures)
	}
	if plain.Signatures != nil {
		t.Fatalf("a document without a signatures field reads as having one: %v", plain.Signatures)
	}
	if strings.Contains(string(plain.File()), "signatures") {
		t.Fatalf("the file of an unsigned document gained a signatures field:\n%s", plain.File())
	}
	back, err := ParseNetworkDoc(signed.File())
	if err != nil || back.Hash() != plain.Hash() || len(back.Signatures) != 1 || back.Signatures[0] != signed.Signatures[0] {
		t.Fatalf("file form does not round-trip: %v %+v", err, back)
	}
}

func TestNetworkDocMajority(t *testing.T) {
	d, labs := signedTestDoc(t, "acme", "beta", "gamma")
	if r := d.SignatureReport(); r.Majority || r.Needed != 2 || len(r.Missing) != 3 {
		t.Fatalf("unsigned: %+v", r)
	}
	if err := d.Sign("acme", labs["acme"]); err != nil {
		t.Fatal(err)
	}
	// The same lab signing again counts once.
	d.Signatures = append(d.Signatures, d.Signatures[0])
	if err := d.Sign("acme", labs["acme"]); err != nil {
		t.Fatal(err)
	}
	d.Signatures = append(d.Signatures, NetworkSignature{Lab: "acme", Sig: d.Signatures[0].Sig})
	if signers, ok := d.SignedByMajority(); ok || len(signers) != 1 {
		t.Fatalf("one lab signing twice: signers %v, majority %v", signers, ok)
	}
	// A key not in the document: refused by Sign, ignored when written in by hand.
	stranger := newTestLab(t)
	if err := d.Sign("beta", stranger); err == nil {
		t.Fatal("Sign accepted a key that is not beta's")
	}
	sig, _ := stranger.Key.Sign(d.SignedBytes())
	d.Signatures = append(d.Signatures,
		NetworkSignature{Lab: "beta", Sig: base64.StdEncoding.EncodeToString(sig)},
		NetworkSignature{Lab: "mallory", Sig: base64.StdEncoding.EncodeToString(sig)})
	r := d.SignatureReport()
	if r.Majority || len(r.Signers) != 1 || len(r.Ignored) != 3 {
		t.Fatalf("stranger's signatures: %+v", r)
	}
	if err := d.Sign("gamma", labs["gamma"]); err != nil {
		t.Fatal(err)
	}
	if signers, ok := d.SignedByMajority(); !ok || strings.Join(signers, ",") != "acme,gamma" {
		t.Fatalf("two of three: signers %v, majority %v", signers, ok)
	}
	// Signatures over an older version of the document do not verify on the new one.
	old := d.Signatures
	if err := d.AddLab(NetworkLab{Name: "delta", Key: base64.StdEncoding.EncodeToString(newTestLab(t).Pub)}); err != nil {
		t.Fatal(err)
	}
	if d.Signatures == nil || len(d.Signatures) != 0 {
		t.Fatalf("an edit kept the signatures: %v", d.Signatures)
	}
	d.Signatures = old
	if r := d.SignatureReport(); r.Majority || len(r.Signers) != 0 {
		t.Fatalf("signatures over the older document counted: %+v", r)
	}
}

func TestNetworkDocMajorityWithRetiredLabs(t *testing.T) {
	d, labs := signedTestDoc(t, "acme", "beta", "gamma", "delta")
	if err := d.RetireLab("delta", time.Date(2026, 3, 1, 12, 0, 0, 500, time.FixedZone("x", 3600))); err != nil {
		t.Fatal(err)
	}
	if l, _ := d.Lab("delta"); l.Retired == nil || !l.Retired.Equal(time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)) || l.Retired.Location() != time.UTC {
		t.Fatalf("retired time not UTC whole seconds: %v", l.Retired)
	}
	if err := d.RetireLab("delta", time.Now()); err == nil {
		t.Fatal("retired twice")
	}
	for _, n := range []string{"acme", "delta"} {
		if err := d.Sign(n, labs[n]); err != nil {
			t.Fatal(err)
		}
	}
	// Three active labs: two must sign; the retired lab's signature does not count.
	r := d.SignatureReport()
	if r.Majority || r.Needed != 2 || len(r.Signers) != 1 || len(r.Ignored) != 1 || strings.Join(r.Missing, ",") != "beta,gamma" {
		t.Fatalf("acme and retired delta: %+v", r)
	}
	if err := d.Sign("beta", labs["beta"]); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.SignedByMajority(); !ok {
		t.Fatalf("acme and beta of three active: %+v", d.SignatureReport())
	}
	// The retirement is in the hash (the document changed) and survives the file.
	back, err := ParseNetworkDoc(d.File())
	if err != nil || back.Hash() != d.Hash() {
		t.Fatal(err)
	}
	if _, ok := back.SignedByMajority(); !ok {
		t.Fatal("signatures did not survive the file form")
	}
	ts, err := back.TrustStore()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := ts.LabByName("delta")
	bl, _ := back.Lab("delta")
	if at, ok := ts.LabRetired(id); !ok || !at.Equal(*bl.Retired) {
		t.Fatalf("trust store: delta retired %v %v", at, ok)
	}
}

// A campaign of a retired lab counts when it was created before the retirement (its runs
// stay in the ledger), not when created at or after it.
func TestCampaignOfRetiredLab(t *testing.T) {
	lab := newCampaignLab(t)
	trust := trustStoreOf(t, lab)
	trust.RetireLab(lab.ID, campaignT0.Add(time.Hour))
	early, _, err := SignCampaign(lab, campaignFixture(1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyCampaign(early, trust, campaignOpts(campaignT0.Add(time.Minute))); err != nil {
		t.Fatalf("campaign created before the retirement: %v", err)
	}
	late := campaignFixture(1, 1, 1)
	late.Created = campaignT0.Add(time.Hour)
	env, _, err := SignCampaign(lab, late)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyCampaign(env, trust, campaignOpts(late.Created)); CampaignReasonOf(err) != CampaignUnknownLab || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("campaign created at the retirement: %v", err)
	}
}

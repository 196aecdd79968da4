package attest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

const grantBundle = "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi"

func TestGrantSignVerifyOpen(t *testing.T) {
	f := newFixture(t)
	beta, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	dataKey, _ := age.GenerateX25519Identity()
	betaLab := "lab:beta0000000000000000000000000000000000000000000000000"
	env, id, err := NewGrant(f.node, f.cert, grantBundle, betaLab, beta.Recipient().String(), dataKey.String(), t0)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VerifyWith(env, f.trust, VerifyOptions{AtClaimedTime: true})
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != id || v.Grant == nil || v.Counts || v.Grant.Lab != betaLab || v.Grant.GrantedBy != f.lab.ID || v.Grant.Bundle != grantBundle {
		t.Fatalf("verified grant %+v counts %v", v.Grant, v.Counts)
	}
	if at, ok := v.ClaimedTime(); !ok || !at.Equal(t0) {
		t.Fatalf("claimed time %v %v", at, ok)
	}
	got, err := OpenGrant(v.Grant, beta)
	if err != nil || got != dataKey.String() {
		t.Fatalf("opened %q, %v", got, err)
	}
	if _, err := OpenGrant(v.Grant, other); err == nil {
		t.Fatal("a grant opened with another lab's identity")
	}
	if strings.Contains(string(env), dataKey.String()) {
		t.Fatal("the data key is in the grant in the clear")
	}
	// A grant from a lab the trust file does not list is refused.
	if _, err := VerifyWith(env, NewTrustStore(), VerifyOptions{AtClaimedTime: true}); ReasonOf(err) != ReasonUnknownLab {
		t.Fatalf("untrusted granting lab: %v", err)
	}
	// Outside the granting node's certificate window it is refused like a run.
	late, _, err := NewGrant(f.node, f.cert, grantBundle, betaLab, beta.Recipient().String(), dataKey.String(), t0.Add(60*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWith(late, f.trust, VerifyOptions{AtClaimedTime: true}); ReasonOf(err) != ReasonCertExpired {
		t.Fatalf("grant after the certificate expired: %v", err)
	}
}

func TestGrantSignerMustBeGranter(t *testing.T) {
	f := newFixture(t)
	beta, _ := age.GenerateX25519Identity()
	dk, _ := age.GenerateX25519Identity()
	g := GrantPredicate{Bundle: grantBundle, Lab: "lab:x", Recipient: beta.Recipient().String(), Key: "YWJj",
		Node: "12D3KooWSomeoneElse", GrantedBy: f.lab.ID, Time: t0}
	d, _ := bundleDigest(grantBundle)
	stmt, err := NewStatement([]Subject{{Name: grantBundle, Digest: map[string]string{"sha256": d}}}, PredicateGrantV1, g)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := Sign(f.node, f.cert, stmt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWith(env, f.trust, VerifyOptions{AtClaimedTime: true}); ReasonOf(err) != ReasonPredicateSigner {
		t.Fatalf("a grant naming another node: %v", err)
	}
	_ = dk
}

func TestDecodeGrantRefusals(t *testing.T) {
	r, _ := age.GenerateX25519Identity()
	d, _ := bundleDigest(grantBundle)
	good := GrantPredicate{Bundle: grantBundle, Lab: "lab:x", Recipient: r.Recipient().String(), Key: "YWJj", Node: "n", GrantedBy: "lab:y", Time: t0}
	for name, tc := range map[string]struct {
		edit    func(*GrantPredicate)
		subject string
		want    string
	}{
		"ok":              {func(*GrantPredicate) {}, d, ""},
		"bundle not cid":  {func(g *GrantPredicate) { g.Bundle = "nope" }, d, "not a CID"},
		"wrong subject":   {func(*GrantPredicate) {}, strings.Repeat("0", 64), "one subject"},
		"bad recipient":   {func(g *GrantPredicate) { g.Recipient = "age1bad" }, d, "recipient"},
		"lab not lab id":  {func(g *GrantPredicate) { g.Lab = "beta" }, d, "not a lab ID"},
		"no time":         {func(g *GrantPredicate) { g.Time = time.Time{} }, d, "time"},
		"key not base64":  {func(g *GrantPredicate) { g.Key = "!!" }, d, "base64"},
		"key too large":   {func(g *GrantPredicate) { g.Key = strings.Repeat("A", maxWrappedKey+4) }, d, "bytes of base64"},
		"no granting lab": {func(g *GrantPredicate) { g.GrantedBy = "" }, d, "granted_by"},
	} {
		t.Run(name, func(t *testing.T) {
			g := good
			tc.edit(&g)
			stmt, err := NewStatement([]Subject{{Name: "b", Digest: map[string]string{"sha256": tc.subject}}}, PredicateGrantV1, g)
			if err != nil {
				t.Fatal(err)
			}
			_, err = DecodeGrant(stmt)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ve *VerifyError
			if err == nil || !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTrustFileAgeRecipient(t *testing.T) {
	f := newFixture(t)
	id, _ := age.GenerateX25519Identity()
	if err := f.trust.SetAgeRecipient(f.lab.ID, id.Recipient().String()); err != nil {
		t.Fatal(err)
	}
	b, err := f.trust.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTrust(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.LabRecipient(f.lab.ID) != id.Recipient().String() {
		t.Fatalf("recipient lost in the round trip:\n%s", b)
	}
	if got, ok := back.LabByName(f.labName); !ok || got != f.lab.ID {
		t.Fatalf("LabByName %q %v", got, ok)
	}
	bad := strings.Replace(string(b), id.Recipient().String(), "age1notarecipient", 1)
	if _, err := ParseTrust([]byte(bad)); err == nil || !strings.Contains(err.Error(), "age_recipient") {
		t.Fatalf("a bad recipient loaded: %v", err)
	}
}

// FuzzDecodeGrant: the grant decoder never panics, and what it accepts re-validates.
func FuzzDecodeGrant(f *testing.F) {
	r, _ := age.GenerateX25519Identity()
	d, _ := bundleDigest(grantBundle)
	g := GrantPredicate{Bundle: grantBundle, Lab: "lab:x", Recipient: r.Recipient().String(), Key: "YWJj", Node: "n", GrantedBy: "lab:y", Time: t0}
	stmt, _ := NewStatement([]Subject{{Name: "b", Digest: map[string]string{"sha256": d}}}, PredicateGrantV1, g)
	f.Add(stmt)
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"b","digest":{"sha256":"` + d + `"}}],"predicateType":"` + PredicateGrantV1 + `","predicate":{}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := DecodeGrant(b)
		if err != nil {
			return
		}
		if err := g.validate(); err != nil {
			t.Fatalf("accepted a grant that does not validate: %v", err)
		}
	})
}

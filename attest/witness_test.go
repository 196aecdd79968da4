package attest

import (
	"testing"
	"time"
)

// A witness record verifies as the node and lab that signed it, and one that names another
// node or lab than its signer is refused.
func TestWitnessVerifiesAsItsSigner(t *testing.T) {
	f := newFixture(t)
	trust := NewTrustStore()
	if _, err := trust.AddLab("lab0", f.lab.Pub); err != nil {
		t.Fatal(err)
	}
	campaign := EnvelopeID([]byte("campaign"))
	env, id, err := NewWitness(f.node, f.cert, campaign, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v, err := VerifyWith(env, trust, VerifyOptions{AtClaimedTime: true})
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != id || v.Witness == nil || v.Witness.Campaign != campaign || v.Witness.Lab != f.lab.ID || v.Counts {
		t.Fatalf("verified %+v witness %+v", v, v.Witness)
	}
	d, _ := bundleDigest(campaign)
	st, err := NewStatement([]Subject{{Name: "campaign", Digest: map[string]string{"sha256": d}}}, PredicateWitnessV1,
		WitnessPredicate{Campaign: campaign, Node: "12D3KooWsomeoneelse", Lab: f.lab.ID, Time: t0.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWith(forged, trust, VerifyOptions{AtClaimedTime: true}); ReasonOf(err) != ReasonPredicateSigner {
		t.Fatalf("a witness naming another node: %v, want %s", err, ReasonPredicateSigner)
	}
}

func FuzzDecodeWitness(f *testing.F) {
	campaign := EnvelopeID([]byte("campaign"))
	d, _ := bundleDigest(campaign)
	stmt, _ := NewStatement([]Subject{{Name: "campaign", Digest: map[string]string{"sha256": d}}}, PredicateWitnessV1,
		WitnessPredicate{Campaign: campaign, Node: "n", Lab: "lab:x", Time: t0})
	f.Add(stmt)
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"c","digest":{"sha256":"` + d + `"}}],"predicateType":"` + PredicateWitnessV1 + `","predicate":{}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := DecodeWitness(b)
		if err != nil {
			return
		}
		if err := w.validate(); err != nil {
			t.Fatalf("accepted a witness that does not validate: %v", err)
		}
	})
}

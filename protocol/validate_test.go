package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
)

// attestNode is a node key with a certificate of lab.
type attestNode struct {
	key  crypto.PrivKey
	id   peer.ID
	cert *attest.NodeCert
}

func newAttestNode(t testing.TB, lab *attest.Lab) attestNode {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	n := attestNode{key: k, id: id}
	if lab != nil {
		if n.cert, err = lab.Certify(id.String(), campaignT0.Add(-24*time.Hour), 30*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// signRunFor signs a run attestation of slot by n (lab "" for a node without certificate).
func signRunFor(t testing.TB, n attestNode, lab string, slot attest.Slot, end time.Time) []byte {
	t.Helper()
	score := 0.5
	d := sha256.Sum256([]byte(slot.String()))
	p := attest.RunPredicate{
		Slot: slot, Node: n.id.String(), Lab: lab,
		Hardware: attest.Hardware{GPUModel: "none", Driver: "none"},
		Start:    end.Add(-time.Minute), End: end, WallSeconds: 60,
		Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy", Attempt: 1,
	}
	st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": hex.EncodeToString(d[:])},
		Annotations: map[string]any{attest.AnnotationRole: attest.RoleSubmission}}}, attest.PredicateRunV1, p)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := attest.Sign(n.key, n.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestValidateCampaignVerdicts(t *testing.T) {
	lab, stranger := newCampaignLab(t), newCampaignLab(t)
	trust := trustStoreOf(t, lab)
	good, _, err := SignCampaign(lab, campaignFixture(2, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	forged, _, _ := SignCampaign(stranger, campaignFixture(2, 1, 1))
	v2 := campaignFixture(1, 1, 1)
	v2.Lab, v2.Version = lab.ID, 2
	cases := []struct {
		name string
		data []byte
		now  time.Time
		want Validation
	}{
		{"good", good, campaignT0, Validation{Accept, "ok"}},
		{"untrusted lab", forged, campaignT0, Validation{Reject, "unknown_lab"}},
		{"tampered", bytes.Replace(good, []byte(`"payload":"ey`), []byte(`"payload":"eX`), 1), campaignT0, Validation{Reject, "bad_signature"}},
		{"garbage", []byte("{"), campaignT0, Validation{Reject, "malformed"}},
		{"expired", good, campaignT0.Add(100 * time.Hour), Validation{Ignore, "expired"}},
		{"from the future", good, campaignT0.Add(-time.Hour), Validation{Ignore, "not_yet_valid"}},
		{"unknown version", signRawCampaign(t, lab, v2.canonical()), campaignT0, Validation{Ignore, "unknown_version"}},
		{"too large", make([]byte, MaxCampaignSize+1), campaignT0, Validation{Reject, "too_large"}},
	}
	for _, tc := range cases {
		now := tc.now
		f := CampaignValidator(trust, "testnet", 0, func() time.Time { return now })
		if got := f("", tc.data); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Another network's campaign is refused.
	f := CampaignValidator(trust, "othernet", 0, func() time.Time { return campaignT0 })
	if got := f("", good); got != (Validation{Reject, "wrong_network"}) {
		t.Errorf("wrong network: %+v", got)
	}
}

func TestValidateAttestationVerdicts(t *testing.T) {
	lab, stranger := newCampaignLab(t), newCampaignLab(t)
	trust := trustStoreOf(t, lab)
	certified, uncertified, foreign := newAttestNode(t, lab), newAttestNode(t, nil), newAttestNode(t, stranger)
	slot := attest.Slot{Campaign: campaignTestCID("c"), Task: campaignTestCID("t"), Agent: campaignTestCID("a")}
	good := signRunFor(t, certified, lab.ID, slot, campaignT0)
	unknownCampaign := signRunFor(t, certified, lab.ID, attest.Slot{Campaign: campaignTestCID("other"), Task: slot.Task, Agent: slot.Agent}, campaignT0)
	cache, err := attest.NewCache(64)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := attest.NewStatement([]attest.Subject{{Name: "x", Digest: map[string]string{"sha256": hex.EncodeToString(make([]byte, 32))}}}, "https://example.com/other/v1", map[string]string{"a": "b"})
	notCounted, _, err := attest.Sign(certified.key, certified.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		want Validation
	}{
		{"good", good, Validation{Accept, "ok"}},
		{"no certificate", signRunFor(t, uncertified, "", slot, campaignT0), Validation{Reject, "unknown_node"}},
		{"certified by an untrusted lab", signRunFor(t, foreign, stranger.ID, slot, campaignT0), Validation{Reject, "unknown_lab"}},
		{"outside the certificate's window", signRunFor(t, certified, lab.ID, slot, campaignT0.Add(60*24*time.Hour)), Validation{Reject, "expired_certificate"}},
		{"tampered", bytes.Replace(good, []byte(`"sig":"`), []byte(`"sig":"AAAA`), 1), Validation{Reject, "bad_signature"}},
		{"garbage", []byte("not json"), Validation{Reject, "malformed_envelope"}},
		{"campaign not known yet", unknownCampaign, Validation{Ignore, "unknown_campaign"}},
		{"predicate that does not count", notCounted, Validation{Ignore, "not_counted"}},
		{"too large", make([]byte, MaxAttestationSize+1), Validation{Reject, "too_large"}},
	}
	for _, withCache := range []bool{false, true} {
		c := AttestationCheck{Trust: trust, KnownCampaign: func(id string) bool { return id == slot.Campaign }}
		if withCache {
			c.Cache = cache
		}
		f := AttestationValidator(c)
		for _, tc := range cases {
			if got := f("", tc.data); got != tc.want {
				t.Errorf("%s (cache %v): %+v, want %+v", tc.name, withCache, got, tc.want)
			}
		}
	}
}

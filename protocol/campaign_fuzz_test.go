package protocol

import (
	"bytes"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
)

// fuzzLab is a lab with a fixed key, so seed envelopes stay valid across runs.
func fuzzLab(f *testing.F) *attest.Lab {
	f.Helper()
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		f.Fatal(err)
	}
	lab, err := attest.NewLab(k)
	if err != nil {
		f.Fatal(err)
	}
	return lab
}

func fuzzSeeds(f *testing.F, lab *attest.Lab) (envelopes, bodies [][]byte) {
	f.Helper()
	for _, c := range []*Campaign{campaignFixture(1, 1, 1), campaignFixture(3, 2, 5)} {
		env, _, err := SignCampaign(lab, c)
		if err != nil {
			f.Fatal(err)
		}
		envelopes = append(envelopes, env)
		bodies = append(bodies, c.canonical())
	}
	mismatched := campaignFixture(1, 2, 1)
	mismatched.Lab, mismatched.Version = lab.ID, Version
	mismatched.Agents[0].Spec = campaignTestSpec("other").Canonical()
	bodies = append(bodies, mismatched.canonical(), []byte(`{"version":2}`), []byte(`{"version":1,"agents":null}`), []byte(`[]`))
	env, _ := lab.SignLabEnvelope(CampaignPayloadType, mismatched.canonical())
	envelopes = append(envelopes, env, []byte(`{"payloadType":"application/vnd.evalmesh.campaign+json","payload":"","signatures":[]}`), []byte(`{}`))
	return envelopes, bodies
}

// FuzzDecodeCampaign: the body decoder never panics, and what it accepts has one encoding:
// re-encoding a decoded body gives back exactly the input bytes.
func FuzzDecodeCampaign(f *testing.F) {
	_, bodies := fuzzSeeds(f, fuzzLab(f))
	for _, b := range bodies {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := DecodeCampaign(body)
		if err != nil {
			if CampaignReasonOf(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		if !bytes.Equal(c.canonical(), body) {
			t.Fatalf("accepted a non-canonical body:\n%s\nre-encodes as\n%s", body, c.canonical())
		}
		if _, err := c.check(DefaultMaxSlots); err == nil {
			if n := len(c.Slots()); n != len(c.Tasks)*len(c.Agents)*c.Seeds || n > DefaultMaxSlots {
				t.Fatalf("%d slots", n)
			}
		}
	})
}

// FuzzVerifyCampaign: envelope and body parsing together never panic; what is accepted has
// every agent spec hashing to its CID, at most MaxSlots slots, and its ID is the envelope's.
func FuzzVerifyCampaign(f *testing.F) {
	lab := fuzzLab(f)
	envelopes, _ := fuzzSeeds(f, lab)
	for _, e := range envelopes {
		f.Add(e)
	}
	trust := attest.NewTrustStore()
	if _, err := trust.AddLab("fuzz", lab.Pub); err != nil {
		f.Fatal(err)
	}
	o := CampaignVerifyOptions{Now: campaignT0, MaxSlots: 50, Network: "testnet"}
	f.Fuzz(func(t *testing.T, env []byte) {
		v, err := VerifyCampaign(env, trust, o)
		if err != nil {
			if CampaignReasonOf(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		if v.ID != attest.EnvelopeID(env) || v.Lab != lab.ID {
			t.Fatalf("id %s lab %s", v.ID, v.Lab)
		}
		if n := len(v.Campaign.Slots()); n > o.MaxSlots {
			t.Fatalf("%d slots over %d", n, o.MaxSlots)
		}
		for _, a := range v.Campaign.Agents {
			if agentspec.RawCID(a.Spec) != a.CID {
				t.Fatalf("agent %s accepted with a spec that hashes elsewhere", a.CID)
			}
		}
	})
}

// FuzzTopicValidators: the campaigns and attestations validators never panic on any bytes
// and always answer a known verdict with a reason; they accept only what verifies.
func FuzzTopicValidators(f *testing.F) {
	lab := fuzzLab(f)
	envelopes, _ := fuzzSeeds(f, lab)
	for _, e := range envelopes {
		f.Add(e)
	}
	trust := attest.NewTrustStore()
	if _, err := trust.AddLab("fuzz", lab.Pub); err != nil {
		f.Fatal(err)
	}
	node := newAttestNode(f, lab)
	run := signRunFor(f, node, lab.ID, attest.Slot{Campaign: campaignTestCID("c"), Task: campaignTestCID("t"), Agent: campaignTestCID("a")}, campaignT0)
	f.Add(run)
	now := func() time.Time { return campaignT0 }
	camp := CampaignValidator(trust, "testnet", 50, now)
	att := AttestationValidator(AttestationCheck{Trust: trust})
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, v := range map[string]Validation{"campaigns": camp("", data), "attestations": att("", data)} {
			if v.Verdict != Accept && v.Verdict != Reject && v.Verdict != Ignore || v.Reason == "" {
				t.Fatalf("%s: verdict %+v", name, v)
			}
		}
		if camp("", data).Verdict == Accept {
			if _, err := VerifyCampaign(data, trust, CampaignVerifyOptions{Now: campaignT0, MaxSlots: 50, Network: "testnet"}); err != nil {
				t.Fatalf("campaign validator accepted what VerifyCampaign refuses: %v", err)
			}
		}
		if att("", data).Verdict == Accept {
			if _, err := attest.VerifyWith(data, trust, attest.VerifyOptions{AtClaimedTime: true}); err != nil {
				t.Fatalf("attestation validator accepted what attest refuses: %v", err)
			}
		}
	})
}

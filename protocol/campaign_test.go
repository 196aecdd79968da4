package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
)

var campaignT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newCampaignLab(t testing.TB) *attest.Lab {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := attest.NewLab(k)
	if err != nil {
		t.Fatal(err)
	}
	return lab
}

func trustStoreOf(t testing.TB, labs ...*attest.Lab) *attest.TrustStore {
	t.Helper()
	ts := attest.NewTrustStore()
	for i, l := range labs {
		if _, err := ts.AddLab("lab"+string(rune('a'+i)), l.Pub); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

func campaignTestSpec(name string) *agentspec.Spec {
	return &agentspec.Spec{Name: name, Version: "1.0.0", Command: []string{"evalmesh", "agent", "echo"}}
}

// campaignTestCID is a syntactically valid CID standing for a task bundle.
func campaignTestCID(s string) string { return agentspec.RawCID([]byte(s)) }

func campaignFixture(tasks, agents, seeds int) *Campaign {
	c := &Campaign{Network: "testnet", Title: "a test campaign", Seeds: seeds, Replication: 1,
		Created: campaignT0, Deadline: campaignT0.Add(72 * time.Hour)}
	for i := range tasks {
		c.Tasks = append(c.Tasks, campaignTestCID("task"+string(rune('0'+i))))
	}
	for i := range agents {
		c.Agents = append(c.Agents, NewCampaignAgent(campaignTestSpec("agent"+string(rune('0'+i)))))
	}
	return c
}

func campaignOpts(now time.Time) CampaignVerifyOptions {
	return CampaignVerifyOptions{Now: now, Network: "testnet"}
}

func TestCampaignSignVerifyRoundTrip(t *testing.T) {
	lab := newCampaignLab(t)
	c := campaignFixture(3, 2, 4)
	env, id, err := SignCampaign(lab, c)
	if err != nil {
		t.Fatal(err)
	}
	if id != attest.EnvelopeID(env) || c.ID != id {
		t.Fatalf("id %s, c.ID %s, envelope ID %s", id, c.ID, attest.EnvelopeID(env))
	}
	v, err := VerifyCampaign(env, trustStoreOf(t, lab), campaignOpts(campaignT0.Add(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	if v.ID != id || v.Lab != lab.ID || v.LabName != "laba" || v.Campaign.Title != c.Title || v.Campaign.ID != id || v.Digest != sha256.Sum256(env) {
		t.Fatalf("verified %+v", v)
	}
	if !bytes.Equal(v.Campaign.canonical(), c.canonical()) {
		t.Fatal("decoded campaign differs from the signed one")
	}
	// The envelope is a plain DSSE envelope of the campaign payload type, keyid = lab ID.
	e, err := attest.DecodeEnvelope(env)
	if err != nil || e.PayloadType != CampaignPayloadType || e.KeyID != lab.ID {
		t.Fatalf("envelope %+v, %v", e, err)
	}
}

func TestCampaignSlotsOrderAndIDs(t *testing.T) {
	lab := newCampaignLab(t)
	c := campaignFixture(3, 2, 4)
	if _, _, err := SignCampaign(lab, c); err != nil {
		t.Fatal(err)
	}
	slots := c.Slots()
	if len(slots) != 24 {
		t.Fatalf("%d slots, want 3×2×4", len(slots))
	}
	// tasks outermost, then agents, then seeds.
	if s := slots[0]; s.Task != c.Tasks[0] || s.Agent != c.Agents[0].CID || s.Seed != 0 || s.Campaign != c.ID {
		t.Fatalf("first slot %+v", s)
	}
	if s := slots[5]; s.Task != c.Tasks[0] || s.Agent != c.Agents[1].CID || s.Seed != 1 {
		t.Fatalf("slot 5 %+v", s)
	}
	if s := slots[23]; s.Task != c.Tasks[2] || s.Agent != c.Agents[1].CID || s.Seed != 3 {
		t.Fatalf("last slot %+v", s)
	}
	ids := map[string]bool{}
	for _, s := range slots {
		ids[SlotID(s)] = true
	}
	if len(ids) != len(slots) {
		t.Fatalf("%d distinct slot IDs for %d slots", len(ids), len(slots))
	}
	// The ID is the documented hash, fixed for all time.
	s := attest.Slot{Campaign: "c", Task: "t", Agent: "a", Seed: 7}
	if got, want := SlotID(s), agentspec.RawCID([]byte(`{"agent":"a","campaign":"c","seed":7,"task":"t"}`)); got != want {
		t.Fatalf("SlotID %s, want %s", got, want)
	}
	// Verifying gives the same slots as signing.
	env, _, _ := SignCampaign(lab, c)
	v, err := VerifyCampaign(env, trustStoreOf(t, lab), campaignOpts(campaignT0))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Campaign.Slots(); len(got) != len(slots) || got[7] != slots[7] {
		t.Fatal("verified slots differ from signed slots")
	}
}

// signRawCampaign signs an arbitrary body as a campaign, bypassing SignCampaign's checks: what a
// buggy or hostile lab could publish.
func signRawCampaign(t *testing.T, lab *attest.Lab, body []byte) []byte {
	t.Helper()
	env, err := lab.SignLabEnvelope(CampaignPayloadType, body)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestCampaignRefusals(t *testing.T) {
	lab, other := newCampaignLab(t), newCampaignLab(t)
	trust := trustStoreOf(t, lab)
	good := func() *Campaign { c := campaignFixture(2, 2, 2); c.Lab = lab.ID; c.Version = Version; return c }
	signed := func(c *Campaign) []byte {
		env, _, err := SignCampaign(lab, c)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	mismatched := good()
	mismatched.Agents[1].Spec = campaignTestSpec("impostor").Canonical()
	nonCanonical := good()
	spaced, _ := json.MarshalIndent(nonCanonical, "", " ")
	forgedSig := signed(good())
	forgedSig = bytes.Replace(forgedSig, []byte(`"sig":"`), []byte(`"sig":"AAAA`), 1)
	// The other lab signs a body that names our lab: the keyid (the other lab) is unknown.
	otherLab := signRawCampaign(t, other, good().canonical())
	v2 := good()
	v2.Version = 2
	tooMany := good()
	unknownField := bytes.Replace(good().canonical(), []byte(`{"agents"`), []byte(`{"about":"x","agents"`), 1)
	dupTask := good()
	dupTask.Tasks[1] = dupTask.Tasks[0]
	badCID := good()
	badCID.Tasks[0] = "not-a-cid"
	badSpecTimes := good()
	badSpecTimes.Deadline = badSpecTimes.Created

	cases := []struct {
		name string
		env  []byte
		o    CampaignVerifyOptions
		want CampaignReason
	}{
		{"control: a trusted lab's good campaign", signed(good()), campaignOpts(campaignT0), ""},
		{"untrusted signer", signRawCampaign(t, other, func() []byte { c := good(); c.Lab = other.ID; return c.canonical() }()), campaignOpts(campaignT0), CampaignUnknownLab},
		{"other lab signs in our name", otherLab, campaignOpts(campaignT0), CampaignUnknownLab},
		{"bad signature", forgedSig, campaignOpts(campaignT0), CampaignBadSignature},
		{"expired", signed(good()), campaignOpts(campaignT0.Add(72 * time.Hour)), CampaignExpired},
		{"not yet valid", signed(good()), campaignOpts(campaignT0.Add(-time.Hour)), CampaignNotYetValid},
		{"wrong network", signed(good()), CampaignVerifyOptions{Now: campaignT0, Network: "othernet"}, CampaignWrongNetwork},
		{"agent spec does not hash to its cid", signRawCampaign(t, lab, mismatched.canonical()), campaignOpts(campaignT0), CampaignAgentMismatch},
		{"too many slots", signed(tooMany), CampaignVerifyOptions{Now: campaignT0, MaxSlots: 7}, CampaignTooManySlots},
		{"not canonical", signRawCampaign(t, lab, spaced), campaignOpts(campaignT0), CampaignMalformed},
		{"unknown version", signRawCampaign(t, lab, v2.canonical()), campaignOpts(campaignT0), CampaignUnknownVersion},
		{"unknown field", signRawCampaign(t, lab, unknownField), campaignOpts(campaignT0), CampaignMalformed},
		{"duplicate task", signRawCampaign(t, lab, dupTask.canonical()), campaignOpts(campaignT0), CampaignMalformed},
		{"task not a CID", signRawCampaign(t, lab, badCID.canonical()), campaignOpts(campaignT0), CampaignMalformed},
		{"deadline not after created", signRawCampaign(t, lab, badSpecTimes.canonical()), campaignOpts(campaignT0.Add(-time.Minute)), CampaignMalformed},
		{"not JSON", []byte("hello"), campaignOpts(campaignT0), CampaignMalformed},
		{"attestation payload type", signLabAs(t, lab, "application/vnd.in-toto+json", good().canonical()), campaignOpts(campaignT0), CampaignMalformed},
		{"oversized", bytes.Repeat([]byte(" "), MaxCampaignSize+1), campaignOpts(campaignT0), CampaignMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := VerifyCampaign(tc.env, trust, tc.o)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused a good campaign: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %+v, want %s", v.Campaign, tc.want)
			}
			if got := CampaignReasonOf(err); got != tc.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "campaign refused: ") {
				t.Fatalf("error %q does not say it is a refusal", err)
			}
		})
	}
}

func signLabAs(t *testing.T, lab *attest.Lab, payloadType string, body []byte) []byte {
	t.Helper()
	env, err := lab.SignLabEnvelope(payloadType, body)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestSignCampaignRefusesWhatReadersRefuse(t *testing.T) {
	lab := newCampaignLab(t)
	for name, mutate := range map[string]func(*Campaign){
		"no tasks":         func(c *Campaign) { c.Tasks = nil },
		"no seeds":         func(c *Campaign) { c.Seeds = 0 },
		"bad network":      func(c *Campaign) { c.Network = "Has/Slash" },
		"too many slots":   func(c *Campaign) { c.Seeds = DefaultMaxSlots },
		"other lab's name": func(c *Campaign) { c.Lab = newCampaignLab(t).ID },
		"empty title":      func(c *Campaign) { c.Title = " " },
	} {
		c := campaignFixture(2, 1, 1)
		mutate(c)
		if _, _, err := SignCampaign(lab, c); err == nil {
			t.Errorf("%s: signed", name)
		}
	}
}

func TestCampaignTimesAreNormalised(t *testing.T) {
	lab := newCampaignLab(t)
	c := campaignFixture(1, 1, 1)
	c.Created = campaignT0.In(time.FixedZone("x", 3600)).Add(123 * time.Millisecond)
	env, _, err := SignCampaign(lab, c)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := attest.DecodeEnvelope(env)
	if !bytes.Contains(e.Payload, []byte(`"created":"2026-12-01T12:00:00Z"`)) {
		t.Fatalf("payload %s", e.Payload)
	}
}

func TestCampaignSignedByAnotherTrustedLabInOurName(t *testing.T) {
	lab, other := newCampaignLab(t), newCampaignLab(t)
	c := campaignFixture(1, 1, 1)
	c.Lab, c.Version = lab.ID, Version
	env := signRawCampaign(t, other, c.canonical())
	_, err := VerifyCampaign(env, trustStoreOf(t, lab, other), campaignOpts(campaignT0))
	if CampaignReasonOf(err) != CampaignBadSignature {
		t.Fatalf("got %v, want bad_signature: lab %s may not sign for lab %s", err, other.ID, lab.ID)
	}
}

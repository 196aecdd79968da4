package protocol

import (
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
)

// Topic validators (docs/protocol.md, "Validation"). Each is a pure function of the message
// bytes, its author, the trust store and a time the caller passes in; the node registers
// one per topic with gossipsub. They are cheap (decode, signatures, certificates; nothing
// fetched) and answer Reject for what no honest peer would forward, Ignore for what is not
// usable here yet (unknown version, campaign not known yet, expired), Accept otherwise.

// ValidatorFunc validates one message of a topic. from is the message's author, whose
// signature gossipsub's StrictSign has already checked — not the neighbour that forwarded
// it. It must be safe for concurrent use.
type ValidatorFunc func(from peer.ID, data []byte) Validation

// Reasons shared by every topic's validator.
const (
	ReasonTooLarge = "too_large"
	ReasonAccepted = "ok"
)

var (
	validationOK       = Validation{Verdict: Accept, Reason: ReasonAccepted}
	validationTooLarge = Validation{Verdict: Reject, Reason: ReasonTooLarge}
)

// ValidateCampaign is the campaigns-topic verdict on data at opts.Now: VerifyCampaign, with
// unknown versions, expired and not-yet-valid campaigns ignored (a peer with another clock
// or a newer build is not misbehaving) and everything else refused, an unknown lab included:
// a network's members share one trust set, so a campaign from outside it is not this
// network's and forwarding it is a flood.
func ValidateCampaign(data []byte, trust *attest.TrustStore, opts CampaignVerifyOptions) Validation {
	if len(data) > MaxCampaignSize {
		return validationTooLarge
	}
	_, err := VerifyCampaign(data, trust, opts)
	if err == nil {
		return validationOK
	}
	r := CampaignReasonOf(err)
	if r == "" {
		r = CampaignMalformed
	}
	switch r {
	case CampaignUnknownVersion, CampaignExpired, CampaignNotYetValid:
		return Validation{Verdict: Ignore, Reason: string(r)}
	}
	return Validation{Verdict: Reject, Reason: string(r)}
}

// CampaignValidator binds ValidateCampaign to a trust store, a network and a clock.
// maxSlots 0 means DefaultMaxSlots.
func CampaignValidator(trust *attest.TrustStore, network string, maxSlots int, now func() time.Time) ValidatorFunc {
	return func(_ peer.ID, data []byte) Validation {
		return ValidateCampaign(data, trust, CampaignVerifyOptions{Now: now(), MaxSlots: maxSlots, Network: network})
	}
}

// Attestation-topic reasons besides attest's own (which appear as snake_case tokens of
// attest.Reason: "bad_signature", "unknown_lab", ...).
const (
	// ReasonNotCounted: a validly signed statement of a predicate type that does not count
	// (not a run or re-score, or a version this build does not know): ignored.
	ReasonNotCounted = "not_counted"
	// ReasonUnknownCampaign: a run of a campaign this node does not know (yet): ignored; it
	// arrives again through anti-entropy once the campaign is known.
	ReasonUnknownCampaign = "unknown_campaign"
)

// AttestationCheck is what the attestations-topic validator needs besides the bytes.
type AttestationCheck struct {
	Trust *attest.TrustStore
	// Cache, when set, remembers verdicts so an envelope's signatures are checked once.
	Cache *attest.Cache
	// KnownCampaign, when set, says whether a campaign ID is known here; runs of unknown
	// campaigns are ignored. Nil accepts any campaign.
	KnownCampaign func(id string) bool
}

// ValidateAttestation is the attestations-topic verdict: the envelope verified at its
// claimed time (attest.VerifyOptions.AtClaimedTime), so the verdict depends only on the
// bytes and the trust store and every peer reaches the same one whatever its clock. Every
// refusal of attest's is Reject (forged, malformed, untrusted lab or node, revoked,
// certificate not valid when the run says it ran); a statement that does not count and a
// run of an unknown campaign are Ignore.
func ValidateAttestation(data []byte, c AttestationCheck) Validation {
	if len(data) > MaxAttestationSize {
		return validationTooLarge
	}
	o := attest.VerifyOptions{AtClaimedTime: true}
	var v *attest.Verified
	var err error
	if c.Cache != nil {
		v, err = c.Cache.VerifyWith(data, c.Trust, o)
	} else {
		v, err = attest.VerifyWith(data, c.Trust, o)
	}
	if err != nil {
		r := attest.ReasonOf(err)
		if r == "" {
			r = attest.ReasonMalformedEnvelope
		}
		return Validation{Verdict: Reject, Reason: reasonToken(string(r))}
	}
	if !v.Counts && v.Grant == nil { // a grant travels like an attestation (attest/grant.go)
		return Validation{Verdict: Ignore, Reason: ReasonNotCounted}
	}
	if v.Run != nil && c.KnownCampaign != nil && !c.KnownCampaign(v.Run.Slot.Campaign) {
		return Validation{Verdict: Ignore, Reason: ReasonUnknownCampaign}
	}
	return validationOK
}

// AttestationValidator binds ValidateAttestation to c.
func AttestationValidator(c AttestationCheck) ValidatorFunc {
	return func(_ peer.ID, data []byte) Validation { return ValidateAttestation(data, c) }
}

// reasonToken turns a human reason ("bad signature") into a counter token ("bad_signature").
func reasonToken(s string) string { return strings.ReplaceAll(s, " ", "_") }

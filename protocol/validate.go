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

// ValueValidatorFunc is a topic validator that also returns the value it verified, so that
// nothing after it verifies the message again (the node keeps it in gossipsub's
// ValidatorData). It must be safe for concurrent use.
type ValueValidatorFunc func(from peer.ID, data []byte) (Validation, any)

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
	v, _ := ValidateCampaignValue(data, trust, opts)
	return v
}

// ValidateCampaignValue is ValidateCampaign with the verified campaign when it is accepted,
// so that the node hands the value on instead of verifying the bytes again.
func ValidateCampaignValue(data []byte, trust *attest.TrustStore, opts CampaignVerifyOptions) (Validation, *VerifiedCampaign) {
	if len(data) > MaxCampaignSize {
		return validationTooLarge, nil
	}
	c, err := VerifyCampaign(data, trust, opts)
	if err == nil {
		return validationOK, c
	}
	r := CampaignReasonOf(err)
	if r == "" {
		r = CampaignMalformed
	}
	switch r {
	case CampaignUnknownVersion, CampaignExpired, CampaignNotYetValid:
		return Validation{Verdict: Ignore, Reason: string(r)}, nil
	}
	return Validation{Verdict: Reject, Reason: string(r)}, nil
}

// CampaignValidator binds ValidateCampaign to a trust store, a network and a clock.
// maxSlots 0 means DefaultMaxSlots.
func CampaignValidator(trust *attest.TrustStore, network string, maxSlots int, now func() time.Time) ValidatorFunc {
	return func(_ peer.ID, data []byte) Validation {
		return ValidateCampaign(data, trust, CampaignVerifyOptions{Now: now(), MaxSlots: maxSlots, Network: network})
	}
}

// CampaignValueValidator is CampaignValidator (no slot limit) handing on the campaign it
// verified.
func CampaignValueValidator(trust *attest.TrustStore, network string, now func() time.Time) ValueValidatorFunc {
	return func(_ peer.ID, data []byte) (Validation, any) {
		v, c := ValidateCampaignValue(data, trust, CampaignVerifyOptions{Now: now(), Network: network})
		if c == nil {
			return v, nil // not a typed nil in an interface
		}
		return v, c
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
	v, _ := ValidateAttestationValue(data, c)
	return v
}

// ValidateAttestationValue is ValidateAttestation with the verified envelope when it is
// accepted (nil otherwise), so that the node hands the value on instead of verifying the
// bytes again.
func ValidateAttestationValue(data []byte, c AttestationCheck) (Validation, *attest.Verified) {
	if len(data) > MaxAttestationSize {
		return validationTooLarge, nil
	}
	o := attest.VerifyOptions{AtClaimedTime: true} // the store's (node/vstore), which takes the value
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
		return Validation{Verdict: Reject, Reason: reasonToken(string(r))}, nil
	}
	if !v.Counts && v.Grant == nil { // a grant travels like an attestation (attest/grant.go)
		return Validation{Verdict: Ignore, Reason: ReasonNotCounted}, nil
	}
	if v.Run != nil && c.KnownCampaign != nil && !c.KnownCampaign(v.Run.Slot.Campaign) {
		return Validation{Verdict: Ignore, Reason: ReasonUnknownCampaign}, nil
	}
	return validationOK, v
}

// AttestationValidator binds ValidateAttestation to c.
func AttestationValidator(c AttestationCheck) ValidatorFunc {
	return func(_ peer.ID, data []byte) Validation { return ValidateAttestation(data, c) }
}

// VerifiedAttestation is what AttestationValueValidator hands on: the envelope verified
// at its claimed time (attest.VerifyOptions.AtClaimedTime), and the trust store object it was
// verified under. A store takes the value as is only while it verifies under that same
// object; a value checked under another trust store is no verdict of its own.
type VerifiedAttestation struct {
	Verified *attest.Verified
	Trust    *attest.TrustStore
}

// AttestationValueValidator is AttestationValidator handing on, on Accept only, a
// *VerifiedAttestation of the envelope under c.Trust.
func AttestationValueValidator(c AttestationCheck) ValueValidatorFunc {
	return func(_ peer.ID, data []byte) (Validation, any) {
		val, v := ValidateAttestationValue(data, c)
		if v == nil || val.Verdict != Accept {
			return val, nil // not a typed nil in an interface
		}
		return val, &VerifiedAttestation{Verified: v, Trust: c.Trust}
	}
}

// reasonToken turns a human reason ("bad signature") into a counter token ("bad_signature").
func reasonToken(s string) string { return strings.ReplaceAll(s, " ", "_") }

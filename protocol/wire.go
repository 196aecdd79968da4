package protocol

import "crypto/sha256"

// The contract every topic's code shares: topic names, the message version, and the verdict a
// validator returns. docs/protocol.md is the normative text; this file is its Go form.

// Version is the wire version this build writes on every message. A reader ignores (never
// fails on) a message whose version it does not know.
const Version = 1

// Topic kinds under /evalmesh/<network>/.
const (
	TopicCampaigns    = "campaigns"
	TopicClaims       = "claims"
	TopicAttestations = "attestations"
	TopicHeads        = "heads"
)

// Topic is the gossipsub topic of kind (TopicCampaigns, ...) in network.
func Topic(network, kind string) string { return "/evalmesh/" + network + "/" + kind }

// Verdict is a validator's answer, mirroring gossipsub's ValidationResult without importing it
// (protocol starts no hosts).
type Verdict int

const (
	// Accept: valid; deliver and forward.
	Accept Verdict = iota
	// Reject: invalid (bad signature, malformed, untrusted sender); drop and penalise the peer.
	Reject
	// Ignore: not invalid, merely not usable yet (unknown version, campaign not known yet,
	// duplicate); drop without penalising an honest peer that is ahead of us.
	Ignore
)

func (v Verdict) String() string {
	switch v {
	case Accept:
		return "accept"
	case Reject:
		return "reject"
	case Ignore:
		return "ignore"
	}
	return "unknown"
}

// Validation is a verdict with the reason it was reached; Reason is a short stable token
// (e.g. "bad_signature", "unknown_version") that counters are keyed by.
type Validation struct {
	Verdict Verdict
	Reason  string
}

// Size limits per topic, in bytes of message data. A validator refuses a larger message
// before decoding it; the pubsub layer is configured with the largest (MaxMessageSize).
const (
	// MaxCampaignSize bounds a campaign envelope: up to MaxCampaignAgents agent specs of a
	// few hundred bytes each and MaxCampaignTasks task CIDs.
	MaxCampaignSize = 1 << 20
	// MaxAttestationSize bounds an attestation envelope (attest.MaxEnvelopeSize).
	MaxAttestationSize = 1 << 20
	// MaxClaimSize bounds a claims-topic message.
	MaxClaimSize = 64 << 10
	// MaxHeadsSize bounds a heads-topic message.
	MaxHeadsSize = 64 << 10
	// MaxMessageSize is the largest message on any topic.
	MaxMessageSize = 1 << 20
)

// MaxTopicMessageSize is the size limit of messages on topic kind (0 for an unknown kind).
func MaxTopicMessageSize(kind string) int {
	switch kind {
	case TopicCampaigns:
		return MaxCampaignSize
	case TopicAttestations:
		return MaxAttestationSize
	case TopicClaims:
		return MaxClaimSize
	case TopicHeads:
		return MaxHeadsSize
	}
	return 0
}

// MessageID is the pubsub message ID: the 32 raw bytes of sha256(topic || data), so one
// message has one ID whoever publishes or forwards it (the same attestation from two peers
// is delivered once). No topic name is a prefix of another (network names hold no '/'), so
// the concatenation is unambiguous.
func MessageID(topic string, data []byte) string {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write(data)
	return string(h.Sum(nil))
}

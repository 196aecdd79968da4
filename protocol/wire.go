package protocol

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

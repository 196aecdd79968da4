package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// Kinds of claim message (docs/protocol-claims.md).
const (
	// ClaimKindClaim: the sender wants the slot and will start it once the claim has
	// settled, unless a claim that beats it arrives first.
	ClaimKindClaim = "claim"
	// ClaimKindRenew: the sender's run of the slot is live; renews the lease. Sent each
	// heartbeat, and at once to answer a conflicting claim that this one beats.
	ClaimKindRenew = "renew"
	// ClaimKindRelease: the sender gives the slot up (shutdown, infrastructure failure,
	// a hung run aborted, a claim it no longer holds after a restart).
	ClaimKindRelease = "release"
)

// Release reasons. ReleaseInfra says the attempt was consumed (its run started and did not
// produce a result), so the next claim uses the next attempt number and it counts towards
// the retry cap; the others free the slot without consuming the attempt. ReleaseAwaitingKey
// says the sender's run ended and its submission waits for the key of a sealed bundle its
// lab holds no grant for: the result may still come (once a grant arrives), the slot is
// left to a node that can score it now, and the sender does not claim it again.
const (
	ReleaseInfra       = "infra"
	ReleaseShutdown    = "shutdown"
	ReleaseStale       = "stale"
	ReleaseAwaitingKey = "awaiting-key"
)

// Limits a reader enforces on a claim message.
const (
	// MaxClaimBytes bounds an encoded claim message (a node certificate is ~0.7 KiB).
	MaxClaimBytes = 8 << 10
	// MaxLeaseMS bounds lease_ms: a day. Longer leases would let one lost release hold a
	// slot hostage for longer than any campaign cares to wait.
	MaxLeaseMS = int64(24 * time.Hour / time.Millisecond)
	// maxIDLen bounds the campaign, slot, peer and lab ID strings.
	maxIDLen = 256
)

// ErrUnknownVersion is returned by DecodeClaim for a message whose "v" this build does not
// know: callers Ignore such messages (a newer peer is not a faulty one), never Reject.
var ErrUnknownVersion = errors.New("claim message: unknown version")

// ErrClaimTooLarge is returned for a message over MaxClaimBytes.
var ErrClaimTooLarge = fmt.Errorf("claim message: larger than %d bytes", MaxClaimBytes)

// ClaimMessage is one message on the claims topic. It is soft state: losing any number of
// them costs at most duplicate work, never a wrong ledger.
type ClaimMessage struct {
	V        int    `json:"v"`
	Kind     string `json:"kind"`
	Campaign string `json:"campaign"`
	Slot     string `json:"slot"`
	PeerID   string `json:"peer_id"`
	Lab      string `json:"lab"`
	// Lamport is the sender's Lamport time when it first claimed the slot; renews and
	// releases of that claim repeat it, so (peer_id, lamport) names the claim and the
	// tie-break between two claims never changes while they live.
	Lamport uint64 `json:"lamport"`
	// LeaseMS is how long after receiving this message a reader holds the slot for the
	// sender, unless renewed. 0 in a release.
	LeaseMS int64 `json:"lease_ms"`
	// Attempt is the attempt number the run will sign (1 for the first run of a slot; one
	// more after each infrastructure failure).
	Attempt int `json:"attempt"`
	// Reason is set only on releases: ReleaseInfra, ReleaseShutdown, ReleaseStale or
	// ReleaseAwaitingKey.
	Reason string `json:"reason,omitempty"`
	// Cert is the sender's node certificate envelope (attest.NodeCert JSON) so a validator
	// can check, without lookups, that the sender speaks for a trusted lab.
	Cert json.RawMessage `json:"cert"`
	// Seq is the sender's message counter, set by whoever publishes (the machine leaves it
	// 0). Gossipsub's message ID is the hash of the bytes, and its seen-cache drops a
	// repeat of identical bytes for two minutes: without Seq every renew of a live claim
	// after the first would be a duplicate nobody receives, and leases shorter than that
	// window would lapse while the run lives. Readers ignore its value.
	Seq uint64 `json:"seq,omitempty"`
}

// EncodeClaim checks m and encodes it. m.V of 0 is written as Version.
func EncodeClaim(m *ClaimMessage) ([]byte, error) {
	c := *m
	if c.V == 0 {
		c.V = Version
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("claim message: %w", err)
	}
	if len(b) > MaxClaimBytes {
		return nil, ErrClaimTooLarge
	}
	return b, nil
}

// DecodeClaim parses and checks a claim message. Unknown versions give ErrUnknownVersion;
// unknown fields, unknown kinds and missing or out-of-range fields are errors naming them.
// It does not check the certificate (ValidateClaim does).
func DecodeClaim(b []byte) (*ClaimMessage, error) {
	if len(b) > MaxClaimBytes {
		return nil, ErrClaimTooLarge
	}
	// The version is read first and loosely: a later version may add fields this build
	// would refuse, and it must be ignored, not rejected. json.Unmarshal also refuses
	// anything after the object.
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("claim message: not a JSON object: %w", err)
	}
	if head.V == nil {
		return nil, errors.New("claim message: missing field v")
	}
	if *head.V != Version {
		return nil, fmt.Errorf("%w %d (this build reads %d)", ErrUnknownVersion, *head.V, Version)
	}
	var m ClaimMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("claim message: %w", err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *ClaimMessage) check() error {
	if m.V != Version {
		return fmt.Errorf("%w %d (this build writes %d)", ErrUnknownVersion, m.V, Version)
	}
	switch m.Kind {
	case ClaimKindClaim, ClaimKindRenew:
		if m.LeaseMS <= 0 || m.LeaseMS > MaxLeaseMS {
			return fmt.Errorf("claim message: lease_ms %d out of range (1..%d)", m.LeaseMS, MaxLeaseMS)
		}
		if m.Reason != "" {
			return fmt.Errorf("claim message: reason %q is only allowed on a release", m.Reason)
		}
	case ClaimKindRelease:
		if m.LeaseMS != 0 {
			return fmt.Errorf("claim message: a release has lease_ms 0, not %d", m.LeaseMS)
		}
		switch m.Reason {
		case ReleaseInfra, ReleaseShutdown, ReleaseStale, ReleaseAwaitingKey:
		default:
			return fmt.Errorf("claim message: release reason %q unknown (want %s, %s, %s or %s)", m.Reason, ReleaseInfra, ReleaseShutdown, ReleaseStale, ReleaseAwaitingKey)
		}
	case "":
		return errors.New("claim message: missing field kind")
	default:
		return fmt.Errorf("claim message: kind %q unknown (want claim, renew or release)", m.Kind)
	}
	for _, f := range [...]struct{ name, v string }{
		{"campaign", m.Campaign}, {"slot", m.Slot}, {"peer_id", m.PeerID}, {"lab", m.Lab},
	} {
		if f.v == "" {
			return fmt.Errorf("claim message: missing field %s", f.name)
		}
		if len(f.v) > maxIDLen {
			return fmt.Errorf("claim message: %s is %d bytes, over %d", f.name, len(f.v), maxIDLen)
		}
	}
	if m.Lamport == 0 {
		return errors.New("claim message: missing field lamport (Lamport times start at 1)")
	}
	if m.Attempt < 1 {
		return fmt.Errorf("claim message: attempt %d, want 1 or more", m.Attempt)
	}
	if len(bytes.TrimSpace(m.Cert)) == 0 || bytes.Equal(bytes.TrimSpace(m.Cert), []byte("null")) {
		return errors.New("claim message: missing field cert (the sender's node certificate)")
	}
	return nil
}

// Reasons ValidateClaim gives (Validation.Reason).
const (
	ClaimReasonUnknownVersion  = "unknown_version"
	ClaimReasonTooLarge        = "too_large"
	ClaimReasonMalformed       = "malformed"
	ClaimReasonSenderMismatch  = "sender_mismatch"
	ClaimReasonBadCert         = "bad_cert"
	ClaimReasonUnknownLab      = "unknown_lab"
	ClaimReasonCertExpired     = "cert_expired"
	ClaimReasonCertNotYetValid = "cert_not_yet_valid"
	ClaimReasonCertRevoked     = "cert_revoked"
	ClaimReasonLabRetired      = "lab_retired"
	ClaimReasonCertNotSender   = "cert_not_for_sender"
	ClaimReasonLabMismatch     = "lab_mismatch"
)

// ValidateClaim is the claims topic's validator: decode, then check that peer_id is the
// authenticated sender from (gossipsub StrictSign has checked the message signature
// against it), and that cert is a certificate, under a lab in trust valid at now, for that
// peer and that lab. It does no I/O; a certificate's signature is checked once per distinct
// certificate (attest.TrustStore caches it). Whether the campaign and slot are known is the
// claim machine's business (it ignores what it does not know).
func ValidateClaim(data []byte, from string, trust *attest.TrustStore, now time.Time) Validation {
	m, err := DecodeClaim(data)
	switch {
	case errors.Is(err, ErrUnknownVersion):
		return Validation{Ignore, ClaimReasonUnknownVersion}
	case errors.Is(err, ErrClaimTooLarge):
		return Validation{Reject, ClaimReasonTooLarge}
	case err != nil:
		return Validation{Reject, ClaimReasonMalformed}
	}
	if m.PeerID != from {
		return Validation{Reject, ClaimReasonSenderMismatch}
	}
	c, err := trust.CheckNodeCert(m.Cert, now)
	if err != nil {
		switch attest.ReasonOf(err) {
		case attest.ReasonUnknownLab:
			return Validation{Reject, ClaimReasonUnknownLab}
		case attest.ReasonCertExpired:
			return Validation{Reject, ClaimReasonCertExpired}
		case attest.ReasonCertNotYetValid:
			// Our clock may be behind the lab's: not proof of a fault.
			return Validation{Ignore, ClaimReasonCertNotYetValid}
		case attest.ReasonCertRevoked:
			return Validation{Reject, ClaimReasonCertRevoked}
		case attest.ReasonLabRetired:
			return Validation{Reject, ClaimReasonLabRetired}
		}
		return Validation{Reject, ClaimReasonBadCert}
	}
	if c.Node != from {
		return Validation{Reject, ClaimReasonCertNotSender}
	}
	if c.Lab != m.Lab {
		return Validation{Reject, ClaimReasonLabMismatch}
	}
	return Validation{Verdict: Accept}
}

package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Head is what a node announces on /heads (docs/protocol-sync.md): which network document
// it runs, the ledger root it computed, how many attestations it holds and the
// reconciliation fingerprint of that set.
type Head struct {
	Version      int    `json:"version"`
	Network      string `json:"network"`
	NetworkDoc   string `json:"network_doc"` // NetworkDoc.Hash, hex
	PeerID       string `json:"peer_id"`
	Lab          string `json:"lab,omitempty"` // as the node states it (informational)
	LedgerRoot   string `json:"ledger_root"`   // hex sha256, "" when not computed yet
	Attestations int    `json:"attestations"`
	Fingerprint  string `json:"fingerprint"` // hex, 16 bytes: the whole set's recon fingerprint
	// Seq grows with each announcement of a node, across its restarts too (the node starts
	// it from its wall clock in microseconds): a reader keeps the highest it saw.
	Seq uint64 `json:"seq"`
}

// signedHead is the wire form: the head's JSON bytes as signed, and the signature.
type signedHead struct {
	Head json.RawMessage `json:"head"`
	Sig  []byte          `json:"sig"` // ed25519 over headDomain || head bytes, base64
}

const headDomain = "evalmesh/head/v1\n"

// MaxHeadSize bounds an encoded head a reader accepts.
const MaxHeadSize = 4096

// ErrHeadVersion: the head's version is not one this build reads (ignore it, don't
// penalise the sender).
var ErrHeadVersion = errors.New("unknown head version")

// SignHead encodes h signed with key; h.PeerID must be key's peer ID.
func SignHead(h Head, key crypto.PrivKey) ([]byte, error) {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if h.PeerID != id.String() {
		return nil, fmt.Errorf("head names peer %s but the key is %s's", h.PeerID, id)
	}
	body, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	sig, err := key.Sign(append([]byte(headDomain), body...))
	if err != nil {
		return nil, err
	}
	return json.Marshal(signedHead{Head: body, Sig: sig})
}

// DecodeHead checks a signed head: size, form, version, fields, and the signature by the
// key inside its peer_id. It does not know who relayed it: see ValidateHead.
func DecodeHead(b []byte) (*Head, error) {
	if len(b) > MaxHeadSize {
		return nil, fmt.Errorf("head of %d bytes, over %d", len(b), MaxHeadSize)
	}
	var sh signedHead
	if err := json.Unmarshal(b, &sh); err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(sh.Head, &probe); err != nil {
		return nil, fmt.Errorf("head body: %w", err)
	}
	if probe.Version != Version {
		return nil, fmt.Errorf("%w %d (this build reads %d)", ErrHeadVersion, probe.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(sh.Head))
	dec.DisallowUnknownFields()
	var h Head
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("head body: %w", err)
	}
	id, err := peer.Decode(h.PeerID)
	if err != nil {
		return nil, fmt.Errorf("head peer_id %q: %w", h.PeerID, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("head peer_id %s carries no public key: %w", h.PeerID, err)
	}
	ok, err := pub.Verify(append([]byte(headDomain), sh.Head...), sh.Sig)
	if err != nil || !ok {
		return nil, fmt.Errorf("head of %s: bad signature", h.PeerID)
	}
	if fp, err := hex.DecodeString(h.Fingerprint); err != nil || len(fp) != 16 {
		return nil, fmt.Errorf("head of %s: fingerprint %q is not 32 hex digits", h.PeerID, h.Fingerprint)
	}
	if h.LedgerRoot != "" {
		if r, err := hex.DecodeString(h.LedgerRoot); err != nil || len(r) != 32 {
			return nil, fmt.Errorf("head of %s: ledger_root %q is not 64 hex digits", h.PeerID, h.LedgerRoot)
		}
	}
	if h.Attestations < 0 || h.Network == "" {
		return nil, fmt.Errorf("head of %s: attestations < 0 or no network", h.PeerID)
	}
	return &h, nil
}

// ValidateHead is the /heads topic validator's decision for a message from sender (the
// gossipsub message author) in network.
func ValidateHead(b []byte, sender peer.ID, network string) (*Head, Validation) {
	h, err := DecodeHead(b)
	switch {
	case errors.Is(err, ErrHeadVersion):
		return nil, Validation{Ignore, "unknown_version"}
	case err != nil:
		return nil, Validation{Reject, "malformed"}
	case h.PeerID != sender.String():
		return nil, Validation{Reject, "sender_mismatch"}
	case h.Network != network:
		return nil, Validation{Reject, "other_network"}
	}
	return h, Validation{Accept, ""}
}

// OurHead is what the local node has, to compare peers' heads with.
type OurHead struct {
	Network      string
	NetworkDoc   string
	LedgerRoot   string
	Attestations int
	Fingerprint  string
}

// PeerStatus says how a peer's head compares with ours.
type PeerStatus string

const (
	// StatusAgrees: same network document, same set, same root.
	StatusAgrees PeerStatus = "agrees"
	// StatusOtherDocument: the peer runs another network document; its root is not
	// comparable, and it is not a disagreement.
	StatusOtherDocument PeerStatus = "other network document"
	// StatusOtherSet: same document, different attestation sets (sync pending).
	StatusOtherSet PeerStatus = "different attestation set"
	// StatusRootMismatch: same document and same set, yet another root: a bug or a cheat.
	StatusRootMismatch PeerStatus = "ROOT MISMATCH with equal sets"
	// StatusNoRoot: one side has not computed a root yet.
	StatusNoRoot PeerStatus = "no root yet"
	// StatusStale: the peer's last head is older than the staleness bound (it left, or its
	// heads stopped reaching us): what it said is not evidence of agreement now.
	StatusStale PeerStatus = "stale head"
)

// PeerHead is the latest head heard from one peer and how it compares with ours.
type PeerHead struct {
	PeerID       string     `json:"peer_id"`
	Lab          string     `json:"lab"`
	Network      string     `json:"network"`
	NetworkDoc   string     `json:"network_doc"`
	LedgerRoot   string     `json:"ledger_root"`
	Attestations int        `json:"attestations"`
	Fingerprint  string     `json:"fingerprint"`
	Agrees       bool       `json:"agrees"`
	Status       PeerStatus `json:"status"`
	LastHeard    time.Time  `json:"last_heard"`
	// AgeSeconds is how long ago LastHeard was; Stale says it is past the bound, and then
	// Status is StatusStale and Agrees false whatever the head said (a root mismatch
	// excepted: it stays reported).
	AgeSeconds float64 `json:"head_age_seconds"`
	Stale      bool    `json:"stale"`
	// ClockOffsetSeconds is the peer's clock minus ours, measured on its last head (its
	// time, read from its seq (SeqTime), against when we heard it); nil when its seq is a
	// count (a build older than the wall-clock seq). See HeadsTracker.Observe for how good a bound it is.
	ClockOffsetSeconds *float64 `json:"clock_offset_seconds,omitempty"`
}

// HeadsTracker records the latest head of each peer. Pure: the caller passes the time a
// head was heard. Not safe for concurrent use (the node locks it).
type HeadsTracker struct {
	heads map[string]heard
}

type heard struct {
	h  Head
	at time.Time
	// offset is h's time minus at, when h carries a time (hasOffset).
	offset    time.Duration
	hasOffset bool
}

// seqTimeFloor is 2020-01-01 in Unix microseconds: a Seq below it is a count (builds that
// started it from 0), not a time.
const seqTimeFloor = 1_577_836_800_000_000

// SeqTime is the sender's clock that a head's Seq carries: a node sets Seq to the larger of
// its last Seq + 1 and its wall clock in microseconds when it signs a head (for ordering
// across restarts), so Seq is its clock at signing, unless that clock stepped back (Seq then
// runs ahead of it by at most the step, which overstates the offset: safe for a warning).
// False for a Seq that is a count (builds older than the wall-clock Seq). Reading the time
// from Seq needs no field, so heads of every build decode as before.
func SeqTime(seq uint64) (time.Time, bool) {
	if seq < seqTimeFloor || seq > math.MaxInt64 {
		return time.Time{}, false
	}
	return time.UnixMicro(int64(seq)), true
}

// NewHeadsTracker returns an empty tracker.
func NewHeadsTracker() *HeadsTracker { return &HeadsTracker{heads: map[string]heard{}} }

// Observe records h heard at time at, unless a head with a higher Seq from the same peer
// was recorded; it reports whether the peer's head changed (a reason to sync with it).
// Where h carries the sender's time, the peer's clock offset is recorded as that time
// minus at. The figure includes the head's one-way delay (gossip relays it within
// milliseconds on a LAN, under a second across continents), so it bounds the true offset
// to about a second: enough for what clocks decide here (leases of minutes, certificate
// windows, witness times), not for finer measurement.
func (t *HeadsTracker) Observe(h Head, at time.Time) bool {
	old, ok := t.heads[h.PeerID]
	if ok && old.h.Seq > h.Seq {
		return false
	}
	e := heard{h: h, at: at}
	if t, ok := SeqTime(h.Seq); ok {
		e.offset, e.hasOffset = t.Sub(at), true
	}
	t.heads[h.PeerID] = e
	return !ok || old.h != h
}

// HeardAt says when each peer's recorded head was heard, by peer ID.
func (t *HeadsTracker) HeardAt() map[string]time.Time {
	out := make(map[string]time.Time, len(t.heads))
	for id, e := range t.heads {
		out[id] = e.at
	}
	return out
}

// Forget drops a peer's head.
func (t *HeadsTracker) Forget(peerID string) { delete(t.heads, peerID) }

// Compare lists every peer's latest head against ours at time now, sorted by peer ID. A
// head heard more than staleAfter before now is stale (staleAfter <= 0: none is).
func (t *HeadsTracker) Compare(ours OurHead, now time.Time, staleAfter time.Duration) []PeerHead {
	out := make([]PeerHead, 0, len(t.heads))
	for _, e := range t.heads {
		h := e.h
		p := PeerHead{PeerID: h.PeerID, Lab: h.Lab, Network: h.Network, NetworkDoc: h.NetworkDoc,
			LedgerRoot: h.LedgerRoot, Attestations: h.Attestations, Fingerprint: h.Fingerprint, LastHeard: e.at,
			AgeSeconds: max(now.Sub(e.at).Seconds(), 0)}
		p.Status = compareHead(ours, h)
		if e.hasOffset {
			off := e.offset.Seconds()
			p.ClockOffsetSeconds = &off
		}
		// A root mismatch stays one: the signed head is evidence however old it is.
		if p.Stale = staleAfter > 0 && now.Sub(e.at) > staleAfter; p.Stale && p.Status != StatusRootMismatch {
			p.Status = StatusStale
		}
		p.Agrees = p.Status == StatusAgrees
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PeerID < out[j].PeerID })
	return out
}

// LargestClockOffset is the peer whose clock is furthest from ours among peers whose heads
// are fresh and carry a time (a stale head is a peer gone; a build older than the wall-clock seq says
// none), and how many such peers there are; nil when none.
func LargestClockOffset(peers []PeerHead) (worst *PeerHead, measured int) {
	for i, p := range peers {
		if p.Stale || p.ClockOffsetSeconds == nil {
			continue
		}
		measured++
		if worst == nil || math.Abs(*p.ClockOffsetSeconds) > math.Abs(*worst.ClockOffsetSeconds) {
			worst = &peers[i]
		}
	}
	return worst, measured
}

// NeedsSync says whether a peer's head shows a set other than ours under the same document.
func (t *HeadsTracker) NeedsSync(ours OurHead, peerID string) bool {
	e, ok := t.heads[peerID]
	if !ok {
		return false
	}
	return e.h.NetworkDoc == ours.NetworkDoc && e.h.Fingerprint != ours.Fingerprint
}

func compareHead(ours OurHead, h Head) PeerStatus {
	switch {
	case h.Network != ours.Network || h.NetworkDoc != ours.NetworkDoc:
		return StatusOtherDocument
	case h.Fingerprint != ours.Fingerprint || h.Attestations != ours.Attestations:
		return StatusOtherSet
	case h.LedgerRoot == "" || ours.LedgerRoot == "":
		return StatusNoRoot
	case h.LedgerRoot != ours.LedgerRoot:
		return StatusRootMismatch
	}
	return StatusAgrees
}

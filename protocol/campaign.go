package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
)

// Campaigns: a lab's signed request to run agents × tasks × seeds (docs/protocol.md,
// "Campaigns"). The body is canonical JSON; the envelope is DSSE with its own payload type,
// signed once by the lab key; the campaign's ID is the CID of the envelope bytes.

const (
	// CampaignPayloadType is the DSSE payloadType of a campaign envelope.
	CampaignPayloadType = "application/vnd.evalmesh.campaign+json"
	// DefaultMaxSlots bounds tasks × agents × seeds unless a node configures otherwise.
	DefaultMaxSlots = 100000
	// MaxCampaignTitle is the longest title, in bytes.
	MaxCampaignTitle = 200
	// MaxCampaignAgents and MaxCampaignTasks bound the lists before their product is.
	MaxCampaignAgents = 1000
	MaxCampaignTasks  = 10000
	// CampaignClockSkew is how far in the future a campaign's created time may be before a
	// reader treats it as not yet valid (labs' clocks disagree by seconds, not minutes).
	CampaignClockSkew = 5 * time.Minute
)

// networkRE is what a network name may be: it is a path element of every topic name.
var networkRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidNetworkName reports whether name may name a network (lower-case letters, digits,
// '.', '_', '-'; 1-64 bytes; starting with a letter or digit).
func ValidNetworkName(name string) bool { return networkRE.MatchString(name) }

// Campaign is the signed body of a campaign. Fields are declared in the order of their JSON
// names so that encoding/json writes the canonical form (keys sorted, no space).
type Campaign struct {
	// Agents are the agents to run: each spec's CID and its canonical JSON, so a node can
	// run it and check it without fetching anything.
	Agents []CampaignAgent `json:"agents"`
	// Created and Deadline bound the campaign's window (UTC, whole seconds).
	Created  time.Time `json:"created"`
	Deadline time.Time `json:"deadline"`
	// Lab is the ID of the lab that signs the campaign (the envelope's keyid).
	Lab string `json:"lab"`
	// Network is the network the campaign is for; readers of another network refuse it.
	Network string `json:"network"`
	// Replication is how many labs other than the runner's must re-score each run.
	Replication int `json:"replication"`
	// Seeds is the number of seeds per (task, agent); seed indices are 0 … Seeds-1.
	Seeds int `json:"seeds"`
	// Tasks are task bundle CIDs.
	Tasks []string `json:"tasks"`
	Title string   `json:"title"`
	// Version is the campaign format version (Version, 1).
	Version int `json:"version"`

	// ID is the campaign ID (the envelope's CID), set by SignCampaign and VerifyCampaign;
	// not part of the signed body.
	ID string `json:"-"`
}

// CampaignAgent is one agent of a campaign.
type CampaignAgent struct {
	CID  string          `json:"cid"`
	Spec json.RawMessage `json:"spec"` // the agent spec's canonical JSON (agentspec.Spec.Canonical)
}

// NewCampaignAgent embeds spec as a campaign agent.
func NewCampaignAgent(spec *agentspec.Spec) CampaignAgent {
	return CampaignAgent{CID: spec.CID(), Spec: spec.Canonical()}
}

// CampaignReason says why a campaign was refused; the values are stable tokens that
// counters, logs and `evalmesh campaign verify --json` show.
type CampaignReason string

const (
	CampaignMalformed      CampaignReason = "malformed"
	CampaignUnknownVersion CampaignReason = "unknown_version"
	CampaignWrongNetwork   CampaignReason = "wrong_network"
	CampaignUnknownLab     CampaignReason = "unknown_lab"
	CampaignBadSignature   CampaignReason = "bad_signature"
	CampaignExpired        CampaignReason = "expired"
	CampaignNotYetValid    CampaignReason = "not_yet_valid"
	CampaignAgentMismatch  CampaignReason = "agent_cid_mismatch"
	CampaignTooManySlots   CampaignReason = "too_many_slots"
)

// CampaignError is a refused campaign: the reason and the detail naming the bad input.
type CampaignError struct {
	Reason CampaignReason
	Detail string
}

func (e *CampaignError) Error() string {
	r := strings.ReplaceAll(string(e.Reason), "_", " ")
	if e.Detail == "" {
		return "campaign refused: " + r
	}
	return "campaign refused: " + r + ": " + e.Detail
}

// CampaignReasonOf returns the reason of a campaign refusal, or "" for other errors.
func CampaignReasonOf(err error) CampaignReason {
	var ce *CampaignError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

func refuseCampaign(r CampaignReason, format string, args ...any) error {
	return &CampaignError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// CampaignVerifyOptions is a reader's policy for campaigns.
type CampaignVerifyOptions struct {
	// Now is the reader's time: a campaign past its deadline is expired, one created more
	// than CampaignClockSkew after Now is not yet valid.
	Now time.Time
	// AtCreation reads the campaign at its own creation time instead of Now (a store keeps a
	// campaign whose deadline has passed: its runs still count), without decoding it twice.
	AtCreation bool
	// MaxSlots bounds tasks × agents × seeds; 0 means DefaultMaxSlots.
	MaxSlots int
	// Network, when set, is the only network accepted.
	Network string
}

// VerifiedCampaign is a campaign whose envelope, lab signature and body were accepted.
type VerifiedCampaign struct {
	ID       string // CID of the envelope bytes
	Envelope []byte // the envelope as received
	// Digest is the sha256 of Envelope, the digest inside ID: the store keys the envelope
	// by it without hashing the bytes again. Zero in a value not made by VerifyCampaign.
	Digest   [32]byte
	Lab      string // lab ID of the signer
	LabName  string // the name the trust store knows the lab by
	Campaign *Campaign
	// Agents are the agents' specs by CID, parsed once by the verification: readers take
	// them instead of parsing Campaign.Agents again.
	Agents map[string]*agentspec.Spec
}

// SignCampaign normalises c (times to UTC whole seconds, version and lab filled in), checks
// it as a reader would (at c.Created, DefaultMaxSlots, its own network), signs its canonical
// JSON with the lab key and returns the envelope and its ID. c.ID is set.
func SignCampaign(lab *attest.Lab, c *Campaign) (envelope []byte, id string, err error) {
	if lab == nil {
		return nil, "", errors.New("no lab key to sign the campaign with")
	}
	if c.Version == 0 {
		c.Version = Version
	}
	if c.Lab == "" {
		c.Lab = lab.ID
	}
	if c.Lab != lab.ID {
		return nil, "", fmt.Errorf("campaign names lab %s but the signing key is lab %s", c.Lab, lab.ID)
	}
	c.Created = c.Created.UTC().Truncate(time.Second)
	c.Deadline = c.Deadline.UTC().Truncate(time.Second)
	if _, err := c.check(DefaultMaxSlots); err != nil {
		return nil, "", fmt.Errorf("refusing to sign: %w", err)
	}
	body := c.canonical()
	env, err := lab.SignLabEnvelope(CampaignPayloadType, body)
	if err != nil {
		return nil, "", err
	}
	c.ID = attest.EnvelopeID(env)
	return env, c.ID, nil
}

// VerifyCampaign decides whether a campaign envelope is acceptable under trust and opts.
// Refusals are *CampaignError. Checks run cheapest first; the signature is checked before
// the body is trusted, and the agent CIDs last.
func VerifyCampaign(envelope []byte, trust *attest.TrustStore, opts CampaignVerifyOptions) (*VerifiedCampaign, error) {
	if len(envelope) > MaxCampaignSize {
		return nil, refuseCampaign(CampaignMalformed, "envelope is %d bytes, over the %d-byte limit", len(envelope), MaxCampaignSize)
	}
	if opts.MaxSlots <= 0 {
		opts.MaxSlots = DefaultMaxSlots
	}
	ls, err := trust.VerifyLabEnvelope(envelope, CampaignPayloadType)
	if err != nil {
		switch attest.ReasonOf(err) {
		case attest.ReasonUnknownLab:
			return nil, refuseCampaign(CampaignUnknownLab, "%v", err)
		case attest.ReasonBadSignature:
			return nil, refuseCampaign(CampaignBadSignature, "%v", err)
		}
		return nil, refuseCampaign(CampaignMalformed, "%v", err)
	}
	c, err := DecodeCampaign(ls.Payload)
	if err != nil {
		return nil, err
	}
	if c.Lab != ls.Lab {
		return nil, refuseCampaign(CampaignBadSignature, "campaign names lab %s but is signed by lab %s", c.Lab, ls.Lab)
	}
	if r, ok := trust.LabRetired(ls.Lab); ok && !c.Created.Before(r) {
		return nil, refuseCampaign(CampaignUnknownLab, "lab %s (%s) retired from the network at %s; its campaign created %s does not count", ls.LabName, ls.Lab, r.UTC().Format(time.RFC3339), c.Created.Format(time.RFC3339))
	}
	if opts.AtCreation {
		opts.Now = c.Created
	}
	if opts.Network != "" && c.Network != opts.Network {
		return nil, refuseCampaign(CampaignWrongNetwork, "campaign is for network %q, this node is in %q", c.Network, opts.Network)
	}
	if !opts.Now.Before(c.Deadline) {
		return nil, refuseCampaign(CampaignExpired, "deadline %s has passed (now %s)", c.Deadline.Format(time.RFC3339), opts.Now.UTC().Format(time.RFC3339))
	}
	if c.Created.After(opts.Now.Add(CampaignClockSkew)) {
		return nil, refuseCampaign(CampaignNotYetValid, "created %s is in the future (now %s)", c.Created.Format(time.RFC3339), opts.Now.UTC().Format(time.RFC3339))
	}
	specs, err := c.check(opts.MaxSlots)
	if err != nil {
		return nil, err
	}
	digest := sha256.Sum256(envelope)
	c.ID = attest.EnvelopeIDOfDigest(digest)
	return &VerifiedCampaign{ID: c.ID, Envelope: envelope, Digest: digest, Lab: ls.Lab, LabName: ls.LabName, Campaign: c, Agents: specs}, nil
}

// DecodeCampaign parses a campaign body without checking any signature or policy: the
// version first (an unknown version is CampaignUnknownVersion, which readers ignore), then
// the version-1 fields strictly (no unknown fields) and in canonical form, so one campaign
// has one encoding. The agents' CIDs and the slot count are checked by VerifyCampaign.
func DecodeCampaign(body []byte) (*Campaign, error) {
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, refuseCampaign(CampaignMalformed, "body is not a JSON object: %v", err)
	}
	if v.Version == nil {
		return nil, refuseCampaign(CampaignMalformed, "body has no version")
	}
	if *v.Version != Version {
		return nil, refuseCampaign(CampaignUnknownVersion, "version %d; this evalmesh reads version %d", *v.Version, Version)
	}
	var c Campaign
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, refuseCampaign(CampaignMalformed, "%v", err)
	}
	if dec.More() {
		return nil, refuseCampaign(CampaignMalformed, "trailing data after the campaign object")
	}
	if !bytes.Equal(c.canonical(), body) {
		return nil, refuseCampaign(CampaignMalformed, "body is not in canonical form (sorted keys, no spaces, UTC times in whole seconds, agent specs canonical)")
	}
	return &c, nil
}

// canonical is the signed form: encoding/json of the struct (fields are in key order),
// times in UTC whole seconds.
func (c *Campaign) canonical() []byte {
	n := *c
	n.Created = n.Created.UTC().Truncate(time.Second)
	n.Deadline = n.Deadline.UTC().Truncate(time.Second)
	b, err := json.Marshal(&n)
	if err != nil {
		// Only a RawMessage spec that is not JSON gets here; canonical() of such a body
		// cannot equal any decoded body, so return something that never matches.
		return nil
	}
	return b
}

// check is every rule on the body itself, cheapest first; it returns the agents' specs it
// parsed, by CID.
func (c *Campaign) check(maxSlots int) (map[string]*agentspec.Spec, error) {
	bad := func(format string, args ...any) error { return refuseCampaign(CampaignMalformed, format, args...) }
	switch {
	case c.Version != Version:
		return nil, refuseCampaign(CampaignUnknownVersion, "version %d; this evalmesh writes version %d", c.Version, Version)
	case !ValidNetworkName(c.Network):
		return nil, bad("network %q must be 1-64 lower-case letters, digits, '.', '_' or '-'", c.Network)
	case strings.TrimSpace(c.Title) == "" || len(c.Title) > MaxCampaignTitle:
		return nil, bad("title must be 1-%d bytes", MaxCampaignTitle)
	case !strings.HasPrefix(c.Lab, attest.LabIDPrefix):
		return nil, bad("lab %q is not a lab ID", c.Lab)
	case c.Seeds < 1:
		return nil, bad("seeds is %d; a campaign runs each (task, agent) at least once", c.Seeds)
	case c.Replication < 0:
		return nil, bad("replication %d must not be negative", c.Replication)
	case c.Created.IsZero() || !c.Deadline.After(c.Created):
		return nil, bad("deadline %s must be after created %s", c.Deadline.Format(time.RFC3339), c.Created.Format(time.RFC3339))
	case len(c.Tasks) == 0 || len(c.Tasks) > MaxCampaignTasks:
		return nil, bad("%d tasks; give 1-%d", len(c.Tasks), MaxCampaignTasks)
	case len(c.Agents) == 0 || len(c.Agents) > MaxCampaignAgents:
		return nil, bad("%d agents; give 1-%d", len(c.Agents), MaxCampaignAgents)
	}
	// The product, without overflow: each factor is bounded above, seeds by maxSlots.
	if n := int64(len(c.Tasks)) * int64(len(c.Agents)); c.Seeds > maxSlots || n*int64(c.Seeds) > int64(maxSlots) {
		return nil, refuseCampaign(CampaignTooManySlots, "%d tasks × %d agents × %d seeds is over the %d-slot limit", len(c.Tasks), len(c.Agents), c.Seeds, maxSlots)
	}
	seen := make(map[string]bool, len(c.Tasks)+len(c.Agents))
	specs := make(map[string]*agentspec.Spec, len(c.Agents))
	for i, t := range c.Tasks {
		if _, err := cid.Decode(t); err != nil {
			return nil, bad("tasks[%d] %q is not a bundle CID: %v", i, t, err)
		}
		if seen[t] {
			return nil, bad("tasks[%d] %s is listed twice", i, t)
		}
		seen[t] = true
	}
	for i, a := range c.Agents {
		if _, err := cid.Decode(a.CID); err != nil {
			return nil, bad("agents[%d] cid %q is not a CID: %v", i, a.CID, err)
		}
		if seen[a.CID] {
			return nil, bad("agents[%d] %s is listed twice (or is also a task)", i, a.CID)
		}
		seen[a.CID] = true
		if got := agentspec.RawCID(a.Spec); got != a.CID {
			return nil, refuseCampaign(CampaignAgentMismatch, "agents[%d] spec hashes to %s, not its cid %s", i, got, a.CID)
		}
		spec, err := agentspec.Parse(a.Spec)
		if err != nil {
			return nil, bad("agents[%d] (%s): %v", i, a.CID, err)
		}
		if !bytes.Equal(spec.Canonical(), a.Spec) {
			return nil, bad("agents[%d] (%s): spec is not in canonical form", i, a.CID)
		}
		specs[a.CID] = spec
	}
	return specs, nil
}

// Slots lists the campaign's slots: for each task in order, each agent in order, seeds
// 0 … Seeds-1. The order is stable: it depends only on the signed body.
func (c *Campaign) Slots() []attest.Slot {
	out := make([]attest.Slot, 0, len(c.Tasks)*len(c.Agents)*max(c.Seeds, 0))
	for _, t := range c.Tasks {
		for _, a := range c.Agents {
			for s := 0; s < c.Seeds; s++ {
				out = append(out, attest.Slot{Campaign: c.ID, Task: t, Agent: a.CID, Seed: s})
			}
		}
	}
	return out
}

// SlotID is a slot's stable ID: the CIDv1 (raw codec, sha2-256) of its canonical JSON,
// {"agent":A,"campaign":C,"seed":N,"task":T} (keys sorted, no spaces, N in decimal), as
// encoding/json writes it.
func SlotID(s attest.Slot) string {
	b, _ := json.Marshal(struct {
		Agent    string `json:"agent"`
		Campaign string `json:"campaign"`
		Seed     int    `json:"seed"`
		Task     string `json:"task"`
	}{s.Agent, s.Campaign, s.Seed, s.Task})
	return agentspec.RawCID(b)
}

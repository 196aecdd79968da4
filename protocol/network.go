package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/scoring"
)

// NetworkDoc is a network's one policy document (docs/protocol-sync.md): its name, its
// labs, and the ledger options every node must share to compute the same root. It is
// identified by the hash of its canonical form; two nodes whose hashes differ run different
// networks, whatever their roots say.
type NetworkDoc struct {
	Version int          `json:"version"`
	Network string       `json:"network"`
	Labs    []NetworkLab `json:"labs"`
	Ledger  LedgerPolicy `json:"ledger"`
	// Revocations are labs' revocations of their nodes or certificates (`evalmesh lab
	// revoke`), each the signed revocation envelope, sorted by revocation ID: the
	// network-wide path for a revocation, signed by a majority with the rest of the
	// document; a node reads those of a changed document without a restart
	// (node/mesh/revoke.go). Absent from the canonical form when empty, so documents without
	// it keep their hash; a build older than the field refuses a document that sets it.
	Revocations []json.RawMessage `json:"revocations,omitempty"`
	// Signatures are the labs' signatures over the canonical form (NetworkPayloadType,
	// SignNetworkDoc). They are not part of the canonical form or the hash: signing does not
	// change the document. Nil when the file has no "signatures" field at all (a document
	// from before signatures: a transition, docs/protocol-sync.md §6); non-nil, possibly
	// empty, when it has one.
	Signatures []NetworkSignature `json:"-"`
}

// NetworkSignature is one lab's signature over a document's canonical form: the ed25519
// signature, base64, of attest.PAE(NetworkPayloadType, Canonical()) by the lab named Lab.
type NetworkSignature struct {
	Lab string `json:"lab"`
	Sig string `json:"sig"`
}

// NetworkPayloadType is the DSSE payload type a lab signs a network document's canonical
// form under: the domain separation that keeps such a signature from meaning anything else.
const NetworkPayloadType = "application/vnd.evalmesh.network+json"

// NetworkLab is one lab of the network: its name and ed25519 public key (base64).
type NetworkLab struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// AgeRecipient is the lab's age recipient (age1…), to which sealed bundles' keys are
	// granted; optional, and absent from the canonical form when empty, so documents
	// without it keep their hash.
	AgeRecipient string `json:"age_recipient,omitempty"`
	// Retired is when the lab left the network (UTC, whole seconds); absent from the
	// canonical form when nil, so documents without it keep their hash. A retired lab keeps
	// what its nodes signed before it (statements whose claimed time is earlier); nothing it
	// signs from then on counts, and it no longer counts towards a signing majority.
	Retired *time.Time `json:"retired,omitempty"`
	// DrawKey is the lab's draw key (base64 ed25519 public key, `evalmesh network draw-key`):
	// where set, the lab's re-scorer and audit draws count only under it, so the lab has one
	// draw per run however many nodes it certifies (attest.DrawKeys). It is not the lab key,
	// which stays off the nodes; every node of the lab holds its private half (HOME/draw.key).
	// Optional, and absent from the canonical form when empty, so documents without it keep
	// their hash and today's rule (each node draws with its own key); a build older than the
	// field refuses a document that sets it (unknown fields are refused).
	DrawKey string `json:"draw_key,omitempty"`
}

// LedgerPolicy holds the ledger options of the network.
type LedgerPolicy struct {
	// Worst is the normalized score's worst anchor: "population" or "estimated".
	Worst string `json:"worst"`
	// BootstrapRounds for the confidence intervals (> 0).
	BootstrapRounds int `json:"bootstrap_rounds"`
	// Replication is how many other labs must re-score a run for it to count.
	Replication int `json:"replication"`
	// Executors are the isolation kinds whose runs count: "container" (the default);
	// "process" runs count only where the network opts in by listing it.
	Executors []string `json:"executors"`
	// EloBootstrap is how the Elo intervals are bootstrapped: "games" (the default,
	// AIRS-Bench's: resample the games, refit each round) or "tasks-linearised" (resample
	// the tasks, one linear step from the MLE per round: variation across tasks, not games;
	// fast enough for thousands of agents). The default is absent from the canonical form,
	// so documents written before the field keep their hash.
	EloBootstrap string `json:"elo_bootstrap,omitempty"`
	// Misconduct is what proven misbehaviour costs (attest.ProvenMisconduct: a re-score a
	// majority of labs overruled, one node equivocating): "set_aside" (the default, absent
	// from the canonical form) sets aside every result of the offending lab; "record" keeps
	// the evidence and changes nothing else.
	Misconduct string `json:"misconduct,omitempty"`
	// Witnesses: "required" (the default, absent from the canonical form) counts a run only
	// if it cites a witness record of its campaign by a lab other than the campaign's
	// (attest.AcceptPolicy.RequireWitness); "off" counts runs without one. A network of one
	// lab has no one to witness and never requires them.
	Witnesses string `json:"witnesses,omitempty"`
	// Limits: "any" (the default, absent from the canonical form) counts runs whatever their
	// executor says of resource limits; "enforced" counts only runs whose executor applied
	// them (attest.AcceptPolicy.RequireEnforcedLimits): not a rootless engine on cgroup v1.
	Limits string `json:"limits,omitempty"`
	// Claims: "required" counts a run only from the node that holds its slot's attempt by
	// the signed claim records (attest.AcceptPolicy.RequireClaimRecords); "off" (absent
	// from the canonical form) counts runs without them. Absent means off, so documents
	// written before the field keep their hash and their roots; `evalmesh network create`
	// writes "required". A network of one lab never requires them. A build older than the
	// field refuses a document that sets it (unknown fields are refused), rather than
	// computing another root.
	Claims string `json:"claims,omitempty"`
	// Rescorers: "drawn" lets only the labs drawn for a run vote on it — each lab's draw its
	// node's RFC 9381 VRF over the run's slot, attempt and lab, carried in its re-score
	// (attest.AcceptPolicy.RescorerDraw, docs/attestation-format.md "Re-scorer draw");
	// "by-run-id" (absent from the canonical form) ranks re-scorers by the run's attestation
	// ID and lets every lab that re-scored vote. Absent means by-run-id, so documents written
	// before the field keep their hash and their roots; `evalmesh network create` writes
	// "drawn". A network of one lab has no one to draw. A build older than the field refuses
	// a document that sets it (unknown fields are refused), rather than computing another
	// root.
	Rescorers string `json:"rescorers,omitempty"`
	// Pardons lists offending envelope IDs (attest.Misconduct.Evidence) whose consequence the
	// labs have lifted: adding one is a document change like any other.
	Pardons []string `json:"pardons,omitempty"`
	// Audits turns on audits by re-execution (docs/scoring.md "Audits"): nodes draw and
	// re-run other labs' runs and the ledger applies the audits' verdicts. nil, absent from
	// the canonical form, is off, so documents written before the field keep their hash and
	// their roots; present, even as {}, it is on (DefaultAuditRate, unaudited results
	// counting, unless it says otherwise).
	Audits *AuditPolicy `json:"audits,omitempty"`
	// PinFactor is how many labs must hold each object a counted result depends on (bundle,
	// submission, logs, verdicts, agent image by CID): 0, the default, absent from the
	// canonical form so documents without it keep their hash, means DefaultPinFactor; all
	// active labs when they are fewer (NetworkDoc.PinFactor, protocol/holders.go).
	PinFactor int `json:"pin_factor,omitempty"`
	// Caps are the per-lab caps at admission (attest.AcceptPolicy.MaxAgentsPerLab,
	// MaxCampaignsPerLab; attest.Outcome.AdmitCampaigns). nil, absent from the canonical
	// form, is no cap, so documents written before the field keep their hash and roots;
	// `evalmesh network create` writes DefaultCaps. A build older than the field refuses a
	// document that sets it (unknown fields are refused) rather than computing another root.
	Caps *LedgerCaps `json:"caps,omitempty"`
	// Scorers maps a sealed task bundle's CID to the names of the labs that score it
	// (runners without labels, network_scorers.go): only they are granted its key, they do
	// not run its slots, and its runs, signed without a score by labs that hold no key,
	// count with a majority of their verdicts (attest.AcceptPolicy.Scorers). nil, absent
	// from the canonical form, keeps today's rule, so documents without it keep their hash
	// and roots. A build older than the field refuses a document that sets it.
	Scorers map[string][]string `json:"scorers,omitempty"`
}

// LedgerCaps bounds what one lab can put on the ledger: a campaign that would take its lab
// past either cap is refused whole at admission. 0 (absent) is no cap on that count.
type LedgerCaps struct {
	AgentsPerLab    int `json:"agents_per_lab,omitempty"`
	CampaignsPerLab int `json:"campaigns_per_lab,omitempty"`
}

// NewNetworkRules turns on in p every rule a new network document carries: the rules that
// hold against a dishonest trusted lab (docs/design.md §9). Witness records required and
// proven misconduct set aside are the defaults already (absent from the canonical form);
// claim records required, re-scorers drawn and DefaultCaps are off where a document leaves
// them out, so that older documents keep their hash and their roots. It leaves the other
// fields (replication, executors, limits, audits, pin factor, scorers) to the caller.
// `evalmesh network create` and the demo network (examples/demo.AsNetworkCreate) both
// write their documents through it, so the demo runs under the rules a real network does.
func NewNetworkRules(p *LedgerPolicy) {
	p.Witnesses = WitnessesRequired
	p.Misconduct = MisconductSetAside
	p.Claims = ClaimsRequired
	p.Rescorers = RescorersDrawn
	caps := DefaultCaps
	p.Caps = &caps
}

// DefaultCaps are the caps `evalmesh network create` writes: room for any lab's honest
// work (a few dozen agents, a campaign a day for months) while a lab signing cheap
// campaigns under thousands of agent specs adds at most this many rows and campaigns.
var DefaultCaps = LedgerCaps{AgentsPerLab: 64, CampaignsPerLab: 512}

// AuditPolicy is the network's audit rate and what becomes of results nobody can audit.
type AuditPolicy struct {
	// Rate is the expected number of audits of a run of ordinary impact, in [0, MaxAuditRate]
	// (DefaultAuditRate when zero); runs of higher impact are audited more (ImpactWeight).
	// Above 1 it is replication: at a rate of at least the number of other labs, every run
	// is re-executed by every other lab that can run it (AuditThreshold caps each lab's
	// draw at certain), as BOINC's replicated validation does.
	Rate float64 `json:"rate,omitempty"`
	// Unaudited is what becomes of the results of agents other labs cannot re-run (weights
	// only on the runner's disks, network access): "count" (the default) or "hold" (they
	// do not count).
	Unaudited string `json:"unaudited,omitempty"`
	// HoldMovers: a lab's results of an agent that would together move its rank (or are
	// the outliers of a pivotal group) do not count until audits clear them
	// (attest.HoldMovers). Off unless set: a held result of a stochastic agent clears only
	// by the pair test over other labs' runs of the same (agent, task), which a network with
	// few labs or seeds may never gather (scoring.md "Holding rank movers").
	HoldMovers bool `json:"hold_movers,omitempty"`
}

// Unaudited policies of AuditPolicy.Unaudited.
const (
	UnauditedCount = "count"
	UnauditedHold  = "hold"
)

// AuditRate is the network's audit rate (DefaultAuditRate unless the document sets one).
func (d *NetworkDoc) AuditRate() float64 {
	if d.Ledger.Audits == nil || d.Ledger.Audits.Rate == 0 {
		return DefaultAuditRate
	}
	return d.Ledger.Audits.Rate
}

// AuditsOn says whether the network audits by re-execution (ledger.audits is set).
func (d *NetworkDoc) AuditsOn() bool { return d.Ledger.Audits != nil }

// UnauditedCounts says whether results no other lab can re-run count.
func (d *NetworkDoc) UnauditedCounts() bool {
	return d.Ledger.Audits == nil || d.Ledger.Audits.Unaudited != UnauditedHold
}

// Misconduct policies of LedgerPolicy.Misconduct.
const (
	MisconductSetAside = "set_aside"
	MisconductRecord   = "record"
)

// Witness policies of LedgerPolicy.Witnesses.
const (
	WitnessesRequired = "required"
	WitnessesOff      = "off"
)

// Limits policies of LedgerPolicy.Limits.
const (
	LimitsAny      = "any"
	LimitsEnforced = "enforced"
)

// RequiresWitness says whether runs must cite another lab's witness of their campaign.
func (d *NetworkDoc) RequiresWitness() bool {
	return d.Ledger.Witnesses != WitnessesOff && len(d.Labs) >= 2
}

// Claim record policies of LedgerPolicy.Claims.
const (
	ClaimsRequired = "required"
	ClaimsOff      = "off"
)

// Re-scorer rules of LedgerPolicy.Rescorers.
const (
	RescorersDrawn   = "drawn"
	RescorersByRunID = "by-run-id"
)

// DrawsRescorers says whether only the labs drawn for a run vote on it.
func (d *NetworkDoc) DrawsRescorers() bool {
	return d.Ledger.Rescorers == RescorersDrawn && len(d.Labs) >= 2
}

// RequiresClaimRecords says whether a run counts only from its attempt's holder by the
// signed claim records.
func (d *NetworkDoc) RequiresClaimRecords() bool {
	return d.Ledger.Claims == ClaimsRequired && len(d.Labs) >= 2
}

// NetworkDocVersion is the document version this build writes and reads.
const NetworkDocVersion = 1

// MaxNetworkDocSize bounds a document a reader accepts.
const MaxNetworkDocSize = 1 << 20

// ParseNetworkDoc reads a network document, fills defaults and validates it. Unknown
// fields are refused: a field this build ignores could change another build's root.
func ParseNetworkDoc(b []byte) (*NetworkDoc, error) {
	if len(b) > MaxNetworkDocSize {
		return nil, fmt.Errorf("network document is %d bytes, over %d", len(b), MaxNetworkDocSize)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f networkFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("network document: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("network document: data after the object")
	}
	d := &f.NetworkDoc
	if err := d.normalize(); err != nil {
		return nil, err
	}
	if f.Signatures != nil {
		d.Signatures = append([]NetworkSignature{}, (*f.Signatures)...)
	}
	return d, nil
}

// networkFile is the file form of a document: the document's fields and its signatures.
type networkFile struct {
	NetworkDoc
	Signatures *[]NetworkSignature `json:"signatures,omitempty"`
}

// File is the document as a file holds it: the canonical fields, indented for people, and
// its signatures ("signatures" present whenever Signatures is non-nil).
func (d *NetworkDoc) File() []byte {
	var c NetworkDoc
	if err := json.Unmarshal(d.Canonical(), &c); err != nil {
		panic("protocol: canonical network document does not decode: " + err.Error())
	}
	f := networkFile{NetworkDoc: c}
	if d.Signatures != nil {
		sigs := slices.Clone(d.Signatures)
		f.Signatures = &sigs
	}
	b, _ := json.MarshalIndent(f, "", "  ")
	return append(b, '\n')
}

func (d *NetworkDoc) normalize() error {
	if d.Version != NetworkDocVersion {
		return fmt.Errorf("network document version %d: this build reads version %d", d.Version, NetworkDocVersion)
	}
	if d.Network == "" || strings.ContainsAny(d.Network, "/ \t\n") {
		return fmt.Errorf("network document: network %q must be a non-empty name without slashes or spaces", d.Network)
	}
	seen, seenDraw := map[string]bool{}, map[string]string{}
	for i := range d.Labs {
		l := &d.Labs[i]
		k, err := base64.StdEncoding.DecodeString(l.Key)
		if err != nil || len(k) != 32 {
			return fmt.Errorf("network document: lab %q: key must be a base64 ed25519 public key (32 bytes)", l.Name)
		}
		if l.AgeRecipient != "" {
			if _, err := age.ParseX25519Recipient(l.AgeRecipient); err != nil {
				return fmt.Errorf("network document: lab %q: age_recipient %q: %v (want the age1… recipient of the lab's lab-age.key)", l.Name, l.AgeRecipient, err)
			}
		}
		if l.DrawKey != "" {
			spelled, dk, err := canonicalDrawKey(l.DrawKey)
			if err != nil {
				return fmt.Errorf("network document: lab %q: %w", l.Name, err)
			}
			l.DrawKey = spelled
			if bytes.Equal(dk, k) {
				return fmt.Errorf("network document: lab %q: draw_key is the lab key; every node holds the draw key's private half and the lab key stays off the nodes: make a draw key of its own with `evalmesh network draw-key`", l.Name)
			}
			// By the key's bytes, not its spelling: two spellings of one key are one key.
			if other := seenDraw[string(dk)]; other != "" {
				return fmt.Errorf("network document: labs %q and %q have the same draw_key: each lab draws with a key of its own", other, l.Name)
			}
			seenDraw[string(dk)] = l.Name
		}
		if l.Name == "" || seen[l.Name] {
			return fmt.Errorf("network document: lab names must be non-empty and distinct (%q)", l.Name)
		}
		seen[l.Name] = true
	}
	for i := range d.Labs {
		if r := d.Labs[i].Retired; r != nil {
			if r.IsZero() {
				return fmt.Errorf("network document: lab %q: retired is the zero time; leave it out, or give the time the lab left", d.Labs[i].Name)
			}
			t := r.UTC().Truncate(time.Second)
			if t.Year() < 1 || t.Year() > 9999 {
				return fmt.Errorf("network document: lab %q: retired %s is outside years 1 to 9999 (UTC)", d.Labs[i].Name, r)
			}
			d.Labs[i].Retired = &t
		}
	}
	slices.SortFunc(d.Labs, func(a, b NetworkLab) int { return strings.Compare(a.Name, b.Name) })
	if err := d.normalizeRevocations(); err != nil {
		return err
	}
	p := &d.Ledger
	if p.Worst == "" {
		p.Worst = "population"
	}
	if p.Worst != "population" && p.Worst != "estimated" {
		return fmt.Errorf("network document: ledger.worst %q: use population or estimated", p.Worst)
	}
	if p.BootstrapRounds == 0 {
		p.BootstrapRounds = 100
	}
	if p.BootstrapRounds < 0 || p.Replication < 0 {
		return fmt.Errorf("network document: ledger.bootstrap_rounds and ledger.replication must be >= 0")
	}
	if p.PinFactor < 0 {
		return fmt.Errorf("network document: ledger.pin_factor %d: give how many labs must hold each object, 1 or more (0 or absent: %d)", p.PinFactor, DefaultPinFactor)
	}
	if len(p.Executors) == 0 {
		p.Executors = []string{string(attest.IsolationContainer)}
	}
	for _, e := range p.Executors {
		if e != string(attest.IsolationContainer) && e != string(attest.IsolationProcess) {
			return fmt.Errorf("network document: ledger.executors: %q is not %s or %s", e, attest.IsolationContainer, attest.IsolationProcess)
		}
	}
	slices.Sort(p.Executors)
	p.Executors = slices.Compact(p.Executors)
	eb, err := scoring.ResolveEloBootstrap(p.EloBootstrap)
	if err != nil {
		return fmt.Errorf("network document: ledger.elo_bootstrap: %w", err)
	}
	p.EloBootstrap = eb
	if eb == scoring.EloBootstrapGames {
		p.EloBootstrap = ""
	}
	for _, f := range []struct {
		name       string
		v          *string
		def, other string
	}{
		{"misconduct", &p.Misconduct, MisconductSetAside, MisconductRecord},
		{"witnesses", &p.Witnesses, WitnessesRequired, WitnessesOff},
		{"limits", &p.Limits, LimitsAny, LimitsEnforced},
		{"claims", &p.Claims, ClaimsOff, ClaimsRequired},
		{"rescorers", &p.Rescorers, RescorersByRunID, RescorersDrawn},
	} {
		if err := normalizeTwoWay(f.name, f.v, f.def, f.other); err != nil {
			return err
		}
	}
	slices.Sort(p.Pardons)
	p.Pardons = slices.Compact(p.Pardons)
	for _, id := range p.Pardons {
		if id == "" {
			return fmt.Errorf("network document: ledger.pardons: an empty envelope ID")
		}
	}
	if len(p.Pardons) == 0 {
		p.Pardons = nil
	}
	if c := p.Caps; c != nil {
		if c.AgentsPerLab < 0 || c.CampaignsPerLab < 0 {
			return fmt.Errorf("network document: ledger.caps {agents_per_lab %d, campaigns_per_lab %d}: give each cap as 1 or more, or leave it out for none (%d and %d are what `network create` writes)",
				c.AgentsPerLab, c.CampaignsPerLab, DefaultCaps.AgentsPerLab, DefaultCaps.CampaignsPerLab)
		}
		if *c == (LedgerCaps{}) {
			p.Caps = nil // no cap stays out of the canonical form: older documents keep their hash
		}
	}
	if err := d.normalizeScorers(); err != nil {
		return err
	}
	if a := p.Audits; a != nil {
		if math.IsNaN(a.Rate) || a.Rate < 0 || a.Rate > MaxAuditRate {
			return fmt.Errorf("network document: ledger.audits.rate %v: use a number from 0 to %v (expected audits per run of ordinary impact, %v by default; at least the number of other labs re-executes every run everywhere)", a.Rate, MaxAuditRate, DefaultAuditRate)
		}
		if a.Rate == DefaultAuditRate {
			a.Rate = 0
		}
		switch a.Unaudited {
		case "", UnauditedCount:
			a.Unaudited = ""
		case UnauditedHold:
		default:
			return fmt.Errorf("network document: ledger.audits.unaudited %q: use %s (the default) or %s", a.Unaudited, UnauditedCount, UnauditedHold)
		}
	}
	return nil
}

// AcceptPolicy is the acceptance policy the document sets (attest.AcceptPolicy); the
// ledger's task and agent names and campaign windows come from the campaigns, not from it.
func (d *NetworkDoc) AcceptPolicy() attest.AcceptPolicy {
	p := attest.AcceptPolicy{
		Replication:         d.Ledger.Replication,
		AllowProcessRuns:    d.CountsExecutor(attest.IsolationProcess),
		SetAsideOffenders:   d.Ledger.Misconduct != MisconductRecord,
		RequireWitness:      d.RequiresWitness(),
		RequireClaimRecords: d.RequiresClaimRecords(),
		// Runs a rootless engine on cgroup v1 started without limits count only where the
		// network says so.
		RequireEnforcedLimits: d.Ledger.Limits == LimitsEnforced,
		Scorers:               d.scorerIDs(),
	}
	if c := d.Ledger.Caps; c != nil {
		p.MaxAgentsPerLab, p.MaxCampaignsPerLab = c.AgentsPerLab, c.CampaignsPerLab
	}
	keys := d.DrawKeys()
	if a := d.Ledger.Audits; a != nil {
		p.Audits = &attest.AuditRules{HoldUnaudited: a.Unaudited == UnauditedHold, DrawKeys: keys, HoldMovers: a.HoldMovers}
	}
	if d.DrawsRescorers() {
		// Every lab of the document is a candidate (a retired one is drawn as before and,
		// silent, stood in for): nodes read the same labs from the trust store it makes.
		draw := &attest.RescorerDraw{Replication: d.Ledger.Replication, Keys: keys}
		for _, l := range d.Labs {
			if k, err := base64.StdEncoding.DecodeString(l.Key); err == nil && len(k) == 32 {
				draw.Labs = append(draw.Labs, attest.LabID(k))
			}
		}
		slices.Sort(draw.Labs)
		p.RescorerDraw = draw
	}
	if len(d.Ledger.Pardons) > 0 {
		p.Pardoned = map[string]bool{}
		for _, id := range d.Ledger.Pardons {
			p.Pardoned[id] = true
		}
	}
	return p
}

// canonicalDrawKey reads a draw key in any base64 spelling (standard or URL alphabet, with
// or without padding) and returns the spelling the document stores it in, with the key. A
// spelling attest.ParseDrawKey accepts is kept as written: documents that held one were
// valid before, and rewriting it would move their hash and void their signatures (the
// standard padded spelling `evalmesh network draw-key` writes is such a one). The others,
// refused before, are stored as that standard padded spelling, so the document's hash does
// not depend on how a lab pasted its key.
func canonicalDrawKey(s string) (string, ed25519.PublicKey, error) {
	k, err := attest.ParseDrawKey(s)
	if err == nil {
		return s, k, nil
	}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, derr := enc.Strict().DecodeString(s); derr == nil && len(b) == ed25519.PublicKeySize {
			return base64.StdEncoding.EncodeToString(b), ed25519.PublicKey(b), nil
		}
	}
	return "", nil, err
}

// DrawKeys are the draw keys the document names, by lab ID; nil where it names none.
func (d *NetworkDoc) DrawKeys() attest.DrawKeys {
	var keys attest.DrawKeys
	for i := range d.Labs {
		l := &d.Labs[i]
		k, err := base64.StdEncoding.DecodeString(l.Key)
		dk, derr := attest.ParseDrawKey(l.DrawKey)
		if l.DrawKey == "" || err != nil || len(k) != 32 || derr != nil {
			continue
		}
		if keys == nil {
			keys = attest.DrawKeys{}
		}
		keys[attest.LabID(k)] = dk
	}
	return keys
}

// Canonical is the document's canonical JSON: defaults filled, labs sorted by name,
// executors sorted, no insignificant whitespace. Its sha256 is the document's hash.
func (d *NetworkDoc) Canonical() []byte {
	c := *d
	c.Labs = slices.Clone(d.Labs)
	c.Signatures = nil
	c.Ledger.Executors = slices.Clone(d.Ledger.Executors)
	c.Revocations = slices.Clone(d.Revocations)
	c.Ledger.Pardons = slices.Clone(d.Ledger.Pardons)
	if d.Ledger.Audits != nil {
		a := *d.Ledger.Audits
		c.Ledger.Audits = &a
	}
	if d.Ledger.Caps != nil {
		k := *d.Ledger.Caps
		c.Ledger.Caps = &k
	}
	if d.Ledger.Scorers != nil {
		c.Ledger.Scorers = map[string][]string{}
		for b, s := range d.Ledger.Scorers {
			c.Ledger.Scorers[b] = slices.Clone(s)
		}
	}
	if err := c.normalize(); err != nil {
		panic("protocol: Canonical of an invalid network document: " + err.Error())
	}
	b, _ := json.Marshal(c)
	return b
}

// Hash is the hex sha256 of Canonical: the network document's identity on /heads.
func (d *NetworkDoc) Hash() string {
	s := sha256.Sum256(d.Canonical())
	return hex.EncodeToString(s[:])
}

// ScoringOptions are the document's scoring options.
func (d *NetworkDoc) ScoringOptions() scoring.Options {
	return scoring.Options{Worst: d.Ledger.Worst, BootstrapRounds: d.Ledger.BootstrapRounds, EloBootstrap: d.Ledger.EloBootstrap}
}

// CountsExecutor says whether runs under this isolation kind count in the network.
func (d *NetworkDoc) CountsExecutor(isolation string) bool {
	return slices.Contains(d.Ledger.Executors, isolation)
}

// TrustStore is a trust store holding the document's labs.
func (d *NetworkDoc) TrustStore() (*attest.TrustStore, error) {
	t := attest.NewTrustStore()
	for _, l := range d.Labs {
		k, _ := base64.StdEncoding.DecodeString(l.Key)
		id, err := t.AddLab(l.Name, k)
		if err != nil {
			return nil, fmt.Errorf("network document: lab %q: %w", l.Name, err)
		}
		if l.Retired != nil {
			t.RetireLab(id, *l.Retired)
		}
		if l.AgeRecipient != "" {
			if err := t.SetAgeRecipient(id, l.AgeRecipient); err != nil {
				return nil, fmt.Errorf("network document: lab %q: %w", l.Name, err)
			}
		}
	}
	rs, err := d.RevocationList()
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if err := t.AddRevocation(r); err != nil {
			return nil, fmt.Errorf("network document: revocation %s: %w", r.ID, err)
		}
	}
	return t, nil
}

// RevocationList is the document's revocations, each with its signature checked.
func (d *NetworkDoc) RevocationList() ([]*attest.Revocation, error) {
	out := make([]*attest.Revocation, 0, len(d.Revocations))
	for i, raw := range d.Revocations {
		r, err := attest.ParseRevocation(raw)
		if err != nil {
			return nil, fmt.Errorf("network document: revocations[%d]: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// normalizeRevocations checks each revocation (a valid signature of a lab of the document:
// another lab's revocation takes away nothing the network trusts) and sorts them by ID,
// dropping repeats and insignificant whitespace.
func (d *NetworkDoc) normalizeRevocations() error {
	labs := map[string]bool{}
	for _, l := range d.Labs {
		k, _ := base64.StdEncoding.DecodeString(l.Key)
		labs[attest.LabID(k)] = true
	}
	ids := map[string]json.RawMessage{}
	for i, raw := range d.Revocations {
		r, err := attest.ParseRevocation(raw)
		if err != nil {
			return fmt.Errorf("network document: revocations[%d]: %w (add it with `evalmesh network revoke FILE --revocation REV.json`)", i, err)
		}
		if !labs[r.Lab] {
			return fmt.Errorf("network document: revocations[%d] (%s) is by lab %s, which is not a lab of the document", i, r.ID, r.Lab)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return fmt.Errorf("network document: revocations[%d]: %w", i, err)
		}
		ids[r.ID] = b.Bytes()
	}
	d.Revocations = nil
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		d.Revocations = append(d.Revocations, ids[id])
	}
	return nil
}

// normalizeTwoWay checks a two-valued ledger policy field and writes its default as "", so
// the canonical form leaves it out and documents written before the field keep their hash.
func normalizeTwoWay(field string, v *string, def, other string) error {
	switch *v {
	case "", def:
		*v = ""
		return nil
	case other:
		return nil
	}
	return fmt.Errorf("network document: ledger.%s %q: use %s (the default) or %s", field, *v, def, other)
}

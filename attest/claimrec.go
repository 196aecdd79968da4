package attest

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Claim and release records (docs/attestation-format.md, "Claim and release records";
// docs/design.md §9, "Pre-emption"): the signed counterparts of the gossip claim and
// release, carried in the synced set like attestations, so every node's ledger sees the
// same ones. The holder of an attempt is a pure function of the claim records
// (AttemptHolders); where the policy requires them (AcceptPolicy.RequireClaimRecords) only
// the holder's run of an attempt counts, and only the holder's release answers it.
const (
	// PredicateClaimV1 marks a claim record: the signer's node took one attempt of a slot
	// and signed this before its run started.
	PredicateClaimV1 = "https://evalmesh.dev/claim/v1"
	// PredicateReleaseV1 marks a release record: the holder of an attempt gave it up
	// without a run attestation.
	PredicateReleaseV1 = "https://evalmesh.dev/release/v1"
)

// Release reasons (ReleasePredicate.Reason).
const (
	ReleaseInfra = "infra" // the node's infrastructure failed; another node may retry
	ReleaseAgent = "agent" // the agent failed in a way that produced no run attestation
	ReleaseAbort = "abort" // the run was cut short (shutdown, pre-empted, deadline)
)

// ClaimPredicate is a claim record's predicate. Its one subject is the campaign's envelope
// (sha256 of its bytes), as for a witness record.
type ClaimPredicate struct {
	Slot    Slot   `json:"slot"`
	Attempt int    `json:"attempt"` // from 1
	Node    string `json:"node"`    // the signer's peer ID
	Lab     string `json:"lab"`     // the signer's lab ID
	// Witness is the ID of a witness record of the campaign by a lab other than the
	// campaign's; required where witnesses are (AcceptPolicy.RequireWitness).
	Witness string `json:"witness,omitempty"`
	// Time is when the signer claimed, by its clock: informational only, it decides nothing.
	Time time.Time `json:"time"`
}

// ReleasePredicate is a release record's predicate; its one subject is the campaign.
type ReleasePredicate struct {
	Slot    Slot      `json:"slot"`
	Attempt int       `json:"attempt"`
	Node    string    `json:"node"`
	Lab     string    `json:"lab"`
	Reason  string    `json:"reason"` // ReleaseInfra, ReleaseAgent or ReleaseAbort
	Detail  string    `json:"detail,omitempty"`
	Time    time.Time `json:"time"` // informational only
}

// maxReleaseDetail bounds ReleasePredicate.Detail: a reason for a person, not a log.
const maxReleaseDetail = 1024

func validateSlotAttempt(s Slot, attempt int, node, lab string, at time.Time) error {
	switch {
	case s.Campaign == "" || s.Task == "" || s.Agent == "":
		return errors.New("slot needs campaign, task and agent")
	case s.Seed < 0:
		return fmt.Errorf("slot seed %d is negative", s.Seed)
	case attempt < 1:
		return fmt.Errorf("attempt %d: attempts count from 1", attempt)
	case !strings.HasPrefix(lab, "lab:"):
		return fmt.Errorf("lab %q is not a lab ID (lab:…)", lab)
	case node == "":
		return errors.New("node (the signer) is missing")
	case at.IsZero():
		return errors.New("time is required")
	}
	_, err := bundleDigest(s.Campaign)
	return err
}

func (c *ClaimPredicate) validate() error {
	return validateSlotAttempt(c.Slot, c.Attempt, c.Node, c.Lab, c.Time)
}

func (r *ReleasePredicate) validate() error {
	if err := validateSlotAttempt(r.Slot, r.Attempt, r.Node, r.Lab, r.Time); err != nil {
		return err
	}
	switch r.Reason {
	case ReleaseInfra, ReleaseAgent, ReleaseAbort:
	default:
		return fmt.Errorf("reason %q: want %s, %s or %s", r.Reason, ReleaseInfra, ReleaseAgent, ReleaseAbort)
	}
	if len(r.Detail) > maxReleaseDetail {
		return fmt.Errorf("detail is %d bytes, over %d", len(r.Detail), maxReleaseDetail)
	}
	return nil
}

// checkCampaignSubject requires the statement's one subject to be the campaign's envelope.
func checkCampaignSubject(st *Statement, what, campaign string) error {
	d, _ := bundleDigest(campaign)
	if len(st.Subject) != 1 || st.Subject[0].Digest["sha256"] != d {
		return refuse(ReasonMalformedPredicate, "%s of %s must have the campaign as its one subject (sha256 %s)", what, campaign, d)
	}
	return nil
}

func decodeClaimPredicate(st *Statement) (*ClaimPredicate, error) {
	var c ClaimPredicate
	if len(st.Predicate) == 0 {
		return nil, refuse(ReasonMalformedPredicate, "claim predicate is missing")
	}
	if err := strictUnmarshal(st.Predicate, &c, false); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "claim predicate: %v", err)
	}
	if err := c.validate(); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "claim predicate: %v", err)
	}
	if err := checkCampaignSubject(st, "claim record", c.Slot.Campaign); err != nil {
		return nil, err
	}
	return &c, nil
}

func decodeReleasePredicate(st *Statement) (*ReleasePredicate, error) {
	var r ReleasePredicate
	if len(st.Predicate) == 0 {
		return nil, refuse(ReasonMalformedPredicate, "release predicate is missing")
	}
	if err := strictUnmarshal(st.Predicate, &r, false); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "release predicate: %v", err)
	}
	if err := r.validate(); err != nil {
		return nil, refuse(ReasonMalformedPredicate, "release predicate: %v", err)
	}
	if err := checkCampaignSubject(st, "release record", r.Slot.Campaign); err != nil {
		return nil, err
	}
	return &r, nil
}

// signRecord signs a predicate about slot's campaign by the node of key, under cert.
func signRecord(key crypto.PrivKey, cert *NodeCert, predicateType string, campaign string, pred any) ([]byte, string, error) {
	d, err := bundleDigest(campaign)
	if err != nil {
		return nil, "", err
	}
	st, err := NewStatement([]Subject{{Name: "campaign", Digest: map[string]string{"sha256": d}}}, predicateType, pred)
	if err != nil {
		return nil, "", err
	}
	return Sign(key, cert, st)
}

// NewClaimRecord signs a claim record of attempt of slot by the node of key, under cert,
// citing witness ("" where none is required), at now.
func NewClaimRecord(key crypto.PrivKey, cert *NodeCert, slot Slot, attempt int, witness string, now time.Time) (envelope []byte, id string, err error) {
	node, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	c := ClaimPredicate{Slot: slot, Attempt: attempt, Node: node.String(), Lab: cert.Lab, Witness: witness, Time: now.UTC().Truncate(time.Second)}
	if err := c.validate(); err != nil {
		return nil, "", fmt.Errorf("claim record: %w", err)
	}
	return signRecord(key, cert, PredicateClaimV1, slot.Campaign, c)
}

// NewReleaseRecord signs a release record of attempt of slot by the node of key.
func NewReleaseRecord(key crypto.PrivKey, cert *NodeCert, slot Slot, attempt int, reason, detail string, now time.Time) (envelope []byte, id string, err error) {
	node, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, "", err
	}
	if len(detail) > maxReleaseDetail {
		detail = detail[:maxReleaseDetail]
	}
	r := ReleasePredicate{Slot: slot, Attempt: attempt, Node: node.String(), Lab: cert.Lab, Reason: reason, Detail: detail, Time: now.UTC().Truncate(time.Second)}
	if err := r.validate(); err != nil {
		return nil, "", fmt.Errorf("release record: %w", err)
	}
	return signRecord(key, cert, PredicateReleaseV1, slot.Campaign, r)
}

// DecodeClaimRecord decodes a claim record's statement (the envelope's payload).
func DecodeClaimRecord(payload []byte) (*ClaimPredicate, error) {
	st, err := ParseStatement(payload)
	if err != nil {
		return nil, refuse(ReasonMalformedStatement, "%v", err)
	}
	if st.PredicateType != PredicateClaimV1 {
		return nil, refuse(ReasonMalformedPredicate, "predicate type %q is not a claim record (%s)", st.PredicateType, PredicateClaimV1)
	}
	return decodeClaimPredicate(st)
}

// DecodeReleaseRecord decodes a release record's statement (the envelope's payload).
func DecodeReleaseRecord(payload []byte) (*ReleasePredicate, error) {
	st, err := ParseStatement(payload)
	if err != nil {
		return nil, refuse(ReasonMalformedStatement, "%v", err)
	}
	if st.PredicateType != PredicateReleaseV1 {
		return nil, refuse(ReasonMalformedPredicate, "predicate type %q is not a release record (%s)", st.PredicateType, PredicateReleaseV1)
	}
	return decodeReleasePredicate(st)
}

// Attempt names one attempt of one slot.
type Attempt struct {
	Slot    Slot
	Attempt int
}

// ClaimRank orders the claim records of one attempt; the least holds it. Its first key is
// sha256(slot ‖ attempt ‖ principal), which the claimant cannot choose: a lab cannot
// cheaply mint lab keys. It can mint node IDs, so the node ID only breaks ties within one
// principal. Not the record's time, its ID or anything else the signer picks.
type ClaimRank struct {
	Draw [32]byte
	Node string
}

// RankOf is the ClaimRank of a claim of attempt of slot by node of principal.
func RankOf(slot Slot, attempt int, principal, node string) ClaimRank {
	// The bytes are "evalmesh/claim/v1" and each field, NUL-separated, integers in decimal.
	buf := make([]byte, 0, 64+len(slot.Campaign)+len(slot.Task)+len(slot.Agent)+len(principal))
	buf = append(buf, "evalmesh/claim/v1\x00"...)
	buf = append(append(buf, slot.Campaign...), 0)
	buf = append(append(buf, slot.Task...), 0)
	buf = append(append(buf, slot.Agent...), 0)
	buf = append(strconv.AppendInt(buf, int64(slot.Seed), 10), 0)
	buf = append(strconv.AppendInt(buf, int64(attempt), 10), 0)
	buf = append(buf, principal...)
	return ClaimRank{Draw: sha256.Sum256(buf), Node: node}
}

// Less reports whether r holds an attempt before o.
func (r ClaimRank) Less(o ClaimRank) bool {
	return cmp.Or(bytes.Compare(r.Draw[:], o.Draw[:]), cmp.Compare(r.Node, o.Node)) < 0
}

// AttemptHolders is the holder of every attempt the claim records name: among the records
// of one (slot, attempt) that valid admits (nil admits all), the one of least ClaimRank;
// copies by one node are one claim (the least ID stands for them). Pure: any order of the
// same records gives the same holders.
func AttemptHolders(claims []*Verified, valid func(*Verified) bool) map[Attempt]*Verified {
	out := map[Attempt]*Verified{}
	rank := map[Attempt]ClaimRank{}
	for _, v := range claims {
		if v.Claim == nil || (valid != nil && !valid(v)) {
			continue
		}
		k := Attempt{v.Claim.Slot, v.Claim.Attempt}
		r := RankOf(k.Slot, k.Attempt, v.Principal(), v.Node)
		prev, ok := out[k]
		switch {
		case !ok, r.Less(rank[k]):
		case r == rank[k] && v.ID < prev.ID:
		default:
			continue
		}
		out[k], rank[k] = v, r
	}
	return out
}

// claimValid is the check a claim record passes to hold its attempt under p: a campaign
// the ledger knows and, where witnesses are required, a cited witness record of it by a
// lab other than the campaign's (so a claim, like a run, cannot predate the campaign).
func (o Outcome) claimValid(p AcceptPolicy) func(*Verified) bool {
	return func(v *Verified) bool {
		if slices.Contains(p.Scorers[v.Claim.Slot.Task], v.Principal()) {
			return false // a scoring lab may not run the task (scorers.go): its claims hold nothing
		}
		if p.Campaigns == nil {
			return true
		}
		w, ok := p.Campaigns[v.Claim.Slot.Campaign]
		if !ok {
			return false
		}
		return !p.RequireWitness || o.witnessOK(v.Claim.Witness, v.Claim.Slot.Campaign, w) == ""
	}
}

// Holders is AttemptHolders over o's claim records under p's checks.
func (o Outcome) Holders(p AcceptPolicy) map[Attempt]*Verified {
	return AttemptHolders(o.Claims, o.claimValid(p))
}

// WithUnblockedAttempts is o, where the network requires claim records, with the later
// attempts unblockLaterAttempts frees moved into Runs, and their re-scores — orphans until
// then, Reconcile having filed only the lowest attempt's — attached to them. Without the
// re-scores such a run counted with no other lab's vote ("too few replicators"), and a lab
// whose run a late record took and which ran the slot again itself never filled the cell
// (TestDishonestLabCannotTakeASlotByReopening). Before WithRescorerDraw, so the moved runs
// have their drawn re-scorers too. Runs once: the blocked run stays in Runs (excluded as not
// its attempt's holder's), and a second pass would move the next attempt after it.
func (o Outcome) WithUnblockedAttempts(p AcceptPolicy) Outcome {
	if !p.RequireClaimRecords || o.unblocked {
		return o
	}
	o.unblocked = true
	runs, later := unblockLaterAttempts(o.Runs, o.LaterAttempts, o.Holders(p))
	if len(runs) == len(o.Runs) {
		return o
	}
	moved := map[string]*Verified{}
	for _, v := range runs {
		if o.run(v.ID) == nil {
			moved[v.ID] = v
		}
	}
	o.Runs, o.LaterAttempts = runs, later
	o.Rescores, o.Verdicts, o.rescoreByID = maps.Clone(o.Rescores), maps.Clone(o.Verdicts), maps.Clone(o.rescoreByID)
	o.Disagreements = slices.Clone(o.Disagreements)
	var orphans []*Verified
	for _, r := range o.Orphans {
		if run := moved[r.Rescore.Run]; run != nil {
			o.attach(r, run)
			continue
		}
		orphans = append(orphans, r)
	}
	o.Orphans = orphans
	if o.voters != nil {
		o.voters = nil // drawn again by the caller, over the runs as they are now
	}
	return o
}

// unblockLaterAttempts moves runs from later (Outcome.LaterAttempts) into runs
// (Outcome.Runs) where the lower attempt that blocks them can never count through its
// principal's choice: its node does not hold its attempt, and no node of its principal
// does (another lab's better-ranked record took it, or nobody claimed it). Without this, a
// run an honest node finished just as a dishonest lab's better-ranked record of the attempt
// arrived (a race under load) would block the honest lab's run of the slot's next attempt,
// and the cell would stay empty on every node. An attempt its own principal holds, through
// any of its nodes, still blocks: a lab cannot re-roll a result by outranking its own run
// from a second node. Pure: a function of its inputs, in any order.
func unblockLaterAttempts(runs, later []*Verified, holders map[Attempt]*Verified) ([]*Verified, []*Verified) {
	stands := func(v *Verified) bool {
		h, ok := holders[Attempt{v.Run.Slot, v.Run.AttemptNumber()}]
		return ok && h.Principal() == v.Principal() // its principal holds it: it stands
	}
	type key struct {
		slot      Slot
		principal string
	}
	pending := map[key][]*Verified{}
	for _, v := range later {
		k := key{v.Run.Slot, v.Principal()}
		pending[k] = append(pending[k], v)
	}
	if len(pending) == 0 {
		return runs, later
	}
	out := slices.Clone(runs)
	moved := map[string]bool{}
	for _, v := range runs {
		k := key{v.Run.Slot, v.Principal()}
		cur := v
		for !stands(cur) && len(pending[k]) > 0 {
			// The next attempt of this principal's: the lowest attempt, then the least ID.
			next := slices.MinFunc(pending[k], func(a, b *Verified) int {
				return cmp.Or(cmp.Compare(a.Run.AttemptNumber(), b.Run.AttemptNumber()), cmp.Compare(a.ID, b.ID))
			})
			moved[next.ID] = true
			out = append(out, next)
			cur = next
			// Other copies of that attempt stay LaterAttempts (they repeat it).
			pending[k] = slices.DeleteFunc(pending[k], func(x *Verified) bool { return x.Run.AttemptNumber() == next.Run.AttemptNumber() })
		}
	}
	if len(moved) == 0 {
		return runs, later
	}
	slices.SortFunc(out, func(a, b *Verified) int { return cmp.Compare(a.ID, b.ID) })
	rest := slices.DeleteFunc(slices.Clone(later), func(v *Verified) bool { return moved[v.ID] })
	return out, rest
}

// Unanswered is an attempt whose holder signed a claim record but neither a run
// attestation nor a release for it: once its campaign's deadline has passed it is charged
// to the holder's lab, not to the agent (docs/design.md §9, "Pre-emption").
type Unanswered struct {
	Principal string `json:"principal"`
	Node      string `json:"node"`
	Slot      Slot   `json:"slot"`
	Attempt   int    `json:"attempt"`
	Claim     string `json:"claim"` // the holder's claim record
	// Deadline is the campaign's deadline (zero where the ledger has no windows); Charged
	// says whether it has passed at the report's time (LedgerInput.Now).
	Deadline time.Time `json:"deadline,omitzero"`
	Charged  bool      `json:"charged"`
}

// UnansweredAttempts lists, by principal then slot and attempt, the held attempts with no
// signed outcome by their holder: no run attestation of that slot and attempt by the
// holder's node, and no release record of it by that node. Charged is set where now is
// after the campaign's deadline (never for a zero now).
func (o Outcome) UnansweredAttempts(p AcceptPolicy, now time.Time) []Unanswered {
	answered := map[Attempt]map[string]bool{}
	answer := func(s Slot, attempt int, node string) {
		k := Attempt{s, attempt}
		if answered[k] == nil {
			answered[k] = map[string]bool{}
		}
		answered[k][node] = true
	}
	for _, l := range [][]*Verified{o.Runs, o.Duplicates, o.LaterAttempts, o.Forfeited} {
		for _, v := range l {
			answer(v.Run.Slot, v.Run.AttemptNumber(), v.Node)
		}
	}
	for _, e := range o.Equivocations {
		answer(e.Slot, e.Attempt, e.NodeA)
		answer(e.Slot, e.Attempt, e.NodeB)
	}
	for _, r := range o.Releases {
		answer(r.Release.Slot, r.Release.Attempt, r.Node)
	}
	var out []Unanswered
	for k, h := range o.Holders(p) {
		if answered[k][h.Node] {
			continue
		}
		u := Unanswered{Principal: h.Principal(), Node: h.Node, Slot: k.Slot, Attempt: k.Attempt, Claim: h.ID}
		if w, ok := p.Campaigns[k.Slot.Campaign]; ok {
			u.Deadline = w.Deadline
			u.Charged = !now.IsZero() && now.After(w.Deadline)
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b Unanswered) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Slot.String(), b.Slot.String()), cmp.Compare(a.Attempt, b.Attempt))
	})
	return out
}

// forgedReleases is the release records whose signing node has no claim record of that
// slot and attempt: it gave up what it never took (docs/design.md §9, "Starvation").
// An honest node signs a release only for an attempt it signed a claim record for.
func (o Outcome) forgedReleases() []*Verified {
	claimed := map[Attempt]map[string]bool{}
	for _, c := range o.Claims {
		k := Attempt{c.Claim.Slot, c.Claim.Attempt}
		if claimed[k] == nil {
			claimed[k] = map[string]bool{}
		}
		claimed[k][c.Node] = true
	}
	var out []*Verified
	for _, r := range o.Releases {
		if !claimed[Attempt{r.Release.Slot, r.Release.Attempt}][r.Node] {
			out = append(out, r)
		}
	}
	return out
}

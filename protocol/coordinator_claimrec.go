package protocol

import (
	"fmt"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// Claim and release records (attest/claimrec.go; docs/design.md §9 "Pre-emption"). In a
// network that requires them (CoordinatorConfig.RequireClaimRecords) a node signs a claim
// record of the attempt it is about to run before the run starts (the caller does, off the
// loop, and asks AttemptHolder after storing it); the gossip claim still goes first, for
// speed, and renewals stay gossip. The holder of an attempt is the valid record of least
// attest.ClaimRank, as the ledger computes it (attest.AttemptHolders). Here:
//   - a run finishes its slot (and so aborts other runs of it) only if its node holds the
//     attempt by the records (finishesSlot);
//   - a node that sees a better-ranked valid record for the attempt it runs gives the
//     attempt up (CoordActions.GiveUp: the run is cut short and released like an
//     infrastructure failure, its release record saying "abort");
//   - an infra release heard on gossip from a node the records say does not hold the
//     attempt is ignored, so it fails nothing;
//   - this node signs a release record for each attempt it claimed by record and gives up
//     without a run attestation (CoordActions.SignRelease).

// ClaimRecordHeard is a verified claim record (attest.ClaimPredicate) as the coordinator
// needs it.
type ClaimRecordHeard struct {
	ID, SlotID, Campaign string
	Attempt              int
	Node, Lab, Witness   string
	Rank                 attest.ClaimRank
}

// ReleaseToSign is a release record this node must sign for an attempt it claimed by record
// and gives up without a run attestation.
type ReleaseToSign struct {
	Slot    attest.Slot
	SlotID  string
	Attempt int
	// Reason is attest.ReleaseInfra or attest.ReleaseAbort.
	Reason string
}

// GiveUp asks the caller to cut short this node's run of an attempt another node holds by
// the claim records; the run ends as an infrastructure failure (released, retried).
type GiveUp struct {
	SlotID  string
	Attempt int
	Why     string
}

// maxClaimRecordsPerSlot bounds the records a node remembers for one slot: an honest slot
// sees one per attempt, and a flood by one lab must not grow memory per slot without bound.
// The ledger, which reads the store, still sees every one.
const maxClaimRecordsPerSlot = 64

// ClaimRecord takes a verified claim record: runs of its attempt that waited for it finish
// their slot now, and this node gives up its run of the attempt if the record outranks its
// own.
func (c *Coordinator) ClaimRecord(r ClaimRecordHeard, now time.Time) CoordActions {
	var out CoordActions
	refs := c.claimRecs[r.SlotID]
	if slices.ContainsFunc(refs, func(x ClaimRecordHeard) bool { return x.ID == r.ID }) {
		return out
	}
	if len(refs) >= maxClaimRecordsPerSlot {
		out.Declined = append(out.Declined, Declined{Input: "claim record", ID: r.ID, Why: fmt.Sprintf("slot %s has %d records already", r.SlotID, len(refs))})
		return out
	}
	c.claimRecs[r.SlotID] = append(refs, r)
	if !c.cfg.RequireClaimRecords {
		return out
	}
	if _, ok := c.slots[r.SlotID]; ok {
		for _, rid := range c.bySlot[r.SlotID] {
			if run := c.runs[rid]; run != nil && run.Attempt == r.Attempt && c.finishesSlot(run) {
				c.step(&out, c.cm.SlotFinished(r.SlotID, run.Node, now), now)
				break
			}
		}
	}
	s, running := c.startedHere[r.SlotID]
	if att, done := c.preempted[r.SlotID]; done && att == r.Attempt {
		return out // given up already
	}
	if running && c.running[r.SlotID] && s.Attempt == r.Attempt && r.Node != c.cfg.Claims.Self && c.claimRecordValid(r) &&
		r.Rank.Less(attest.RankOf(s.Slot.Slot, s.Attempt, c.cfg.Claims.Lab, c.cfg.Claims.Self)) {
		c.preempted[r.SlotID] = r.Attempt
		out.GiveUp = append(out.GiveUp, GiveUp{SlotID: r.SlotID, Attempt: r.Attempt,
			Why: fmt.Sprintf("claim record %s of node %s (%s) outranks this node's", r.ID, r.Node, r.Lab)})
	}
	return out
}

// claimRecordValid is the check the ledger makes of a claim record: its campaign is known
// and, where witnesses are required, it cites a witness record of its campaign by a lab
// other than the campaign's.
func (c *Coordinator) claimRecordValid(r ClaimRecordHeard) bool {
	cc := c.campaigns[r.Campaign]
	if cc == nil {
		return false
	}
	if !c.cfg.RequireWitness {
		return true
	}
	return r.Witness != "" && slices.ContainsFunc(c.witnesses[r.Campaign], func(w coordWitness) bool { return w.id == r.Witness && w.lab != cc.c.Lab })
}

// AttemptHolder is the node that holds attempt of slotID by the valid claim records held,
// or "" when none does.
func (c *Coordinator) AttemptHolder(slotID string, attempt int) string {
	var best *ClaimRecordHeard
	for i, r := range c.claimRecs[slotID] {
		if r.Attempt != attempt || !c.claimRecordValid(r) {
			continue
		}
		if best == nil || r.Rank.Less(best.Rank) {
			best = &c.claimRecs[slotID][i]
		}
	}
	if best == nil {
		return ""
	}
	return best.Node
}

// heldByRecords says whether run r's node holds its attempt by the claim records, where the
// network requires them (always true where it does not).
func (c *Coordinator) heldByRecords(r *coordRun) bool {
	return !c.cfg.RequireClaimRecords || c.AttemptHolder(r.SlotID, r.Attempt) == r.Node
}

// releaseIgnored says why an infra release heard on gossip fails nothing here ("" when it
// may): the claim records name another node as the attempt's holder. Where no record of the
// attempt is held yet, the claim machine's own standing rule decides.
func (c *Coordinator) releaseIgnored(m *ClaimMessage) string {
	if !c.cfg.RequireClaimRecords || m.Kind != ClaimKindRelease || m.Reason != ReleaseInfra {
		return ""
	}
	if h := c.AttemptHolder(m.Slot, m.Attempt); h != "" && h != m.PeerID {
		return fmt.Sprintf("infra release of attempt %d, which the claim records give to node %s", m.Attempt, h)
	}
	return ""
}

// releasesToSign adds a release record to sign for each of this node's own releases in pub
// of an attempt it holds a claim record of. Awaiting-key releases (the attempt is not given
// up) sign nothing.
func (c *Coordinator) releasesToSign(out *CoordActions, pub []ClaimMessage) {
	if !c.cfg.RequireClaimRecords {
		return
	}
	for _, m := range pub {
		if m.Kind != ClaimKindRelease || m.PeerID != c.cfg.Claims.Self {
			continue
		}
		var reason string
		switch m.Reason {
		case ReleaseInfra:
			reason = attest.ReleaseInfra
			if att, ok := c.preempted[m.Slot]; ok && att == m.Attempt {
				reason = attest.ReleaseAbort
				delete(c.preempted, m.Slot)
			}
		case ReleaseShutdown:
			reason = attest.ReleaseAbort
		default:
			continue
		}
		s, ok := c.startedHere[m.Slot]
		if !ok || !slices.ContainsFunc(c.claimRecs[m.Slot], func(r ClaimRecordHeard) bool { return r.Node == c.cfg.Claims.Self && r.Attempt == m.Attempt }) {
			continue
		}
		out.SignRelease = append(out.SignRelease, ReleaseToSign{Slot: s.Slot.Slot, SlotID: m.Slot, Attempt: m.Attempt, Reason: reason})
	}
}

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
//   - a slot that runs heard here finished is open again when a record takes their
//     attempts and no other run heard finishes it (ClaimMachine.SlotReopened): their
//     results no longer count, and the holder's run may never end (a keyless node's waits
//     for a key);
//   - a record raises the attempt number this node's next claim of its slot takes, as a
//     gossip claim does (ClaimMachine.AttemptClaimed), so this node never claims an
//     attempt it holds a record of;
//   - this node signs a release record for each attempt it claimed by record and gives up
//     without a run attestation (CoordActions.SignRelease);
//   - a run of this node that ends without a result while another node holds its attempt
//     by the records (given up to a better-ranked record, or refused at start because one
//     was already held) is not an infrastructure failure of the slot: the attempt is the
//     holder's (RunGivenUp). Otherwise a lab that claims attempts it outranks and never
//     runs them would fail slots by the retry cap (found by `evalmesh sim
//     --dishonest-labs 1`: one slot of 2,000 lost on the goal network, seed 1).

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

// maxClaimRecordsPerLab bounds the records a node remembers for one slot from one lab: an
// honest lab signs one per attempt it claims, and a flood by one lab must not grow memory
// per slot without bound. The bound is per lab, not per slot, so that labs flooding a slot
// cannot crowd out another lab's better-ranked record (with one bound per slot, three labs
// squatting every attempt of a slot filled it, an honest node then refused the record that
// outranked its own run, never gave the attempt up, and the slot was lost:
// TestSimSquatsLoseNoSlot). The ledger, which reads the store, still sees every one, so a
// record over the bound still raises the attempt this node claims next, and one of an
// attempt this node started or another lab's run heard here ran is kept over it
// (attemptCounted): else this node ran, or counted, an attempt whose holder by the ledger
// it could not know, and a slot it held finished stayed empty in every ledger
// (TestDishonestLabCannotFloodClaimRecords).
const maxClaimRecordsPerLab = 32

// countRecordsOf counts the records in refs by lab.
func countRecordsOf(refs []ClaimRecordHeard, lab string) int {
	n := 0
	for _, x := range refs {
		if x.Lab == lab {
			n++
		}
	}
	return n
}

// ClaimRecord takes a verified claim record: runs of its attempt that waited for it finish
// their slot now, and this node gives up its run of the attempt if the record outranks its
// own.
func (c *Coordinator) ClaimRecord(r ClaimRecordHeard, now time.Time) CoordActions {
	var out CoordActions
	refs := c.claimRecs[r.SlotID]
	if slices.ContainsFunc(refs, func(x ClaimRecordHeard) bool { return x.ID == r.ID }) {
		return out
	}
	if why := c.scorerRecordDeclined(r); why != "" {
		out.Declined = append(out.Declined, Declined{Input: "claim record", ID: r.ID, Why: why})
		return out
	}
	c.recordMax[r.SlotID] = max(c.recordMax[r.SlotID], r.Attempt)
	if n := countRecordsOf(refs, r.Lab); n >= maxClaimRecordsPerLab && !c.attemptCounted(r.SlotID, r.Attempt, r.Lab) {
		// Its attempt still raises this node's next claim of the slot: the ledger, which
		// reads the store, sees the record, and a run of an attempt whose holder this node
		// cannot know would count here and not there.
		if c.cfg.RequireClaimRecords {
			c.cm.AttemptClaimed(r.SlotID, r.Attempt)
		}
		out.Declined = append(out.Declined, Declined{Input: "claim record", ID: r.ID, Why: fmt.Sprintf("slot %s has %d records of lab %s already", r.SlotID, n, r.Lab)})
		return out
	}
	finished := c.cfg.RequireClaimRecords && c.finishedByRuns(r.SlotID)
	c.claimRecs[r.SlotID] = append(refs, r)
	if !c.cfg.RequireClaimRecords {
		return out
	}
	c.cm.AttemptClaimed(r.SlotID, r.Attempt)
	if _, ok := c.slots[r.SlotID]; ok {
		for _, rid := range c.bySlot[r.SlotID] {
			if run := c.runs[rid]; run != nil && run.Attempt == r.Attempt && c.finishesSlot(run) {
				c.step(&out, c.cm.SlotFinished(r.SlotID, run.Node, now), now)
				break
			}
		}
		if finished && !c.finishedByRuns(r.SlotID) {
			c.step(&out, c.cm.SlotReopened(r.SlotID, r.Node, r.Lab, r.Attempt, now), now)
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

// attemptCounted says whether attempt of slotID is one this node started, or one a run of a
// lab other than lab heard here ran: a record of it is kept over its lab's bound, for this
// node must know who holds an attempt it counts a run of. A lab can raise that count only
// with runs of other labs, which are held anyway.
func (c *Coordinator) attemptCounted(slotID string, attempt int, lab string) bool {
	if s, ok := c.startedHere[slotID]; ok && s.Attempt == attempt {
		return true
	}
	return slices.ContainsFunc(c.bySlot[slotID], func(id string) bool {
		r := c.runs[id]
		return r != nil && r.Attempt == attempt && r.Lab != lab
	})
}

// finishedByRuns says whether a run heard here finishes slotID by the claim records held.
func (c *Coordinator) finishedByRuns(slotID string) bool {
	return slices.ContainsFunc(c.bySlot[slotID], func(id string) bool { r := c.runs[id]; return r != nil && c.finishesSlot(r) })
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

// GivenUp is o, or RunGivenUp where this node's run of slotID's attempt ended as an
// infrastructure failure and the attempt is another node's by the claim records. RunEnded
// reads outcomes so, and so does the daemon's health streak (node/mesh/health.go): a run
// given up to a squatter's record is no failure of this node.
func (c *Coordinator) GivenUp(slotID string, attempt int, o RunOutcome) RunOutcome {
	if !c.cfg.RequireClaimRecords || o.Kind != RunInfraFailed {
		return o
	}
	if att, ok := c.preempted[slotID]; ok && att == attempt {
		return RunOutcome{Kind: RunGivenUp, Detail: o.Detail}
	}
	if h := c.AttemptHolder(slotID, attempt); h != "" && h != c.cfg.Claims.Self {
		return RunOutcome{Kind: RunGivenUp, Detail: o.Detail}
	}
	return o
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
		case ReleaseStale:
			// Given up to a better-ranked record (RunGivenUp); other stale releases answer
			// claims this node no longer holds and sign nothing.
			att, ok := c.preempted[m.Slot]
			if !ok || att != m.Attempt {
				continue
			}
			reason = attest.ReleaseAbort
			delete(c.preempted, m.Slot)
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

package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
)

// Claim and release records (attest/claimrec.go, docs/design.md §9 "Pre-emption"). In a
// network that requires them (MeshOptions.Policy's RequireClaimRecords) a node signs a
// claim record of the attempt it is about to run, and stores it (so it syncs and gossips
// like an attestation) before the run starts; the gossip claim still goes first, for speed,
// and renewals stay gossip. The holder of an attempt is the valid record of least
// attest.ClaimRank, as the ledger computes it; here:
//   - a run attestation finishes its slot (and so aborts other runs of it) only if its node
//     holds the attempt by the records;
//   - a node that sees a better-ranked record for the attempt it runs gives the attempt up
//     (the run is cancelled and released like an infrastructure failure, its release
//     record saying "abort");
//   - an infra release heard on gossip from a node that the records say does not hold the
//     attempt is ignored, so it fails nothing;
//   - this node signs a release record for each attempt it claimed by record and gives up
//     without a run attestation.
//
// All on the loop, except signing and storing, which wait on the disk.

// claimRecords is the claim records a mesh holds, by slot ID.
type claimRecords struct {
	bySlot map[string][]claimRef
	// preempted: slot ID → the attempt this node gave up to a better-ranked record.
	preempted map[string]int
}

// claimRef is one claim record the store holds.
type claimRef struct {
	id, node, lab, witness, campaign string
	attempt                          int
	rank                             attest.ClaimRank
}

// maxClaimRecordsPerSlot bounds the records a node remembers for one slot: an honest slot
// sees one per attempt, and a flood by one lab must not grow memory per slot without bound.
// The ledger, which reads the store, still sees every one.
const maxClaimRecordsPerSlot = 64

func newClaimRecords() *claimRecords {
	return &claimRecords{bySlot: map[string][]claimRef{}, preempted: map[string]int{}}
}

// claimRecordOf decodes a claim record's payload, or nil for any other statement.
func claimRecordOf(st *attest.Statement, payload []byte) *attest.ClaimPredicate {
	if st == nil || st.PredicateType != attest.PredicateClaimV1 {
		return nil
	}
	c, err := attest.DecodeClaimRecord(payload)
	if err != nil {
		return nil
	}
	return c
}

// onClaimRecord records a claim record the store accepted; runs of its slot that waited for
// it finish the slot now, and this node gives up its run of the attempt if the record
// outranks it.
func (m *Mesh) onClaimRecord(id string, c *attest.ClaimPredicate) {
	slotID := protocol.SlotID(c.Slot)
	refs := m.claimRecs.bySlot[slotID]
	if slices.ContainsFunc(refs, func(r claimRef) bool { return r.id == id }) || len(refs) >= maxClaimRecordsPerSlot {
		return
	}
	ref := claimRef{id: id, node: c.Node, lab: c.Lab, witness: c.Witness, campaign: c.Slot.Campaign, attempt: c.Attempt,
		rank: attest.RankOf(c.Slot, c.Attempt, c.Lab, c.Node)}
	m.claimRecs.bySlot[slotID] = append(refs, ref)
	if !m.opts.Policy.RequireClaimRecords {
		return
	}
	now := m.opts.Now()
	if _, ok := m.slots[slotID]; ok {
		for _, rid := range m.bySlot[slotID] {
			if r := m.runs[rid]; r != nil && r.Attempt == c.Attempt && m.finishesSlot(r) {
				m.apply(m.cm.SlotFinished(slotID, r.Node, now))
				break
			}
		}
	}
	if ar, ok := m.running[slotID]; ok && ar.attempt == c.Attempt && c.Node != m.self && m.claimRecordValid(ref) &&
		ref.rank.Less(attest.RankOf(c.Slot, c.Attempt, m.lab, m.self)) {
		m.n.opts.Warnf("mesh: slot %s attempt %d: claim record %s of node %s (%s) outranks this node's: giving the attempt up", slotID, c.Attempt, id, c.Node, c.Lab)
		m.claimRecs.preempted[slotID] = c.Attempt
		ar.cancel() // the run ends as an infrastructure failure: released, and retried elsewhere if need be
	}
}

// claimRecordValid is the check the ledger makes of a claim record (attest's claimValid):
// its campaign is known and, where witnesses are required, it cites a witness record of
// its campaign by a lab other than the campaign's.
func (m *Mesh) claimRecordValid(r claimRef) bool {
	mc := m.campaigns[r.campaign]
	if mc == nil {
		return false
	}
	if !m.opts.Policy.RequireWitness {
		return true
	}
	return r.witness != "" && slices.ContainsFunc(m.witnesses[r.campaign], func(w witnessRef) bool { return w.id == r.witness && w.lab != mc.v.Lab })
}

// attemptHolder is the node that holds attempt of slotID by the valid claim records held
// here, or "" when none does.
func (m *Mesh) attemptHolder(slotID string, attempt int) string {
	var best *claimRef
	for i, r := range m.claimRecs.bySlot[slotID] {
		if r.attempt != attempt || !m.claimRecordValid(r) {
			continue
		}
		if best == nil || r.rank.Less(best.rank) {
			best = &m.claimRecs.bySlot[slotID][i]
		}
	}
	if best == nil {
		return ""
	}
	return best.node
}

// heldByRecords says whether run r's node holds its attempt by the claim records, where
// the network requires them (always true where it does not).
func (m *Mesh) heldByRecords(r *runRecord) bool {
	return !m.opts.Policy.RequireClaimRecords || m.attemptHolder(r.SlotID, r.Attempt) == r.Node
}

// releaseIgnored says why an infra release heard on gossip fails nothing here ("" when it
// may): the claim records name another node as the attempt's holder. Where no record of
// the attempt is held yet, the claim machine's own standing rule decides.
func (m *Mesh) releaseIgnored(c *protocol.ClaimMessage) string {
	if !m.opts.Policy.RequireClaimRecords || c.Kind != protocol.ClaimKindRelease || c.Reason != protocol.ReleaseInfra {
		return ""
	}
	if h := m.attemptHolder(c.Slot, c.Attempt); h != "" && h != c.PeerID {
		return fmt.Sprintf("infra release of attempt %d, which the claim records give to node %s", c.Attempt, h)
	}
	return ""
}

// signClaimRecord signs and stores this node's claim record of the attempt s starts, off the
// loop, before the run starts; an error means the run must not start (it would not count).
func (m *Mesh) signClaimRecord(ctx context.Context, s protocol.StartRun, witness string) error {
	if !m.opts.Policy.RequireClaimRecords {
		return nil
	}
	env, id, err := attest.NewClaimRecord(m.opts.Runner.Key, m.opts.Runner.Cert, s.Slot.Slot, s.Attempt, witness, m.opts.Now())
	if err != nil {
		return err
	}
	res, err := m.store.Attestations().Add([][]byte{env}, SourceLocal, "")
	if err != nil {
		return fmt.Errorf("storing claim record %s: %w", id, err)
	}
	if len(res) == 1 && res[0].Status == StatusRefused {
		return fmt.Errorf("own claim record %s refused by the store: %s %s", id, res[0].Reason, res[0].Detail)
	}
	var holder string
	if err := m.query(ctx, func() { holder = m.attemptHolder(s.Slot.ID, s.Attempt) }); err != nil {
		return err
	}
	if holder != "" && holder != m.self {
		return fmt.Errorf("attempt %d of slot %s is held by node %s by the claim records", s.Attempt, s.Slot.ID, holder)
	}
	return nil
}

// signRelease signs and stores a release record for this node's own release c of an
// attempt it claimed by record (on the loop; the signing goes off it). Releases of attempts
// this node holds no record of, and awaiting-key releases (the attempt is not given up),
// sign nothing.
func (m *Mesh) signRelease(c protocol.ClaimMessage) {
	if !m.opts.Policy.RequireClaimRecords || c.Kind != protocol.ClaimKindRelease || c.PeerID != m.self || m.ctx.Err() != nil {
		return
	}
	reason := ""
	switch c.Reason {
	case protocol.ReleaseInfra:
		reason = attest.ReleaseInfra
		if m.claimRecs.preempted[c.Slot] == c.Attempt {
			reason = attest.ReleaseAbort
			delete(m.claimRecs.preempted, c.Slot)
		}
	case protocol.ReleaseShutdown:
		reason = attest.ReleaseAbort
	default:
		return
	}
	ref, ok := m.slots[c.Slot]
	if !ok || !slices.ContainsFunc(m.claimRecs.bySlot[c.Slot], func(r claimRef) bool { return r.node == m.self && r.attempt == c.Attempt }) {
		return
	}
	slot, attempt, now := ref.slot, c.Attempt, m.opts.Now()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		env, _, err := attest.NewReleaseRecord(m.opts.Runner.Key, m.opts.Runner.Cert, slot, attempt, reason, "", now)
		if err == nil {
			_, err = m.store.Attestations().Add([][]byte{env}, SourceLocal, "")
		}
		if err != nil && m.ctx.Err() == nil {
			m.n.opts.Logf("mesh: release record of slot %s attempt %d: %v", c.Slot, attempt, err)
		}
	}()
}

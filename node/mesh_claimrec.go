package node

import (
	"context"
	"fmt"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
)

// Claim and release records (attest/claimrec.go, docs/design.md §9 "Pre-emption"): the
// rules — who holds an attempt, which runs finish a slot, which releases fail nothing,
// when to give an attempt up and which release records to sign — are
// protocol.Coordinator's (protocol/coordinator_claimrec.go). This file signs and stores the
// records it asks for. Signing and storing wait on the disk, so they run off the loop.

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

// claimRecordHeard is what the coordinator needs of claim record id.
func claimRecordHeard(id string, c *attest.ClaimPredicate) protocol.ClaimRecordHeard {
	return protocol.ClaimRecordHeard{ID: id, SlotID: protocol.SlotID(c.Slot), Campaign: c.Slot.Campaign, Attempt: c.Attempt,
		Node: c.Node, Lab: c.Lab, Witness: c.Witness, Rank: attest.RankOf(c.Slot, c.Attempt, c.Lab, c.Node)}
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
	if err := m.query(ctx, func() { holder = m.coord.AttemptHolder(s.Slot.ID, s.Attempt) }); err != nil {
		return err
	}
	if holder != "" && holder != m.self {
		return fmt.Errorf("attempt %d of slot %s is held by node %s by the claim records", s.Attempt, s.Slot.ID, holder)
	}
	return nil
}

// signRelease signs and stores the release record r the coordinator asked for, off the loop.
func (m *Mesh) signRelease(r protocol.ReleaseToSign) {
	if m.ctx.Err() != nil {
		return
	}
	now := m.opts.Now()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		env, _, err := attest.NewReleaseRecord(m.opts.Runner.Key, m.opts.Runner.Cert, r.Slot, r.Attempt, r.Reason, "", now)
		if err == nil {
			_, err = m.store.Attestations().Add([][]byte{env}, SourceLocal, "")
		}
		if err != nil && m.ctx.Err() == nil {
			m.n.opts.Logf("mesh: release record of slot %s attempt %d: %v", r.SlotID, r.Attempt, err)
		}
	}()
}

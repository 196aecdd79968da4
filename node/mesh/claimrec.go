package mesh

import (
	"context"
	"fmt"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

// Claim and release records (attest/claimrec.go, docs/design.md §9 "Pre-emption"): the
// rules — who holds an attempt, which runs finish a slot, which releases fail nothing,
// when to give an attempt up and which release records to sign — are
// protocol.Coordinator's (protocol/coordinator_claimrec.go). This file signs and stores the
// records it asks for. Signing and storing wait on the disk, so they run off the loop.

// claimRecordHeard is what the coordinator needs of claim record id.
func claimRecordHeard(id string, c *attest.ClaimPredicate) protocol.ClaimRecordHeard {
	return protocol.ClaimRecordHeard{ID: id, SlotID: protocol.SlotID(c.Slot), Campaign: c.Slot.Campaign, Attempt: c.Attempt,
		Node: c.Node, Lab: c.Lab, Witness: c.Witness, Rank: attest.RankOf(c.Slot, c.Attempt, c.Lab, c.Node)}
}

// recordSigner signs and stores the records the coordinator asks for (witness, claim and
// release records), each on the goroutine of the run it is for or on one of its own; it has
// no state of its own besides shared's and reads the coordinator with query.
type recordSigner struct{ *shared }

// signClaimRecord signs and stores this node's claim record of the attempt s starts, off the
// loop, before the run starts; an error means the run must not start (it would not count).
func (r recordSigner) signClaimRecord(ctx context.Context, s protocol.StartRun, witness string) error {
	if !r.opts.Policy.RequireClaimRecords {
		return nil
	}
	env, id, err := attest.NewClaimRecord(r.opts.Runner.Key, r.opts.Runner.Cert, s.Slot.Slot, s.Attempt, witness, r.opts.Now())
	if err != nil {
		return err
	}
	res, err := r.store.Attestations().Add([][]byte{env}, vstore.SourceLocal, "")
	if err != nil {
		return fmt.Errorf("storing claim record %s: %w", id, err)
	}
	if len(res) == 1 && res[0].Status == vstore.StatusRefused {
		return fmt.Errorf("own claim record %s refused by the store: %s %s", id, res[0].Reason, res[0].Detail)
	}
	var holder string
	if err := r.query(ctx, func() { holder = r.coord.AttemptHolder(s.Slot.ID, s.Attempt) }); err != nil {
		return err
	}
	if holder != "" && holder != r.self {
		return fmt.Errorf("attempt %d of slot %s is held by node %s by the claim records", s.Attempt, s.Slot.ID, holder)
	}
	return nil
}

// signRelease signs and stores the release record rel the coordinator asked for, off the loop.
func (r recordSigner) signRelease(rel protocol.ReleaseToSign) {
	if r.ctx.Err() != nil {
		return
	}
	now := r.opts.Now()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		env, _, err := attest.NewReleaseRecord(r.opts.Runner.Key, r.opts.Runner.Cert, rel.Slot, rel.Attempt, rel.Reason, "", now)
		if err == nil {
			_, err = r.store.Attestations().Add([][]byte{env}, vstore.SourceLocal, "")
		}
		if err != nil && r.ctx.Err() == nil {
			r.opts.Logf("mesh: release record of slot %s attempt %d: %v", rel.SlotID, rel.Attempt, err)
		}
	}()
}

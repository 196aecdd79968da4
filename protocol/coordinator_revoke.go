package protocol

import (
	"slices"
	"time"
)

// A revocation voids runs after the fact: a lab revokes its node (a stolen key), and the
// ledger stops counting everything signed under it, earlier runs included, since a stolen key
// can backdate (attest.TrustStore.certStanding). A slot whose only run was voided would then
// stay done in every node's claim machine and never be run again: the cell would stay empty
// on the honest ledger for good. Voided takes the runs, re-scores, claim records and witness
// records the caller's trust store now refuses, forgets them (a replay of the same run is
// declined; a voided re-score votes for nothing, so the next re-scorer lab steps in;
// a voided claim record holds no attempt; a voided witness record witnesses nothing, so the
// runs that cite it count no more than the ledger counts them), and reopens every slot no
// remaining run finishes, so some node claims it again under a new attempt. A slot another
// counted run finishes stays done. The runs of a revoked node that arrive later never reach
// the coordinator: the store refuses them.

// Voided takes the IDs of runs, re-scores, claim records and witness records heard before
// that no longer count (their certificate or node revoked) and reopens the slots no counted
// run finishes any more.
func (c *Coordinator) Voided(ids []string, now time.Time) CoordActions {
	var out CoordActions
	var slots []string
	for sid, recs := range c.claimRecs {
		c.claimRecs[sid] = slices.DeleteFunc(recs, func(r ClaimRecordHeard) bool { return slices.Contains(ids, r.ID) })
	}
	// A voided re-score votes for nothing: the labs next in order step in on a later Tick
	// (rescoreDuty), as for a re-scorer that stayed silent.
	for run, rss := range c.rescores {
		c.rescores[run] = slices.DeleteFunc(rss, func(rs RescoreHeard) bool { return slices.Contains(ids, rs.ID) })
	}
	witnesses := false
	for camp, ws := range c.witnesses {
		n := len(ws)
		c.witnesses[camp] = slices.DeleteFunc(ws, func(w coordWitness) bool { return slices.Contains(ids, w.id) })
		witnesses = witnesses || len(c.witnesses[camp]) < n
	}
	if witnesses {
		for _, r := range c.runs {
			if r.Witness != "" && slices.Contains(ids, r.Witness) && !slices.Contains(slots, r.SlotID) {
				slots = append(slots, r.SlotID)
			}
		}
	}
	for _, id := range ids {
		r, ok := c.runs[id]
		if c.voided == nil {
			c.voided = map[string]bool{}
		}
		c.voided[id] = true
		if !ok {
			continue
		}
		delete(c.runs, id)
		c.bySlot[r.SlotID] = slices.DeleteFunc(c.bySlot[r.SlotID], func(x string) bool { return x == id })
		if !slices.Contains(slots, r.SlotID) {
			slots = append(slots, r.SlotID)
		}
	}
	if len(slots) == 0 {
		return out
	}
	slices.Sort(slots)
	for _, sid := range slots {
		if _, ok := c.slots[sid]; !ok || c.slotFinishedByRun(sid) {
			continue
		}
		// A lab whose own run of the slot stays in the store (one that cited a voided witness)
		// cannot fill it again: the ledger counts only a lab's lowest attempt of a slot, so
		// its new run would be excluded as a later attempt. Other labs run it.
		var barred []string
		for _, id := range c.bySlot[sid] {
			if r, ok := c.runs[id]; ok && !slices.Contains(barred, r.Lab) {
				barred = append(barred, r.Lab)
			}
		}
		c.step(&out, c.cm.ReopenSlot(sid, barred, now), now)
		out.Reopened = append(out.Reopened, sid)
	}
	out.RecomputeLedger = true
	return out
}

// slotFinishedByRun reports whether a run heard for the slot finishes it.
func (c *Coordinator) slotFinishedByRun(slotID string) bool {
	return slices.ContainsFunc(c.bySlot[slotID], func(id string) bool {
		r, ok := c.runs[id]
		return ok && c.finishesSlot(r)
	})
}

// ReopenSlot makes a finished slot free again: the run that finished it no longer counts
// (Coordinator.Voided). Its next claim takes a new attempt; the infrastructure failures
// it had stay counted. Nodes of the barred labs never claim it again (their runs of it
// stand in the store).
func (m *ClaimMachine) ReopenSlot(slotID string, barred []string, now time.Time) Actions {
	m.now = now
	if s, ok := m.slots[slotID]; ok && s.finished {
		s.finished, s.ranResult = false, false
		s.freeSince = now
		s.barred = slices.Clone(barred)
		m.freed[slotID] = s
	}
	return m.finish(now)
}

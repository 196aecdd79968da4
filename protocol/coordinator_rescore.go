package protocol

import (
	"strconv"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// Drawn re-scorers on the duty side (docs/design.md §9, "Who re-scores"; the ledger's rule is
// attest.RescoreVoters). Where the network draws re-scorers, a lab re-scores a run when its
// draw — its designated node's RFC 9381 VRF over the run's slot, attempt and lab — falls
// under attest.DrawThreshold(need, candidates, 0): it is drawn, and re-scores whatever
// others did. While fewer than need drawn labs have re-scored, each whole RescoreTimeout
// since the run was first seen raises the threshold a step, and the labs under it stand in.
// need is the replication, widened by the contradicting voters (attest.EscalatedReplication)
// exactly as the ledger widens it, so a lab the ledger would not count is never asked and
// one it would is. The node of the lab that re-scores is chosen by rendezvous over the run's
// slot, attempt and lab, not its attestation ID: the runner could otherwise re-sign until
// the lab's node with the worst draw was the designated one.

// drawn is one checked draw: its fraction (attest.DrawFraction), or why it is none.
type drawn struct {
	u  float64
	ok bool
}

// drawKey is the run's re-scorer designation key: its slot, attempt and lab, which the
// runner fixed when it claimed the slot.
func drawKey(r *coordRun) string {
	return r.SlotID + "\x00" + strconv.Itoa(r.Attempt) + "\x00" + r.Lab
}

func (r *coordRun) predicate() *attest.RunPredicate {
	return &attest.RunPredicate{Slot: r.Slot, Attempt: r.Attempt, Lab: r.Lab}
}

// ownDraw is this node's draw for run r (1, never drawn, when it cannot draw: it still
// stands in once the threshold reaches 1).
func (c *Coordinator) ownDraw(r *coordRun) float64 {
	k := "run:" + r.ID
	if d, ok := c.draws[k]; ok {
		return d.u
	}
	d := drawn{u: 1, ok: true}
	if c.cfg.OwnDraw != nil {
		if u, err := c.cfg.OwnDraw(r.predicate()); err == nil {
			d.u = u
		}
	}
	c.draws[k] = d
	return d.u
}

// heardDraw is the checked draw of re-score rs of run r.
func (c *Coordinator) heardDraw(rs RescoreHeard, r *coordRun) drawn {
	if d, ok := c.draws[rs.ID]; ok {
		return d
	}
	var d drawn
	if rs.Draw != "" {
		if u, err := c.cfg.VerifyDraw(rs.Lab, rs.Node, rs.Draw, r.predicate()); err == nil {
			d = drawn{u: u, ok: true}
		}
	}
	c.draws[rs.ID] = d
	return d
}

// drawnDue says whether this node's lab is due to re-score run r under the drawn rule.
func (c *Coordinator) drawnDue(r *coordRun, now time.Time) bool {
	lab := c.cfg.Claims.Lab
	runP := &attest.RunPredicate{Metric: r.Metric, Valid: r.Valid, Score: r.Score}
	type agg struct {
		u                float64
		against, confirm bool
	}
	byLab := map[string]*agg{}
	var order []string
	for _, rs := range c.rescores[r.ID] {
		if rs.Lab == lab {
			return false // this lab has re-scored it
		}
		if rs.Lab == r.Lab {
			continue
		}
		d := c.heardDraw(rs, r)
		if !d.ok {
			continue
		}
		a := byLab[rs.Lab]
		if a == nil {
			a = &agg{u: d.u}
			byLab[rs.Lab] = a
			order = append(order, rs.Lab)
		}
		a.u = max(a.u, d.u)
		if attest.Confirms(runP, &attest.RescorePredicate{Metric: rs.Metric, Valid: rs.Valid, Score: rs.Score}, attest.Agree) {
			a.confirm = true
		} else {
			a.against = true
		}
	}
	rs := make([]attest.DrawnRescore, 0, len(order))
	for _, l := range order {
		a := byLab[l]
		rs = append(rs, attest.DrawnRescore{Lab: l, Draw: a.u, Against: a.against && !a.confirm})
	}
	draw := c.cfg.RescorerDraw
	cands := draw.Candidates(r.Lab)
	_, need := attest.RescoreVoters(draw.Replication, cands, rs)
	if need <= 0 {
		return false
	}
	u := c.ownDraw(r)
	t0 := attest.DrawThreshold(need, cands, 0)
	if u < t0 {
		return true
	}
	drawnDone := 0
	for _, x := range rs {
		if x.Draw < t0 {
			drawnDone++
		}
	}
	if drawnDone >= need {
		return false
	}
	step := 0
	if c.cfg.RescoreTimeout > 0 {
		step = int(now.Sub(r.firstSeen) / c.cfg.RescoreTimeout)
	}
	return u < attest.DrawThreshold(need, cands, step)
}

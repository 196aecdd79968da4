package protocol

import (
	"maps"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// Caps at admission on the claiming side (docs/design.md §9, "Choosing what counts under a
// cap"). The ledger refuses a campaign that would take its lab past the network's per-lab
// caps (attest.Outcome.AdmitCampaigns); an honest node does not spend its GPUs on the slots
// of such a campaign. The coordinator decides with the same pure rule (attest.AdmitWindows)
// over the same inputs the ledger reads — the campaigns this node prepared and the witness
// records it holds — so what the ledger refuses and what nodes decline to claim agree.
//
// Where witnesses are required, a campaign no other lab has witnessed is neither admitted
// nor refused by the ledger; the coordinator then holds it (claims nothing) until a witness
// decides it. Admission is stable (a refused campaign takes nothing from its lab's
// allowance), so a campaign already handed to the claim machine is refused later only when
// an earlier campaign of its lab reaches this node after it (or, where witnesses are
// required, a witness moves the order). The coordinator re-checks the admission of every
// handed campaign whenever a campaign is added or a witness comes, and withdraws a refused
// one from the claim machine (ClaimMachine.WithdrawCampaign): its unclaimed slots are no
// longer claimed and its pending claims are released, since no run of it would count; runs
// of it already started end as they would (the ledger refuses their results). A withdrawn
// campaign that is admitted again is restored.

// capsOn says whether the network caps labs at admission.
func (c *Coordinator) capsOn() bool {
	return c.cfg.MaxAgentsPerLab > 0 || c.cfg.MaxCampaignsPerLab > 0
}

// admission is attest.AdmitWindows over this node's prepared campaigns and witness records:
// refused campaign → why. A campaign absent from the result is admitted, or, where
// witnesses are required and no other lab has witnessed it, undecided (see decided).
func (c *Coordinator) admission() map[string]string {
	p := attest.AcceptPolicy{MaxAgentsPerLab: c.cfg.MaxAgentsPerLab, MaxCampaignsPerLab: c.cfg.MaxCampaignsPerLab,
		RequireWitness: c.cfg.RequireWitness, Campaigns: map[string]attest.CampaignWindow{}}
	for id, cc := range c.campaigns {
		p.Campaigns[id] = cc.window()
	}
	first := map[string]map[string]time.Time{}
	for campaign, ws := range c.witnesses {
		for _, w := range ws {
			attest.NoteWitness(first, p.Campaigns, campaign, w.lab, w.at)
		}
	}
	return attest.AdmitWindows(p, first)
}

// window is cc as the ledger's campaign window sees it (protocol.NamesOf): its signed
// creation and deadline, its lab, and its distinct agent spec CIDs, sorted.
func (cc *coordCampaign) window() attest.CampaignWindow {
	var agents []string
	for _, s := range cc.c.Spec.Slots {
		agents = append(agents, s.Slot.Agent)
	}
	slices.Sort(agents)
	return attest.CampaignWindow{Created: cc.c.Spec.Created, Deadline: cc.c.Spec.Deadline, Lab: cc.c.Lab, Agents: slices.Compact(agents)}
}

// decided says whether the caps' admission has decided campaign cc: always where witnesses
// are off; where they are required, once a lab other than its own has witnessed it.
func (c *Coordinator) decided(cc *coordCampaign) bool {
	if !c.cfg.RequireWitness {
		return true
	}
	return slices.ContainsFunc(c.witnesses[cc.spec.ID], func(w coordWitness) bool { return w.lab != cc.c.Lab })
}

// capsHold says whether cc must not reach the claim machine (yet): the caps refuse it, or
// cannot decide it yet. A refusal is declined once per reason, for the log.
func (c *Coordinator) capsHold(out *CoordActions, cc *coordCampaign) bool {
	if !c.capsOn() {
		return false
	}
	if !c.decided(cc) {
		cc.capHeld = true
		return true
	}
	why, refused := c.admission()[cc.spec.ID]
	if !refused {
		cc.capHeld = false
		return false
	}
	if cc.capWhy != why {
		cc.capWhy = why
		out.Declined = append(out.Declined, Declined{Input: "campaign", ID: cc.spec.ID,
			Why: "its campaign is over its lab's cap, so its runs would not count; its slots are not claimed here: " + why})
	}
	cc.capHeld = true
	return true
}

// recheckCaps hands to the claim machine the campaigns the caps held that are now decided
// and admitted (a witness came), and withdraws from it, or restores, the handed campaigns
// whose admission changed (a campaign of their lab that comes before them was added), in
// campaign ID order.
func (c *Coordinator) recheckCaps(out *CoordActions, now time.Time) {
	if !c.capsOn() {
		return
	}
	var refused map[string]string
	for _, id := range slices.Sorted(maps.Keys(c.campaigns)) {
		cc := c.campaigns[id]
		if cc.added {
			if refused == nil {
				refused = c.admission()
			}
			c.readmit(out, cc, refused, now)
			continue
		}
		if !cc.capHeld || cc.awaiting {
			continue
		}
		if !c.capsHold(out, cc) {
			c.handToMachine(out, cc, now)
		}
	}
}

// readmit withdraws the handed campaign cc from the claim machine when refused (admission's
// result) refuses it, and restores it when it no longer does.
func (c *Coordinator) readmit(out *CoordActions, cc *coordCampaign, refused map[string]string, now time.Time) {
	id := cc.spec.ID
	why, no := refused[id]
	switch {
	case no && !cc.withdrawn:
		cc.withdrawn, cc.capWhy = true, why
		out.Declined = append(out.Declined, Declined{Input: "campaign", ID: id,
			Why: "its campaign is now over its lab's cap (a campaign of its lab admitted before it reached this node after it), so its runs would not count; its unclaimed slots are withdrawn here: " + why})
		c.step(out, c.cm.WithdrawCampaign(id, now), now)
	case !no && cc.withdrawn:
		cc.withdrawn, cc.capWhy = false, ""
		out.Handed = append(out.Handed, id)
		c.step(out, c.cm.RestoreCampaign(id, now), now)
	}
}

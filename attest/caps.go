package attest

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// RefusedCampaign is a campaign refused at admission (AdmitCampaigns), and why.
type RefusedCampaign struct {
	Campaign string `json:"campaign"`
	Lab      string `json:"lab"`
	Reason   string `json:"reason"`
}

// AdmitCampaigns applies the per-lab caps (AcceptPolicy.MaxAgentsPerLab, MaxCampaignsPerLab)
// to the campaigns of p.Campaigns and returns the refused ones: campaign ID → why. Each
// lab's campaigns are taken in admission order — when other labs witnessed them where
// witnesses are required (witnessedAt, which the campaign's lab cannot backdate), else
// their signed creation; then campaign ID — and a campaign is admitted only if its lab's
// admitted campaigns, it included, stay within both caps; otherwise it is refused as a
// whole and takes nothing from the lab's allowance. So a campaign admitted stays admitted
// when later ones arrive, and which of a lab's runs count does not depend on how it names
// its agents or what IDs its envelopes have.
//
// Where witnesses are required, a campaign no other lab has witnessed is neither admitted
// nor refused: none of its runs can count yet (ExcludeUnwitnessed), and ranking it by the
// creation its own lab signed would let a backdated campaign take an earlier one's place.
//
// Pure: the result depends on p and the witness records in o only.
func (o Outcome) AdmitCampaigns(p AcceptPolicy) map[string]string {
	if p.Campaigns == nil || (p.MaxAgentsPerLab <= 0 && p.MaxCampaignsPerLab <= 0) {
		return nil
	}
	var first map[string]map[string]time.Time // campaign → other lab → its earliest witness time
	if p.RequireWitness {
		first = map[string]map[string]time.Time{}
		for _, wv := range o.Witnesses {
			NoteWitness(first, p.Campaigns, wv.Witness.Campaign, wv.Principal(), wv.Witness.Time)
		}
	}
	return AdmitWindows(p, first)
}

// NoteWitness adds a witness record of campaign by lab at t to first (campaign → other lab
// → its earliest witness time), the input AdmitWindows takes: a record of a campaign not in
// windows, or by the campaign's own lab, is left out.
func NoteWitness(first map[string]map[string]time.Time, windows map[string]CampaignWindow, campaign, lab string, t time.Time) {
	w, ok := windows[campaign]
	if !ok || lab == w.Lab {
		return
	}
	if first[campaign] == nil {
		first[campaign] = map[string]time.Time{}
	}
	if at, ok := first[campaign][lab]; !ok || t.Before(at) {
		first[campaign][lab] = t
	}
}

// AdmitWindows is the admission rule of AdmitCampaigns over p.Campaigns, given each
// campaign's other labs' earliest witness times (first, from NoteWitness; read only where
// p.RequireWitness). The ledger (AdmitCampaigns) and every node's coordinator (which
// declines to claim the slots of a refused campaign) call it alike, so what the ledger
// refuses and what honest nodes decline to run agree.
func AdmitWindows(p AcceptPolicy, first map[string]map[string]time.Time) map[string]string {
	if p.Campaigns == nil || (p.MaxAgentsPerLab <= 0 && p.MaxCampaignsPerLab <= 0) {
		return nil
	}
	type entry struct {
		id string
		at time.Time
		w  CampaignWindow
	}
	byLab := map[string][]entry{}
	for id, w := range p.Campaigns {
		at := w.Created
		if p.RequireWitness {
			if len(first[id]) == 0 {
				continue
			}
			at = witnessTime(first[id], w.Created)
		}
		byLab[w.Lab] = append(byLab[w.Lab], entry{id, at, w})
	}
	refused := map[string]string{}
	for lab, cs := range byLab {
		slices.SortFunc(cs, func(a, b entry) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.id, b.id)) })
		agents := map[string]bool{}
		admitted := 0
		for _, c := range cs {
			if p.MaxCampaignsPerLab > 0 && admitted+1 > p.MaxCampaignsPerLab {
				refused[c.id] = fmt.Sprintf("lab %s already has %d campaigns admitted before it; a lab may have at most %d", lab, admitted, p.MaxCampaignsPerLab)
				continue
			}
			var fresh []string
			for _, a := range c.w.Agents {
				if !agents[a] && !slices.Contains(fresh, a) {
					fresh = append(fresh, a)
				}
			}
			if p.MaxAgentsPerLab > 0 && len(agents)+len(fresh) > p.MaxAgentsPerLab {
				refused[c.id] = fmt.Sprintf("it would bring lab %s to %d agents (%d admitted before it, %d new); a lab may have at most %d", lab, len(agents)+len(fresh), len(agents), len(fresh), p.MaxAgentsPerLab)
				continue
			}
			admitted++
			for _, a := range fresh {
				agents[a] = true
			}
		}
	}
	return refused
}

// RefusedCampaigns lists AdmitCampaigns' refusals sorted by lab, then campaign ID.
func (o Outcome) RefusedCampaigns(p AcceptPolicy) []RefusedCampaign {
	var out []RefusedCampaign
	for id, why := range o.AdmitCampaigns(p) {
		out = append(out, RefusedCampaign{Campaign: id, Lab: p.Campaigns[id].Lab, Reason: why})
	}
	slices.SortFunc(out, func(a, b RefusedCampaign) int {
		return cmp.Or(cmp.Compare(a.Lab, b.Lab), cmp.Compare(a.Campaign, b.Campaign))
	})
	return out
}

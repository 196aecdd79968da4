package mesh

import (
	"context"
	"fmt"
	"sort"

	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/protocol"
)

// What the local API (node/api, api.Mesh) asks of the mesh: campaigns and their slots as
// this node sees them, read on the loop, and the test hook that publishes a raw claim.

// PublishClaim publishes msg on the claims topic as this node's (its peer ID, lab and
// certificate filled in), bypassing the claim machine: only for the API's test/claim hook.
func (m *Mesh) PublishClaim(ctx context.Context, msg protocol.ClaimMessage) error {
	var cfg protocol.ClaimConfig
	if err := m.query(ctx, func() { cfg = m.coord.ClaimConfig() }); err != nil {
		return err
	}
	msg.V, msg.PeerID, msg.Lab, msg.Cert = protocol.Version, cfg.Self, cfg.Lab, cfg.Cert
	select {
	case m.publish <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (mc *meshCampaign) info(ready bool) api.CampaignInfo {
	c := mc.v.Campaign
	return api.CampaignInfo{ID: mc.v.ID, Title: c.Title, Lab: mc.v.Lab, LabName: mc.v.LabName, Network: c.Network,
		Tasks: len(c.Tasks), Agents: len(c.Agents), Seeds: c.Seeds, Replication: c.Replication,
		Slots: len(c.Tasks) * len(c.Agents) * c.Seeds, Created: c.Created, Deadline: c.Deadline, Ready: ready}
}

// Campaigns lists the campaigns this node has prepared, newest first.
func (m *Mesh) Campaigns(ctx context.Context) ([]api.CampaignInfo, error) {
	var out []api.CampaignInfo
	err := m.query(ctx, func() {
		for _, mc := range m.campaigns {
			out = append(out, mc.info(m.coord.Ready(mc.v.ID)))
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.After(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, err
}

// CampaignStatus reports a campaign's slots as this node sees them.
func (m *Mesh) CampaignStatus(ctx context.Context, id string) (*api.CampaignReport, error) {
	var rep *api.CampaignReport
	err := m.query(ctx, func() {
		mc, ok := m.campaigns[id]
		if !ok {
			return
		}
		st, _ := m.coord.Status(id, m.opts.Now())
		rep = &api.CampaignReport{CampaignInfo: mc.info(m.coord.Ready(id)), Status: st, Slots: []api.SlotReport{}, Refused: mc.refusals()}
		for _, s := range mc.v.Campaign.Slots() {
			sid := protocol.SlotID(s)
			sr := api.SlotReport{ID: sid, Task: s.Task, Agent: s.Agent, Seed: s.Seed, State: "open", Runs: []api.RunReport{}}
			if _, no := mc.refused[s.Agent]; no {
				sr.State = "refused" // by this node's policy (Refused says why)
			} else if m.coord.NoKey(id, s.Task) {
				sr.State = "no-key" // sealed, and this lab cannot open its key: key holders first
			}
			if m.coord.AwaitingKey(sid) > 0 {
				sr.State = "awaiting-key" // this node's run waits for the sealed bundle's key
			}
			if _, ok := m.running[sid]; ok {
				sr.State = "running"
			}
			for _, rid := range m.bySlot[sid] {
				r := m.runs[rid]
				sr.State = "done"
				rr := api.RunReport{AttestationID: r.ID, PeerID: r.Node, Lab: r.Lab, Attempt: r.Attempt, Valid: r.Valid, Score: r.Score, Rescores: []api.RescoreReport{}}
				for _, rs := range m.rescores[rid] {
					rr.Rescores = append(rr.Rescores, api.RescoreReport{AttestationID: rs.ID, PeerID: rs.Node, Lab: rs.Lab, Valid: rs.Valid, Score: rs.Score})
				}
				sr.Runs = append(sr.Runs, rr)
			}
			rep.Slots = append(rep.Slots, sr)
		}
	})
	if err != nil {
		return nil, err
	}
	if rep == nil {
		return nil, fmt.Errorf("campaign %s is not known to this node (see `evalmesh campaign ls`; a campaign is listed once its bundles are fetched)", id)
	}
	return rep, nil
}

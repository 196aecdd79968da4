package mesh

import (
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/runner"
)

// The lab's policy on what it runs (config runner.allow_network and runner.models): a
// campaign's agent that asks for a network the lab forbids, or for a model image, weight
// folder or GPU count it does not serve, is never claimed by this node; `campaign status`
// says why (CampaignReport.Refused). The decision is runner.CheckAgentPolicy, a pure function.

// refuseByPolicy fills mc.refused from the node's config (pol).
func (mc *meshCampaign) refuseByPolicy(pol runner.ModelPolicy, logf func(string, ...any)) {
	mc.refused = map[string]string{}
	for cid, spec := range mc.agents {
		if err := runner.CheckAgentPolicy(spec, pol); err != nil {
			mc.refused[cid] = err.Error()
			logf("mesh: campaign %s: not claiming agent %s: %v", mc.v.ID, cid, err)
		}
	}
}

// refusals lists mc.refused in the campaign's agent order.
func (mc *meshCampaign) refusals() []api.AgentRefusal {
	var out []api.AgentRefusal
	for _, a := range mc.v.Campaign.Agents {
		if r, ok := mc.refused[a.CID]; ok {
			out = append(out, api.AgentRefusal{Agent: a.CID, Reason: r})
		}
	}
	return out
}

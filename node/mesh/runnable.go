package mesh

import (
	"context"
	"maps"
	"slices"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
)

// A node claims only slots it can run (issue 45 point 3): a slot whose agent needs an
// image its engine lacks, a program its host lacks, a container when its executor is
// process, or more GPUs than it offers is never handed to the claim machine, so the node
// neither fails it at once (an attempt the network counts) nor keeps it from a node that
// can. The decision is runner.CheckRunnable, a pure function of runner.Capabilities, which
// runner.Runner.Capabilities finds (I/O: the engine, the host's PATH, NVML) when the
// campaign is added. Each refused (agent, task) pair is logged once.

// unrunnable returns, by slot ID, why this node cannot run each slot of mc it cannot run.
// r finds the capabilities (Runner.Capabilities); ctx bounds that.
func (mc *meshCampaign) unrunnable(ctx context.Context, r *runner.Runner, logf func(string, ...any)) map[string]string {
	specs := make([]*agentspec.Spec, 0, len(mc.agents))
	for _, cid := range slices.Sorted(maps.Keys(mc.agents)) {
		specs = append(specs, mc.agents[cid])
	}
	caps := r.Capabilities(ctx, specs)
	out := map[string]string{}
	logged := map[string]bool{}
	for _, s := range mc.v.Campaign.Slots() {
		spec := mc.agents[s.Agent]
		if spec == nil {
			continue // the run reports it (execute)
		}
		gpus := 0
		if meta, ok := mc.tasks[s.Task]; ok {
			gpus = meta.Limits.GPUs
		}
		if err := runner.CheckRunnable(spec, gpus, caps); err != nil {
			out[protocol.SlotID(s)] = err.Error()
			if key := s.Agent + "/" + s.Task; !logged[key] {
				logged[key] = true
				logf("mesh: campaign %s: not claiming agent %s on task %s: %v", mc.v.ID, s.Agent, s.Task, err)
			}
		}
	}
	return out
}

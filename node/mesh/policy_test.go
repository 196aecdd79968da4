package mesh

import (
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
)

// The claim path's policy hook: agents the lab's config forbids are refused with the
// reason, the others are kept, and the report lists refusals in campaign order.
func TestMeshRefusesAgentsByPolicy(t *testing.T) {
	img := "sha256:" + strings.Repeat("ab", 32)
	other := "sha256:" + strings.Repeat("cd", 32)
	model := func(image string, gpus int) *agentspec.Model {
		return &agentspec.Model{Name: "m", Image: image, Command: []string{"/model"}, Port: 8000, ReadyPath: "/health", Probe: []string{"/model", "probe"}, GPUs: gpus}
	}
	specs := []*agentspec.Spec{
		{Name: "plain", Version: "1", Command: []string{"/agent"}},
		{Name: "served", Version: "1", Command: []string{"/agent"}, Model: model(img, 1)},
		{Name: "unlisted", Version: "1", Command: []string{"/agent"}, Model: model(other, 1)},
		{Name: "greedy", Version: "1", Command: []string{"/agent"}, Model: model(img, 4)},
		{Name: "bridged", Version: "1", Command: []string{"/agent"}, Network: "bridge"},
	}
	mc := &meshCampaign{v: &protocol.VerifiedCampaign{ID: "c", Campaign: &protocol.Campaign{}}, agents: map[string]*agentspec.Spec{}}
	for _, s := range specs {
		mc.agents[s.CID()] = s
		mc.v.Campaign.Agents = append(mc.v.Campaign.Agents, protocol.CampaignAgent{CID: s.CID(), Spec: s.Canonical()})
	}
	cfg := home.DefaultConfig()
	cfg.Runner.Models.Images = []string{img}
	mc.refuseByPolicy(runner.PolicyFromConfig(cfg.Runner), func(string, ...any) {})
	got := mc.refusals()
	want := map[string]string{"unlisted": "runner.models.images", "greedy": "runner.models.max_gpus", "bridged": "runner.allow_network"}
	if len(got) != len(want) {
		t.Fatalf("refused %+v, want %v", got, want)
	}
	for i, name := range []string{"unlisted", "greedy", "bridged"} {
		if got[i].Agent != mc.v.Campaign.Agents[i+2].CID || !strings.Contains(got[i].Reason, want[name]) {
			t.Fatalf("refusal %d %+v, want agent %s for %q", i, got[i], name, want[name])
		}
	}
}

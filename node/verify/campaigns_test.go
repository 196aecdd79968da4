package verify

import (
	"reflect"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// TestLedgerCampaignTakesTaskMetadataFromTheBundle: a campaign names its tasks by bundle CID
// and nothing more, so what the ledger scores a task by (its name, metric direction,
// optimum, SOTA, estimated worst) is its bundle's, however many campaigns list it, in
// whatever order, and whatever else they say. A campaign whose bundle is not here gives the
// ledger nothing rather than a task without metadata.
func TestLedgerCampaignTakesTaskMetadataFromTheBundle(t *testing.T) {
	bundle, missing := agentspec.RawCID([]byte("sort bundle")), agentspec.RawCID([]byte("a bundle no peer served"))
	worst := 40.0
	metas := map[string]tasks.Meta{bundle: {Name: "sort", Metric: tasks.Metric{Name: "rmse", LowerIsBetter: true, OptimalScore: 0},
		SOTA: tasks.SOTA{Score: 3.5}, EstimatedWorstScore: &worst}}
	spec := &agentspec.Spec{Name: "solver", Version: "1.0.0", Command: []string{"evalmesh", "agent", "echo"}}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	campaign := func(id, lab, title string, created time.Time, seeds int, bundles ...string) *protocol.VerifiedCampaign {
		return &protocol.VerifiedCampaign{ID: id, Lab: lab, LabName: lab, Campaign: &protocol.Campaign{Title: title, Lab: lab, Seeds: seeds,
			Replication: 1, Created: created, Deadline: created.Add(72 * time.Hour), Tasks: bundles,
			Agents: []protocol.CampaignAgent{protocol.NewCampaignAgent(spec)}}}
	}
	early := campaign("bafyearly", "lab:b", "a better SOTA for sort", t0, 5, bundle)
	late := campaign("bafylate", "lab:a", "sort, the real one", t0.Add(time.Hour), 2, bundle)
	want := scoring.TaskInfo{Name: "sort", LowerIsBetter: true, Optimum: 0, SOTA: 3.5, EstimatedWorst: &worst}

	var lcs []protocol.LedgerCampaign
	for _, v := range []*protocol.VerifiedCampaign{early, late} {
		lc, ok := ledgerCampaign(v, metas)
		if !ok {
			t.Fatalf("campaign %s not taken with its bundle here", v.ID)
		}
		if got := lc.Tasks; !reflect.DeepEqual(got, map[string]scoring.TaskInfo{bundle: want}) {
			t.Errorf("campaign %s: tasks %+v, want the bundle's metadata %+v", v.ID, got, want)
		}
		lcs = append(lcs, lc)
	}
	for _, order := range [][]protocol.LedgerCampaign{lcs, {lcs[1], lcs[0]}} {
		if got := protocol.NamesOf(order).Tasks; !reflect.DeepEqual(got, []scoring.TaskInfo{want}) {
			t.Errorf("ledger tasks %+v, want the bundle's one task %+v", got, want)
		}
	}
	if _, ok := ledgerCampaign(campaign("bafymissing", "lab:c", "", t0, 1, bundle, missing), metas); ok {
		t.Error("a campaign with a bundle not here was taken")
	}
}

package protocol

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/scoring"
)

// TestNamesOfTasksByBundle: a bundle that reuses a taken task name is a task of its own. Two
// bundles both named "sort", with different metrics and SOTAs, are listed by two labs'
// campaigns; the earlier campaign lists only the second bundle, so a ledger that keyed tasks
// by name, or took a name's metadata from whichever campaign sorts first, would merge the
// two rows under the second bundle's SOTA. Each must keep a row, a name and the metadata of
// its own bundle, whatever order the campaigns come in.
func TestNamesOfTasksByBundle(t *testing.T) {
	labA, labB := newCampaignLab(t), newCampaignLab(t)
	trust := trustStoreOf(t, labA, labB)
	bundleA, bundleB := campaignTestCID("sort bundle of lab a"), campaignTestCID("sort bundle of lab b")
	infoA := scoring.TaskInfo{Name: "sort", Optimum: 1, SOTA: 0.9}
	infoB := scoring.TaskInfo{Name: "sort", LowerIsBetter: true, Optimum: 0, SOTA: 10}
	agent := campaignTestCID("solver spec")
	early := LedgerCampaign{ID: campaignTestCID("early campaign"), Lab: labB.ID, LabName: "labb", Created: campaignT0,
		Deadline: campaignT0.Add(72 * time.Hour), Tasks: map[string]scoring.TaskInfo{bundleB: infoB}, Agents: map[string]string{agent: "solver"}}
	late := LedgerCampaign{ID: campaignTestCID("late campaign"), Lab: labA.ID, LabName: "laba", Created: campaignT0.Add(time.Hour),
		Deadline: campaignT0.Add(72 * time.Hour), Tasks: map[string]scoring.TaskInfo{bundleA: infoA, bundleB: infoB}, Agents: map[string]string{agent: "solver"}}

	names := NamesOf([]LedgerCampaign{early, late})
	if again := NamesOf([]LedgerCampaign{late, early}); !reflect.DeepEqual(again, names) {
		t.Fatalf("NamesOf depends on the campaigns' order:\n%+v\n%+v", names, again)
	}
	nameA, nameB := names.TaskNames[bundleA], names.TaskNames[bundleB]
	if nameA == nameB || nameA != "sort#"+bundleA[len(bundleA)-8:] || nameB != "sort#"+bundleB[len(bundleB)-8:] {
		t.Fatalf("task names %q and %q: want each bundle's own, qualified by its CID", nameA, nameB)
	}
	wantA, wantB := infoA, infoB
	wantA.Name, wantB.Name = nameA, nameB
	want := []scoring.TaskInfo{wantA, wantB}
	slices.SortFunc(want, func(a, b scoring.TaskInfo) int { return strings.Compare(a.Name, b.Name) })
	if !reflect.DeepEqual(names.Tasks, want) {
		t.Fatalf("tasks %+v, want %+v: each bundle's own metadata", names.Tasks, want)
	}

	// The ledger over runs of both bundles: two task rows, each with its own bundle's runs
	// and anchors.
	node := newAttestNode(t, labA)
	end := campaignT0.Add(2 * time.Hour)
	var envs []attest.EnvelopeFile
	for i, s := range []attest.Slot{
		{Campaign: late.ID, Task: bundleA, Agent: agent, Seed: 0},
		{Campaign: late.ID, Task: bundleB, Agent: agent, Seed: 0},
		{Campaign: early.ID, Task: bundleB, Agent: agent, Seed: 1},
	} {
		envs = append(envs, attest.EnvelopeFile{Name: string(rune('a' + i)), Data: signRunFor(t, node, labA.ID, s, end)})
	}
	l, rep, err := attest.BuildLedger(attest.LedgerInput{Envelopes: envs, Trust: trust, Tasks: names.Tasks, Campaigns: names.Windows,
		Policy: attest.AcceptPolicy{Tasks: names.TaskNames, Agents: names.AgentNames, AgentOwners: names.AgentOwners, AllowProcessRuns: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Refused) != 0 || len(rep.Excluded) != 0 {
		t.Fatalf("refused %+v, excluded %+v: every run should count", rep.Refused, rep.Excluded)
	}
	rows := map[string]scoring.TaskRow{}
	for _, r := range l.Tasks {
		rows[r.Task] = r
	}
	if len(rows) != 2 {
		t.Fatalf("task rows %+v: want one per bundle", l.Tasks)
	}
	if r := rows[nameA]; r.Runs != 1 || r.SOTA != infoA.SOTA || r.LowerIsBetter {
		t.Errorf("row %s %+v: want lab a's bundle's one run, SOTA %v, higher better", nameA, r, infoA.SOTA)
	}
	if r := rows[nameB]; r.Runs != 2 || r.SOTA != infoB.SOTA || !r.LowerIsBetter {
		t.Errorf("row %s %+v: want lab b's bundle's two runs, SOTA %v, lower better", nameB, r, infoB.SOTA)
	}
}

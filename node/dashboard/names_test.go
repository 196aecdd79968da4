package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// collidingSnapshot is a snapshot of two labs that each list an agent named "solver" (two
// specs), and two bundles named "sort", named as every node's ledger names them
// (protocol.NamesOf). lab1's solver scores 0.8 on seeds 0 and 1 of the first bundle; lab2's
// scores 0.2 on both seeds of both bundles.
func collidingSnapshot(t *testing.T) (s *Snapshot, agents, taskNames map[string]string) {
	t.Helper()
	at := time.Unix(1_800_000_000, 0).UTC()
	solver1, solver2, sortA, sortB := "bafyspec1solver", "bafyspec2solver", "bafybundleAAAAAAAA", "bafybundleBBBBBBBB"
	infoA, infoB := scoring.TaskInfo{Name: "sort", Optimum: 1, SOTA: 0.9}, scoring.TaskInfo{Name: "sort", Optimum: 1, SOTA: 0.5}
	names := protocol.NamesOf([]protocol.LedgerCampaign{
		{ID: "bafycampaign1", Lab: "lab:1", LabName: "lab1", Created: at.Add(-2 * time.Hour), Deadline: at,
			Tasks: map[string]scoring.TaskInfo{sortA: infoA}, Agents: map[string]string{solver1: "solver"}},
		{ID: "bafycampaign2", Lab: "lab:2", LabName: "lab2", Created: at.Add(-time.Hour), Deadline: at,
			Tasks: map[string]scoring.TaskInfo{sortA: infoA, sortB: infoB}, Agents: map[string]string{solver2: "solver"}},
	})
	s = &Snapshot{Network: "colliding", PeerID: "12D3KooWSelf", At: at, Tasks: []Task{}, Campaigns: []Campaign{}, Runs: []Run{}, Peers: []Peer{},
		Evidence: Evidence{Equivocations: []Exclusion{}, Disputed: []Exclusion{}, Refused: []Refusal{}, Misconduct: []Misconduct{}}}
	for _, b := range []struct {
		cid  string
		info scoring.TaskInfo
	}{{sortA, infoA}, {sortB, infoB}} {
		s.Tasks = append(s.Tasks, Task{Name: names.TaskNames[b.cid], CID: b.cid, Metric: "accuracy", SOTA: b.info.SOTA, Optimum: b.info.Optimum})
	}
	var results []scoring.Result
	add := func(lab, spec, bundle string, score float64) {
		for seed := range 2 {
			id := fmt.Sprintf("bafyrun-%s-%s-%d", lab, bundle[len(bundle)-1:], seed)
			r := scoring.Result{Task: names.TaskNames[bundle], Agent: names.AgentNames[spec], Seed: seed, AttestationID: id,
				Status: scoring.StatusSuccess, Score: &score}
			results = append(results, r)
			s.Runs = append(s.Runs, Run{ID: id, Campaign: "bafycampaign" + lab[len(lab)-1:], Task: r.Task, Agent: r.Agent, Seed: seed,
				PeerID: "12D3KooW" + lab, Lab: "lab:" + lab[len(lab)-1:], LabName: lab, Attempt: 1, Valid: true, Score: &score,
				End: at.Add(-time.Duration(len(s.Runs)+1) * time.Minute), Counted: true})
		}
	}
	add("lab1", solver1, sortA, 0.8)
	add("lab2", solver2, sortA, 0.2)
	add("lab2", solver2, sortB, 0.2)
	l, err := scoring.ComputeLedger(results, names.Tasks, scoring.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Ledger, s.LedgerRoot, s.LedgerAt, s.Attestations = l, l.Root(), at, len(results)
	return s, map[string]string{"lab1": names.AgentNames[solver1], "lab2": names.AgentNames[solver2]},
		map[string]string{"A": names.TaskNames[sortA], "B": names.TaskNames[sortB]}
}

// TestCollidingNamesShowWhoseTheyAre: two labs' agents named "solver" are two rows, each
// qualified by the lab that answers for it, on the leaderboard, the runs, the agents' pages
// and their JSON, and the snapshot's; each row, agent page and task page holds its own runs
// only, and the qualified names (with '@', and '#' for a task) reach their pages by their
// links.
func TestCollidingNamesShowWhoseTheyAre(t *testing.T) {
	s, agents, taskNames := collidingSnapshot(t)
	if agents["lab1"] != "solver@lab1" || agents["lab2"] != "solver@lab2" {
		t.Fatalf("agent names %v: want solver qualified by each lab", agents)
	}
	h := newTestHandler(t, s, Options{RatePerSecond: 1000, Burst: 1000})

	var lb Leaderboard
	if rec := get(t, h, "/api/v1/leaderboard"); rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &lb) != nil {
		t.Fatalf("leaderboard: %d %s", rec.Code, rec.Body)
	}
	runsOf := map[string]int{}
	for _, r := range lb.Rows {
		runsOf[r.Agent] = r.Runs
	}
	if len(runsOf) != 3 || runsOf["solver@lab1"] != 2 || runsOf["solver@lab2"] != 4 {
		t.Errorf("leaderboard rows %v: want sota, solver@lab1 with its 2 runs and solver@lab2 with its 4", runsOf)
	}

	home := get(t, h, "/").Body.String()
	for _, a := range []string{"solver@lab1", "solver@lab2"} {
		if !strings.Contains(home, `href="/agents/`+a+`">`+a+`</a>`) {
			t.Errorf("the leaderboard page does not link %s under its qualified name", a)
		}
	}
	if strings.Contains(home, ">solver<") {
		t.Error("the leaderboard page shows an unqualified solver")
	}

	// The snapshot's runs, as /api/v1/runs serves them: each under its own lab's agent.
	var page RunsPage
	if rec := get(t, h, "/api/v1/runs"); json.Unmarshal(rec.Body.Bytes(), &page) != nil || page.Total != len(s.Runs) {
		t.Fatalf("runs: %d %s", rec.Code, rec.Body)
	}
	for _, r := range page.Runs {
		if r.Agent != agents[r.LabName] {
			t.Errorf("run %s of %s under agent %q, want %q", r.ID, r.LabName, r.Agent, agents[r.LabName])
		}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"agent":"solver"`) || strings.Contains(string(raw), `"name":"sort"`) {
		t.Errorf("snapshot JSON names an agent or task unqualified: %s", raw)
	}

	for lab, a := range agents {
		var v AgentView
		if rec := get(t, h, "/api/v1/agents/"+url.PathEscape(a)); rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
			t.Fatalf("agent %s: %d %s", a, rec.Code, rec.Body)
		}
		var ids []string
		for _, task := range v.Tasks {
			for _, sv := range task.Seeds {
				ids = append(ids, sv.AttestationID)
			}
		}
		if len(ids) != runsOf[a] || slices.ContainsFunc(ids, func(id string) bool { return !strings.HasPrefix(id, "bafyrun-"+lab) }) {
			t.Errorf("agent %s's seeds %v: want its lab's %d runs only", a, ids, runsOf[a])
		}
		body := get(t, h, "/agents/"+url.PathEscape(a)).Body.String()
		if shown := strings.Count(body, `title="bafyrun-`); !strings.Contains(body, "<h1>Agent "+a+"</h1>") || shown != runsOf[a] || strings.Count(body, `title="bafyrun-`+lab) != shown {
			t.Errorf("agent page %s shows %d runs: want its lab's %d alone", a, shown, runsOf[a])
		}
	}
	if rec := get(t, h, "/api/v1/agents/solver"); rec.Code != http.StatusNotFound {
		t.Errorf("/api/v1/agents/solver answers %d: no row may be named solver alone", rec.Code)
	}

	// The two "sort" bundles: their own pages, reached by the links the heatmap gives them.
	heat := get(t, h, "/heatmap").Body.String()
	for bundle, name := range taskNames {
		link := "/tasks/" + url.PathEscape(name)
		if !strings.Contains(name, "#") || !strings.Contains(heat, `href="`+link+`"`) {
			t.Errorf("task %s (%s): heatmap does not link %s", bundle, name, link)
		}
		var v TaskView
		if rec := get(t, h, "/api/v1"+link); rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
			t.Fatalf("task %s: %d %s", name, rec.Code, rec.Body)
		}
		wantSOTA, wantRuns := 0.9, 4
		if bundle == "B" {
			wantSOTA, wantRuns = 0.5, 2
		}
		if v.Name != name || v.SOTA != wantSOTA || len(v.Runs) != wantRuns {
			t.Errorf("task %s: %s, SOTA %v, %d runs; want SOTA %v, %d runs", name, v.Name, v.SOTA, len(v.Runs), wantSOTA, wantRuns)
		}
	}
}

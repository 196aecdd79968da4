package demo_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalmesh/evalmesh/examples/agents"
	"github.com/evalmesh/evalmesh/examples/demo"
)

func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "agent" {
		os.Exit(agents.Run(os.Args[2], os.Args[3:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	res, err := demo.Execute(context.Background(), demo.Options{Home: dir, Seeds: 3, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3*4*3 || res.Verified != len(res.Runs) {
		t.Fatalf("%d runs, %d verified", len(res.Runs), res.Verified)
	}
	// Mean score per (task, agent): the baselines differ visibly, in the expected order.
	type key struct{ task, agent string }
	sum, n := map[key]float64{}, map[key]int{}
	lower := map[string]bool{"SyntheticRegressionMAE": true}
	invalid := map[string]int{}
	for _, r := range res.Runs {
		if !r.Valid {
			invalid[r.Agent]++
			continue
		}
		sum[key{r.Task, r.Agent}] += *r.Score
		n[key{r.Task, r.Agent}]++
	}
	for _, task := range []string{"ArithmeticWordProblemsAccuracy", "SyntheticRegressionMAE", "ReviewSentimentAccuracy"} {
		mean := func(a string) float64 { return sum[key{task, a}] / float64(n[key{task, a}]) }
		c, h, s := mean("constant"), mean("heuristic"), mean("solver")
		better := func(a, b float64) bool {
			if lower[task] {
				return a < b
			}
			return a > b
		}
		if !better(s, h) || !better(h, c) {
			t.Errorf("%s: solver %.3f, heuristic %.3f, constant %.3f: not in order of skill", task, s, h, c)
		}
	}
	if invalid["flaky"] != 6 || invalid["solver"] != 1 || len(invalid) != 2 {
		t.Errorf("invalid runs by agent %v, want flaky's 6 (seeds 1 and 2 on 3 tasks) and solver's 1 (regression seed 0)", invalid)
	}
	// The leaderboard ranks the solver first among agents and shows flaky's lower VSR.
	rank := map[string]int{}
	for _, a := range res.Ledger.Agents {
		rank[a.Agent] = a.Rank
		if a.Agent == "flaky" && (a.ValidSubmissionRate == nil || *a.ValidSubmissionRate > 0.34) {
			t.Errorf("flaky valid-submission rate %v", a.ValidSubmissionRate)
		}
	}
	if rank["solver"] >= rank["heuristic"] || rank["heuristic"] >= rank["constant"] {
		t.Errorf("ranks %v", rank)
	}
	if len(res.Ledger.Root()) != 64 {
		t.Errorf("ledger root %q", res.Ledger.Root())
	}
	// Every attestation is in the home under its ID.
	ents, _ := os.ReadDir(filepath.Join(dir, "attestations"))
	if len(ents) != len(res.Runs) {
		t.Errorf("%d attestation files for %d runs", len(ents), len(res.Runs))
	}
}

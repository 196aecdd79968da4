package demo

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/examples/agents"
	heurekaexample "github.com/evalmesh/evalmesh/examples/heureka"
	"github.com/evalmesh/evalmesh/runner"
)

// HeurekaBench in the demo: the example task (examples/heureka) beside the AIRS-style
// ones, run by the two example co-scientists only (the baselines do not answer questions,
// and the co-scientists solve nothing else), scored by the stand-in keyword judge — a test
// double for an LLM judge — and shown in the ledger's HeurekaBench table. The network demo
// (network.go) publishes it as a campaign of its own that the daemons run and re-judge;
// the single-node demo (Execute) runs it here, with runHeureka.

// splitAgents splits the agents a demo was asked for into the baselines (the AIRS-style
// tasks' agents) and the co-scientists (HeurekaBench's), in the order given; no names mean
// every baseline and every co-scientist. An unknown name is an error.
func splitAgents(names []string) (baselines, coScientists []string, err error) {
	if len(names) == 0 {
		return slices.Clone(agents.Baselines), slices.Clone(agents.CoScientists), nil
	}
	for _, a := range names {
		if _, ok := agents.Lookup(a); !ok {
			return nil, nil, fmt.Errorf("no example agent %q (have %v)", a, agents.Names())
		}
		if slices.Contains(agents.CoScientists, a) {
			coScientists = append(coScientists, a)
		} else {
			baselines = append(baselines, a)
		}
	}
	return baselines, coScientists, nil
}

// wantsHeureka reports whether the grid includes the HeurekaBench task: by default, or
// when --tasks names it.
func wantsHeureka(tasks []string, defaulted bool) bool {
	return defaulted || slices.Contains(tasks, heurekaexample.Name)
}

// runHeureka runs the co-scientists on the HeurekaBench task for seeds seeds.
func runHeureka(ctx context.Context, r *runner.Runner, res *Result, bundles map[string]string, specs map[string]*agentspec.Spec, coScientists []string, seeds int, log io.Writer) error {
	tdir := filepath.Join(res.TasksDir, heurekaexample.Name)
	cid, err := runner.BundleCID(ctx, tdir)
	if err != nil {
		return err
	}
	if bundles[cid] != heurekaexample.Name {
		return fmt.Errorf("task bundle %s has CID %s, which the ledger's task map does not name %s", tdir, cid, heurekaexample.Name)
	}
	for _, agent := range coScientists {
		for seed := 0; seed < seeds; seed++ {
			t0 := time.Now()
			o, err := r.Run(ctx, runner.Request{TaskDir: tdir, TaskCID: cid, Agent: specs[agent], Seed: seed})
			if err != nil {
				return fmt.Errorf("%s × %s seed %d: %w", heurekaexample.Name, agent, seed, err)
			}
			res.Runs = append(res.Runs, Run{Task: heurekaexample.Name, Agent: agent, Seed: seed, RunID: o.RunID, AttestationID: o.AttestationID,
				Valid: o.Valid, Score: o.Score, InvalidReason: o.InvalidReason, Seconds: time.Since(t0).Seconds()})
			score := "invalid: " + o.InvalidReason
			if o.Valid {
				score = fmt.Sprintf("%s %.4g (judge %s)", o.Metric, *o.Score, short(o.Predicate.Heureka.Verdicts))
			}
			fmt.Fprintf(log, "%-32s %-10s seed %d  %s  %s\n", heurekaexample.Name, agent, seed, short(o.AttestationID), score)
		}
	}
	return nil
}

// Package demo is `evalmesh demo`: the whole pipeline on embedded defaults, with no
// downloads, Docker or GPUs. It generates the example tasks, runs every baseline agent on
// every task for a few seeds with the process executor, signs each run attestation,
// verifies them all as another node would, and computes the leaderboard from what verified.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/examples/agents"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/process"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// Options tune the demo. The zero value runs every baseline on every example task with
// three seeds in a fresh temporary home.
type Options struct {
	// Home is the node home; "" means a new temporary folder (kept, and printed).
	Home string
	// Seeds per (task, agent); 0 means 3.
	Seeds int
	// Agents and Tasks restrict the grid; empty means all baselines / all example tasks.
	Agents []string
	Tasks  []string
	// SelfExe is the evalmesh binary the agents run as (`evalmesh agent NAME`); "" means
	// os.Executable().
	SelfExe string
	// Log receives one line per run; nil discards.
	Log io.Writer
}

// Run is one cell of the grid.
type Run struct {
	Task          string   `json:"task"`
	Agent         string   `json:"agent"`
	Seed          int      `json:"seed"`
	RunID         string   `json:"run_id"`
	AttestationID string   `json:"attestation_id"`
	Valid         bool     `json:"valid"`
	Score         *float64 `json:"score"`
	InvalidReason string   `json:"invalid_reason,omitempty"`
	Seconds       float64  `json:"seconds"`
}

// Result is what the demo did.
type Result struct {
	Home     string          `json:"home"`
	Runs     []Run           `json:"runs"`
	Verified int             `json:"verified"`
	Ledger   *scoring.Ledger `json:"ledger"`
	Seconds  float64         `json:"seconds"`
}

// Execute runs the demo.
func Execute(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	if opts.Seeds <= 0 {
		opts.Seeds = 3
	}
	if len(opts.Agents) == 0 {
		opts.Agents = agents.Baselines
	}
	if len(opts.Tasks) == 0 {
		opts.Tasks = exampletasks.Names
	}
	for _, a := range opts.Agents {
		if _, ok := agents.Lookup(a); !ok {
			return nil, fmt.Errorf("no example agent %q (have %v)", a, agents.Names())
		}
	}
	dir := opts.Home
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "evalmesh-demo-"); err != nil {
			return nil, err
		}
	}
	h, err := home.Resolve(dir)
	if err != nil {
		return nil, err
	}
	if _, err := h.Init(); err != nil && !errors.Is(err, home.ErrExists) {
		return nil, err
	}
	key, err := h.Identity()
	if err != nil {
		return nil, err
	}
	taskRoot := filepath.Join(h.Dir, "examples", "tasks")
	if _, err := exampletasks.Generate(taskRoot); err != nil {
		return nil, err
	}
	r := &runner.Runner{
		Home:      h,
		Executors: map[string]runner.Executor{"process": process.New(process.Options{})},
		Executor:  "process",
		Key:       key,
		SelfExe:   opts.SelfExe,
	}
	if rec, err := r.Recover(ctx); err != nil {
		return nil, err
	} else if len(rec) > 0 {
		fmt.Fprintf(log, "recovered %d unfinished run(s) of an earlier demo\n", len(rec))
	}

	res := &Result{Home: h.Dir}
	var infos []scoring.TaskInfo
	var envelopes [][]byte
	for _, name := range opts.Tasks {
		tdir := filepath.Join(taskRoot, name)
		b, err := tasks.Open(tdir)
		if err != nil {
			return nil, err
		}
		m := b.Meta
		infos = append(infos, scoring.TaskInfo{Name: m.Name, LowerIsBetter: m.Metric.LowerIsBetter,
			Optimum: m.Metric.OptimalScore, SOTA: m.SOTA.Score, EstimatedWorst: m.EstimatedWorstScore})
		cid, err := runner.BundleCID(ctx, tdir)
		if err != nil {
			return nil, err
		}
		for _, agent := range opts.Agents {
			spec := &runner.AgentSpec{Name: agent, Version: "1.0.0", Command: []string{"evalmesh", "agent", agent}}
			for seed := 0; seed < opts.Seeds; seed++ {
				t0 := time.Now()
				o, err := r.Run(ctx, runner.Request{TaskDir: tdir, TaskCID: cid, Agent: spec, Seed: seed})
				if err != nil {
					return nil, fmt.Errorf("%s × %s seed %d: %w", m.Name, agent, seed, err)
				}
				run := Run{Task: m.Name, Agent: agent, Seed: seed, RunID: o.RunID, AttestationID: o.AttestationID,
					Valid: o.Valid, Score: o.Score, InvalidReason: o.InvalidReason, Seconds: time.Since(t0).Seconds()}
				res.Runs = append(res.Runs, run)
				envelopes = append(envelopes, o.Envelope)
				score := "invalid: " + o.InvalidReason
				if o.Valid {
					score = fmt.Sprintf("%s %.4g", o.Metric, *o.Score)
				}
				fmt.Fprintf(log, "%-32s %-10s seed %d  %s  %s\n", m.Name, agent, seed, short(o.AttestationID), score)
			}
		}
	}

	// Verify every envelope as a peer would, and build the ledger only from what verified.
	raw, _ := key.GetPublic().Raw()
	trust := attest.NewTrustStore()
	if _, err := trust.AddNode("demo-node", raw); err != nil {
		return nil, err
	}
	var results []scoring.Result
	for i, env := range envelopes {
		v, err := attest.Verify(env, trust, time.Now())
		if err != nil {
			return nil, fmt.Errorf("attestation %s does not verify: %w", res.Runs[i].AttestationID, err)
		}
		res.Verified++
		run := res.Runs[i]
		status := scoring.StatusSuccess
		if !run.Valid {
			status = "INVALID"
		}
		results = append(results, scoring.Result{Task: run.Task, Agent: run.Agent, Seed: run.Seed,
			Status: status, Score: run.Score, AttestationID: v.ID})
	}
	if res.Ledger, err = scoring.ComputeLedger(results, infos, scoring.Options{}); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func short(id string) string {
	if len(id) > 16 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}

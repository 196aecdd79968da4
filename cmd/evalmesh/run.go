package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/process"
)

func init() { register(newRunCmd) }

// nodeRunner builds the runner of a home with the executors this machine can offer: the
// process executor always, docker when an engine answers (required if it is the one asked
// for). The daemon's CLI file uses it too.
func nodeRunner(h home.Home, executor string, log io.Writer) (*runner.Runner, error) {
	cfg, err := h.Config()
	if err != nil {
		return nil, err
	}
	want := executor
	if want == "" {
		want = cfg.Runner.Executor
	}
	exs := map[string]runner.Executor{"process": process.New(process.Options{})}
	if want == "docker" {
		d, err := docker.New(docker.Options{})
		if err != nil {
			return nil, err
		}
		exs["docker"] = d
	}
	return runner.ForHome(h, exs, want, log)
}

type runOutput struct {
	RunID         string   `json:"run_id"`
	AttestationID string   `json:"attestation_id"`
	Valid         bool     `json:"valid"`
	Score         *float64 `json:"score"`
	Metric        string   `json:"metric"`
	InvalidReason string   `json:"invalid_reason,omitempty"`
	Attestation   string   `json:"attestation_path"`
}

func newRunCmd(g *globals) *cobra.Command {
	var taskDir, agentPath, executor, taskCID string
	var seed int
	cmd := &cobra.Command{
		Use:   "run --task BUNDLE_DIR --agent AGENT.yaml [--seed N] [--executor docker|process]",
		Short: "Run one agent on one task, score it apart from the agent, and sign the attestation",
		Long: `Run one slot end to end: hold the GPUs the task needs, run the agent with public/ read-only,
an empty workspace and an output folder (no network unless the agent spec and the lab's
policy allow it; the task's memory, CPU, pids and wall-clock limits), destroy it, score its
submission apart from it (the built-in metric, or the task's evaluator, which alone sees
private/), and write a signed run attestation with the submission and logs, content-addressed,
into the node home. Prints the attestation ID and the score; on a terminal a status line
shows the phase, the elapsed time and GPU use.

Unfinished runs of an earlier, killed evalmesh in this home are recovered first.

The agent spec format is in docs/agent-spec.md.

Example (no Docker, no GPU):
  evalmesh init --home /tmp/lab
  evalmesh demo --home /tmp/lab --seeds 1      # generates examples/tasks in the home
  cat > solver.yaml <<'Y'
  name: solver
  version: "1.0.0"
  command: ["evalmesh", "agent", "solver"]
  Y
  evalmesh run --home /tmp/lab --task /tmp/lab/examples/tasks/arithmetic \
      --agent solver.yaml --seed 0 --executor process`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if taskDir == "" || agentPath == "" {
				return fmt.Errorf("run needs --task BUNDLE_DIR and --agent AGENT.yaml (see evalmesh run --help)")
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			spec, err := runner.LoadAgentSpec(agentPath)
			if err != nil {
				return err
			}
			r, err := nodeRunner(h, executor, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if r.Executor == "docker" && spec.Image == "" && spec.ImageTar != "" {
				if d, ok := r.Executors["docker"].(*docker.Executor); ok {
					if spec.Image, err = d.LoadImage(ctx, spec.ImageTar); err != nil {
						return err
					}
				}
			}
			status := newStatusLine(cmd.ErrOrStderr())
			r.Progress = status.update
			if rec, err := r.Recover(ctx); err != nil {
				return err
			} else {
				for _, x := range rec {
					if x.Err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "recovered run %s: failed: %v\n", x.RunID, x.Err)
					} else {
						fmt.Fprintf(cmd.ErrOrStderr(), "recovered run %s: attestation %s\n", x.RunID, x.Outcome.AttestationID)
					}
				}
			}
			o, err := r.Run(ctx, runner.Request{TaskDir: taskDir, TaskCID: taskCID, Agent: spec, Seed: seed})
			status.done()
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted: the agent task keeps running; run evalmesh run (or the daemon) on this home again to re-attach: %w", err)
				}
				return err
			}
			out := runOutput{RunID: o.RunID, AttestationID: o.AttestationID, Valid: o.Valid, Score: o.Score,
				Metric: o.Metric, InvalidReason: o.InvalidReason,
				Attestation: filepath.Join(h.AttestationsDir(), o.AttestationID+".json")}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "attestation %s\n", o.AttestationID)
			if o.Valid {
				fmt.Fprintf(w, "score       %s = %g\n", o.Metric, *o.Score)
			} else {
				fmt.Fprintf(w, "score       invalid: %s\n", o.InvalidReason)
			}
			fmt.Fprintf(w, "run         %s\n", runner.RunDir(h, o.RunID))
			return nil
		},
	}
	cmd.Flags().StringVar(&taskDir, "task", "", "task bundle folder (task.yaml, prompt.md, public/, private/)")
	cmd.Flags().StringVar(&agentPath, "agent", "", "agent spec file (YAML or JSON; docs/agent-spec.md)")
	cmd.Flags().IntVar(&seed, "seed", 0, "seed index of the slot (passed to the agent as EVALMESH_SEED)")
	cmd.Flags().StringVar(&executor, "executor", "", "docker or process (default: runner.executor in config.yaml)")
	cmd.Flags().StringVar(&taskCID, "task-cid", "", "the bundle's CID if known (default: computed from the folder)")
	return cmd
}

// statusLine redraws one line on a terminal: phase, elapsed time, GPU use. Off a terminal
// it prints nothing (logs stay clean).
type statusLine struct {
	w    io.Writer
	tty  bool
	last time.Time
	drew bool
}

func newStatusLine(w io.Writer) *statusLine {
	s := &statusLine{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		s.tty = true
	}
	return s
}

func (s *statusLine) update(p runner.Progress) {
	if !s.tty {
		return
	}
	gpu := "CPU only"
	if p.GPUUtil >= 0 {
		gpu = fmt.Sprintf("GPU %3.0f%%", p.GPUUtil)
	}
	el := p.Elapsed.Truncate(time.Second)
	fmt.Fprintf(s.w, "\r\033[K%s  %-10s  %8s  %s", p.RunID, p.Phase, el, gpu)
	s.drew = true
}

func (s *statusLine) done() {
	if s.drew {
		fmt.Fprint(s.w, "\r\033[K")
	}
}

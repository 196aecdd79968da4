package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
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
// process executor always; docker when it is the one asked for (then an engine must answer),
// and also when an unfinished run of the home used docker and an engine answers, so that a
// run recovered by `run --executor process` is re-attached rather than left behind.
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
	} else if unfinishedDockerRuns(h) {
		if d, err := docker.New(docker.Options{}); err == nil {
			exs["docker"] = d
		}
	}
	return runner.ForHome(h, exs, want, log)
}

// unfinishedDockerRuns reports whether a run of the home that is not final used docker.
func unfinishedDockerRuns(h home.Home) bool {
	runs, _ := runner.ListRuns(h)
	for _, st := range runs {
		if !st.Phase.Final() && st.Executor == "docker" {
			return true
		}
	}
	return false
}

// recoverRuns recovers the home's unfinished runs (runner.Recover) and says on w what became
// of each; it returns how many it handled and how many were left unfinished.
func recoverRuns(ctx context.Context, r *runner.Runner, w io.Writer) (handled, left int, err error) {
	rec, err := r.Recover(ctx)
	handled = len(rec)
	for _, x := range rec {
		switch {
		case x.Err == nil:
			fmt.Fprintf(w, "recovered run %s: attestation %s\n", x.RunID, x.Outcome.AttestationID)
		case errors.Is(x.Err, runner.ErrExecutorUnavailable):
			left++
			fmt.Fprintf(w, "run %s left as it is: %v\n", x.RunID, x.Err)
		case ctx.Err() != nil:
			left++
			fmt.Fprintf(w, "run %s left as it is (interrupted): its agent keeps running; evalmesh run --recover re-attaches\n", x.RunID)
		default:
			fmt.Fprintf(w, "recovered run %s: failed: %v\n", x.RunID, x.Err)
		}
	}
	return handled, left, err
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
	var recoverOnly bool
	cmd := &cobra.Command{
		Use:   "run --task BUNDLE_DIR --agent AGENT.yaml [--seed N] [--executor docker|process] | run --recover",
		Short: "Run one agent on one task, score it apart from the agent, and sign the attestation",
		Long: `Run one slot end to end: hold the GPUs the task needs, run the agent with public/ read-only,
an empty workspace and an output folder (no network unless the agent spec and the lab's
policy allow it; the task's memory, CPU, pids and wall-clock limits), destroy it, score its
submission apart from it (the built-in metric, or the task's evaluator, which alone sees
private/), and write a signed run attestation with the submission and logs, content-addressed,
into the node home. Prints the attestation ID and the score; on a terminal a status line
shows the phase, the elapsed time and GPU use.

After a crash: every run's phase is saved in HOME/runs/<run-id>/state.json. If evalmesh was
killed (SIGKILL, reboot, Ctrl-C) while a run was unfinished, the agent's container keeps
running and keeps its GPUs. The next evalmesh run on this home recovers such runs alongside
its own: it re-attaches to an agent that still runs and carries the run to its attestation
(the command then also waits for that agent), or marks the run failed and frees its GPUs if
its task is gone. A run is never attested twice. To recover without starting a new run:

  evalmesh run --home HOME --recover

A docker run is recovered only by a process that reaches the Docker engine; until then it is
left as it is and keeps its GPUs (evalmesh gpus shows which run holds each).

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
			if recoverOnly && (taskDir != "" || agentPath != "") {
				return fmt.Errorf("run --recover starts no new run: drop --task and --agent, or drop --recover")
			}
			if !recoverOnly && (taskDir == "" || agentPath == "") {
				return fmt.Errorf("run needs --task BUNDLE_DIR and --agent AGENT.yaml, or --recover (see evalmesh run --help)")
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			var spec *runner.AgentSpec
			if !recoverOnly {
				if spec, err = runner.LoadAgentSpec(agentPath); err != nil {
					return err
				}
			}
			r, err := nodeRunner(h, executor, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			status := newStatusLine(cmd.ErrOrStderr())
			r.Progress = status.update
			if recoverOnly {
				handled, left, err := recoverRuns(ctx, r, status)
				status.done()
				if err != nil {
					return err
				}
				if handled == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "no unfinished runs in %s\n", h.Dir)
				}
				if left > 0 {
					return fmt.Errorf("%d run(s) left unfinished (see above)", left)
				}
				return nil
			}
			if r.Executor == "docker" && spec.Image == "" && spec.ImageTar != "" {
				if d, ok := r.Executors["docker"].(*docker.Executor); ok {
					if spec.Image, err = d.LoadImage(ctx, spec.ImageTar); err != nil {
						return err
					}
				}
			}
			// Recovery runs alongside the new run, so a re-attached 24-hour agent does not
			// hold the new one back; this command returns when both are over.
			recovered := make(chan error, 1)
			go func() {
				_, _, err := recoverRuns(ctx, r, status)
				recovered <- err
			}()
			o, err := r.Run(ctx, runner.Request{TaskDir: taskDir, TaskCID: taskCID, Agent: spec, Seed: seed})
			status.done()
			if err != nil && ctx.Err() != nil {
				err = fmt.Errorf("interrupted: the agent task keeps running; evalmesh run --home %s --recover re-attaches to it: %w", h.Dir, err)
			}
			if err == nil {
				// The new run's result is printed at once, not after the recovered runs.
				err = printRunOutcome(cmd.OutOrStdout(), g.jsonOut, h, o)
			}
			var rerr error
			select {
			case rerr = <-recovered:
			default:
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "evalmesh:", err)
					err = &exitError{code: 1}
				}
				fmt.Fprintln(status, "waiting for the recovered run(s) to end (Ctrl-C leaves them running; evalmesh run --recover re-attaches later)")
				rerr = <-recovered
				status.done()
			}
			if rerr != nil && ctx.Err() == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "recovering earlier runs: %v\n", rerr)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&taskDir, "task", "", "task bundle folder (task.yaml, prompt.md, public/, private/)")
	cmd.Flags().StringVar(&agentPath, "agent", "", "agent spec file (YAML or JSON; docs/agent-spec.md)")
	cmd.Flags().IntVar(&seed, "seed", 0, "seed index of the slot (passed to the agent as EVALMESH_SEED)")
	cmd.Flags().StringVar(&executor, "executor", "", "docker or process (default: runner.executor in config.yaml)")
	cmd.Flags().StringVar(&taskCID, "task-cid", "", "the bundle's CID if known (default: computed from the folder)")
	cmd.Flags().BoolVar(&recoverOnly, "recover", false, "only recover the unfinished runs of an earlier, killed evalmesh (re-attach or fail them), then exit")
	return cmd
}

// printRunOutcome prints a finished run: its attestation ID and score (or JSON).
func printRunOutcome(w io.Writer, jsonOut bool, h home.Home, o *runner.Outcome) error {
	out := runOutput{RunID: o.RunID, AttestationID: o.AttestationID, Valid: o.Valid, Score: o.Score,
		Metric: o.Metric, InvalidReason: o.InvalidReason,
		Attestation: filepath.Join(h.AttestationsDir(), o.AttestationID+".json")}
	if jsonOut {
		return printJSON(w, out)
	}
	fmt.Fprintf(w, "attestation %s\n", o.AttestationID)
	if o.Valid {
		fmt.Fprintf(w, "score       %s = %g\n", o.Metric, *o.Score)
	} else {
		fmt.Fprintf(w, "score       invalid: %s\n", o.InvalidReason)
	}
	fmt.Fprintf(w, "run         %s\n", runner.RunDir(h, o.RunID))
	return nil
}

// statusLine redraws one line on a terminal: phase, elapsed time, GPU use. Off a terminal
// it prints nothing (logs stay clean). It is safe for concurrent use (the new run and the
// recovered ones report at once), and as an io.Writer it prints whole lines above the
// status line.
type statusLine struct {
	mu   sync.Mutex
	w    io.Writer
	tty  bool
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
	s.mu.Lock()
	defer s.mu.Unlock()
	gpu := "CPU only"
	if p.GPUUtil >= 0 {
		gpu = fmt.Sprintf("GPU %3.0f%%", p.GPUUtil)
	}
	el := p.Elapsed.Truncate(time.Second)
	fmt.Fprintf(s.w, "\r\033[K%s  %-10s  %8s  %s", p.RunID, p.Phase, el, gpu)
	s.drew = true
}

// Write prints b (whole lines) after clearing the status line.
func (s *statusLine) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drew {
		fmt.Fprint(s.w, "\r\033[K")
		s.drew = false
	}
	return s.w.Write(b)
}

func (s *statusLine) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drew {
		fmt.Fprint(s.w, "\r\033[K")
		s.drew = false
	}
}

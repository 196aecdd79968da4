package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/process"
	"github.com/evalmesh/evalmesh/runner/slurm"
	"github.com/evalmesh/evalmesh/tasks"
)

func init() { register(newRunCmd) }

// nodeRunner builds the runner of a home with the executors this machine can offer: the
// process executor always; docker when it is the one asked for (then an engine must answer),
// and also whenever an engine answers: a run of the home that used docker and is unfinished
// is then re-attached by `run --executor process` rather than left behind, and a re-score of
// a task scored by its evaluator image runs that image (runner.RescoreSubmission); slurm
// likewise (config.yaml's runner.slurm), whose runs then hold the partition's GPUs.
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
	} else if d, err := docker.New(docker.Options{}); err == nil {
		exs["docker"] = d
	}
	var sl *slurm.Executor
	if want == slurm.DriverName || unfinishedRuns(h, slurm.DriverName) {
		s, err := slurm.New(slurm.FromConfig(cfg.Runner.Slurm))
		if err != nil && want == slurm.DriverName {
			return nil, err
		}
		if err == nil {
			sl, exs[slurm.DriverName] = s, s
		}
	}
	r, err := runner.ForHome(h, exs, want, log)
	if err == nil && sl != nil && r.Executor == slurm.DriverName {
		r.GPUs = sl.GPUSource() // runs hold the partition's GPUs, not this machine's
	}
	return r, err
}

// unfinishedRuns reports whether a run of the home that is not final used the executor.
func unfinishedRuns(h home.Home, executor string) bool {
	runs, _ := runner.ListRuns(h)
	for _, st := range runs {
		if !st.Phase.Final() && st.Executor == executor {
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
	Attempt       int      `json:"attempt"`
	Valid         bool     `json:"valid"`
	Score         *float64 `json:"score"`
	Metric        string   `json:"metric"`
	InvalidReason string   `json:"invalid_reason,omitempty"`
	Attestation   string   `json:"attestation_path"`
	// AgentLogTail is the end of the agent's log, for an invalid run only.
	AgentLogTail string `json:"agent_log_tail,omitempty"`
	// Transcript is the node's record of the agent's traffic with its model (agents with a
	// model only).
	Transcript *runner.TranscriptRef `json:"transcript,omitempty"`
}

// runFlags are the run command's flags.
type runFlags struct {
	taskDir, agentPath, executor, taskCID, trust string
	seed                                         int
	recoverOnly, selfSigned                      bool
}

func newRunCmd(g *globals) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --task BUNDLE_DIR --agent AGENT.yaml [--seed N] [--executor docker|process|slurm]|process] | run --recover",
		Short: "Run one agent on one task, score it apart from the agent, and sign the attestation",
		Long: `Run one slot end to end: hold the GPUs the task needs, run the agent with public/ read-only,
an empty workspace and an output folder (no network unless the agent spec and the lab's
policy allow it; the task's memory, CPU, pids and wall-clock limits), destroy it, score its
submission apart from it (the built-in metric, or the task's evaluator, which alone sees
private/), and write a signed run attestation with the submission and logs, content-addressed,
into the node home. Prints the attestation ID and the score; on a terminal a status line
shows the phase, the elapsed time and GPU use. An invalid run also prints the end of the
agent's log.

An agent whose spec names a model reaches it through a recorder the node starts (with
evalmesh-model-proxy beside this binary; make build puts it there): the run then attests a
transcript of every call between agent and model, bodies by CID, with token counts, and this
command prints its CID, its path under HOME/objects and its totals (docs/agents.md
"Transcripts").

Before anything runs, the signing chain is checked: the node certificate
(HOME/node-cert.json) must be this node's, valid now and until the task's wall-clock limit
could end the run, and (with --trust) of a listed, unrevoked lab. A node without a
certificate is refused unless --self-signed is given: its attestations then count only where
a trust file lists the node key itself (evalmesh trust add --node-key).

Running a slot (task, agent, seed, campaign) again records a new attempt (the predicate's
"attempt": one more than this node's earlier runs of the slot), never a second attestation
of the same attempt.

The attestation records how contained the agent was ("executor": docker runs it in a
container; the process executor runs it as a host process, in a folder of its own with a
copy of public/, and as uid 65534 when evalmesh runs as root) and which evalmesh build
signed it ("build", see evalmesh version).

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

Example (no Docker, no GPU; the demo makes a home with a lab certificate and the example
tasks):
  evalmesh demo --home /tmp/lab --nodes 1 --seeds 1
  cat > solver.yaml <<'Y'
  name: solver
  version: "1.0.0"
  command: ["evalmesh", "agent", "solver"]
  Y
  evalmesh run --home /tmp/lab --task /tmp/lab/examples/tasks/arithmetic \
      --agent solver.yaml --seed 0 --executor process

Without a certificate (a home made by evalmesh init):
  evalmesh run --home /tmp/dev --task ... --agent solver.yaml --executor process --self-signed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCommand(cmd, g, f) },
	}
	cmd.Flags().StringVar(&f.taskDir, "task", "", "task bundle folder (task.yaml, prompt.md, public/, private/)")
	cmd.Flags().StringVar(&f.agentPath, "agent", "", "agent spec file (YAML or JSON; docs/agent-spec.md)")
	cmd.Flags().IntVar(&f.seed, "seed", 0, "seed index of the slot (passed to the agent as EVALMESH_SEED)")
	cmd.Flags().StringVar(&f.executor, "executor", "", "docker, process or slurm (default: runner.executor in config.yaml)")
	cmd.Flags().StringVar(&f.taskCID, "task-cid", "", "the bundle's CID if known (default: computed from the folder)")
	cmd.Flags().BoolVar(&f.recoverOnly, "recover", false, "only recover the unfinished runs of an earlier, killed evalmesh (re-attach or fail them), then exit")
	cmd.Flags().BoolVar(&f.selfSigned, "self-signed", false, "sign without a node certificate (counted only where a trust file lists this node's key)")
	cmd.Flags().StringVar(&f.trust, "trust", "", "trust file to check the node certificate against before the run (lab listed, not revoked)")
	return cmd
}

// runCommand is the run command's body, in its phases: check the flags, build the node's
// runner, then either recover only, or run the new slot alongside the recovery of earlier
// runs and report both.
func runCommand(cmd *cobra.Command, g *globals, f runFlags) error {
	if err := checkRunFlags(f); err != nil {
		return err
	}
	h, err := g.Home()
	if err != nil {
		return err
	}
	var spec *agentspec.Spec
	if !f.recoverOnly {
		if spec, err = agentspec.Load(f.agentPath); err != nil {
			return err
		}
	}
	r, err := commandRunner(h, f, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	status := newStatusLine(cmd.ErrOrStderr())
	r.Progress = status.update
	if f.recoverOnly {
		return recoverOnly(ctx, r, h, status, cmd.OutOrStdout())
	}
	if err := loadAgentImage(ctx, r, spec); err != nil {
		return err
	}
	return runAlongsideRecovery(ctx, cmd, g, r, h, status,
		runner.Request{TaskDir: f.taskDir, TaskCID: f.taskCID, Agent: spec, Seed: f.seed})
}

func checkRunFlags(f runFlags) error {
	if f.recoverOnly && (f.taskDir != "" || f.agentPath != "") {
		return fmt.Errorf("run --recover starts no new run: drop --task and --agent, or drop --recover")
	}
	if !f.recoverOnly && (f.taskDir == "" || f.agentPath == "") {
		return fmt.Errorf("run needs --task BUNDLE_DIR and --agent AGENT.yaml, or --recover (see evalmesh run --help)")
	}
	return nil
}

// commandRunner is the home's runner with the command's signing policy.
func commandRunner(h home.Home, f runFlags, log io.Writer) (*runner.Runner, error) {
	r, err := nodeRunner(h, f.executor, log)
	if err != nil {
		return nil, err
	}
	r.SelfSigned = f.selfSigned
	if f.trust != "" {
		if r.Trust, err = attest.LoadTrust(f.trust); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// recoverOnly is `run --recover`: recover the home's unfinished runs and say how it went.
func recoverOnly(ctx context.Context, r *runner.Runner, h home.Home, status *statusLine, out io.Writer) error {
	handled, left, err := recoverRuns(ctx, r, status)
	status.done()
	if err != nil {
		return err
	}
	if handled == 0 {
		fmt.Fprintf(out, "no unfinished runs in %s\n", h.Dir)
	}
	if left > 0 {
		return fmt.Errorf("%d run(s) left unfinished (see above)", left)
	}
	return nil
}

// loadAgentImage loads the spec's image tar into the engine when a docker run needs it.
func loadAgentImage(ctx context.Context, r *runner.Runner, spec *agentspec.Spec) error {
	if r.Executor != "docker" || spec.Image != "" || spec.ImageTar == "" {
		return nil
	}
	d, ok := r.Executors["docker"].(*docker.Executor)
	if !ok {
		return nil
	}
	var err error
	spec.Image, err = d.LoadImage(ctx, spec.ImageTar)
	return err
}

// runAlongsideRecovery runs the new slot while earlier runs are recovered, so a re-attached
// 24-hour agent does not hold the new one back. The new run's result is printed as soon as
// it is known; the command returns when both are over.
func runAlongsideRecovery(ctx context.Context, cmd *cobra.Command, g *globals, r *runner.Runner, h home.Home, status *statusLine, req runner.Request) error {
	recovered := make(chan error, 1)
	go func() {
		_, _, err := recoverRuns(ctx, r, status)
		recovered <- err
	}()
	o, err := r.Run(ctx, req)
	status.done()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted: the agent task keeps running; evalmesh run --home %s --recover re-attaches to it: %w", h.Dir, err)
	}
	if err == nil {
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
}

// agentLogTailLines is how much of the agent's log an invalid run prints.
const agentLogTailLines = 20

// printRunOutcome prints a finished run: its attestation ID and score (or JSON), and for an
// invalid run the end of the agent's log, where the reason usually is.
func printRunOutcome(w io.Writer, jsonOut bool, h home.Home, o *runner.Outcome) error {
	logPath := filepath.Join(runner.RunDir(h, o.RunID), "logs", "agent.log")
	out := runOutput{RunID: o.RunID, AttestationID: o.AttestationID, Attempt: max(o.Predicate.Attempt, 1), Valid: o.Valid, Score: o.Score,
		Metric: o.Metric, InvalidReason: o.InvalidReason,
		Attestation: filepath.Join(h.AttestationsDir(), o.AttestationID+".json"), Transcript: runner.TranscriptOf(h, o)}
	if !o.Valid {
		out.AgentLogTail = logTail(logPath, agentLogTailLines)
	}
	if jsonOut {
		return printJSON(w, out)
	}
	fmt.Fprintf(w, "attestation %s\n", o.AttestationID)
	if o.Valid {
		fmt.Fprintf(w, "score       %s = %g\n", o.Metric, *o.Score)
	} else {
		fmt.Fprintf(w, "score       invalid: %s\n", o.InvalidReason)
	}
	if out.Attempt > 1 {
		fmt.Fprintf(w, "attempt     %d (this node ran the slot before)\n", out.Attempt)
	}
	fmt.Fprintf(w, "run         %s\n", runner.RunDir(h, o.RunID))
	if t := out.Transcript; t != nil {
		fmt.Fprintf(w, "transcript  %s: %d model calls, %d prompt + %d completion tokens\n", t.CID, t.Calls, t.PromptTokens, t.CompletionTokens)
		fmt.Fprintf(w, "            %s (a daemon's dashboard shows it at /runs/%s)\n", t.Path, o.AttestationID)
	}
	if !o.Valid {
		if out.AgentLogTail == "" {
			fmt.Fprintf(w, "agent log   %s is empty\n", logPath)
		} else {
			fmt.Fprintf(w, "agent log   last lines of %s:\n", logPath)
			for _, line := range strings.Split(strings.TrimRight(out.AgentLogTail, "\n"), "\n") {
				fmt.Fprintf(w, "  | %s\n", line)
			}
		}
	}
	return nil
}

// logTail returns the last n lines of the file at path, reading at most its last 64 KiB
// (a log may be huge); "" when it is missing or empty.
func logTail(path string, n int) string {
	const maxTail = 64 << 10
	f, fi, err := tasks.OpenRegular(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	off := max(fi.Size()-maxTail, 0)
	buf := make([]byte, fi.Size()-off)
	m, _ := f.ReadAt(buf, off)
	if strings.TrimSpace(string(buf[:m])) == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf[:m]), "\n"), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // a partial first line
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
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

package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
)

// Options configure an Executor (config.yaml's runner.slurm, internal/home.SlurmConfig).
type Options struct {
	// Partition, Account and QoS are passed to sbatch; "" leaves Slurm's defaults.
	Partition, Account, QoS string
	// ContainerRuntime is the engine the compute node runs the container on: "docker" (""
	// too: the engine DOCKER_HOST names, or Docker's socket) or "podman" (podman's
	// Docker-compatible service: DOCKER_HOST where the job's environment sets it, else
	// /run/podman/podman.sock for root and $XDG_RUNTIME_DIR/podman/podman.sock for a user,
	// rootless).
	ContainerRuntime string
	// ExtraSbatch are further sbatch options the lab allows (--name or --name=value), e.g.
	// --constraint=h200 or --reservation=evals; options evalmesh sets itself are refused.
	ExtraSbatch []string
	// JobCommand is the argv the batch script execs on the compute node, followed by the
	// task's spec file; nil means this binary's "slurm-job" command (`evalmesh slurm-job`),
	// which must be at the same path on the compute nodes.
	JobCommand []string
	// User is the uid:gid the container runs as on the compute node; "" means
	// docker.DefaultUser.
	User string
	// StopGrace is how long the container gets between SIGTERM and SIGKILL when the job is
	// cancelled or reaches the wall clock; keep it under the cluster's KillWait (30 s by
	// default), after which Slurm kills the job command itself. 0 means 10 s.
	StopGrace time.Duration
	// PollInterval is how often Wait asks the controller about a job; 0 means 1 s.
	PollInterval time.Duration
	// SlurmConf, when set, is exported as SLURM_CONF to every Slurm command.
	SlurmConf string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Executor submits each task as a Slurm batch job. Safe for concurrent use.
type Executor struct {
	o   Options
	cli cli
}

var _ runner.Executor = (*Executor)(nil)

// New checks the options and that the controller answers (`scontrol ping`), so a node
// without Slurm learns it at startup rather than at its first run.
func New(o Options) (*Executor, error) {
	switch o.ContainerRuntime {
	case "", docker.EngineDocker, docker.EnginePodman:
	default:
		return nil, fmt.Errorf("slurm executor: container runtime %q is not supported: use docker or podman (runner.slurm.container_runtime)", o.ContainerRuntime)
	}
	if err := checkExtraOptions(o.ExtraSbatch); err != nil {
		return nil, err
	}
	if o.User == "" {
		o.User = docker.DefaultUser
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.JobCommand == nil {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("slurm executor: cannot find this binary for the job command: %w", err)
		}
		o.JobCommand = []string{self, "slurm-job"}
	}
	e := &Executor{o: o}
	if o.SlurmConf != "" {
		e.cli.env = []string{"SLURM_CONF=" + o.SlurmConf}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := e.cli.run(ctx, "scontrol", "ping")
	if err != nil {
		return nil, fmt.Errorf("slurm executor: the Slurm controller does not answer: %w (start slurmctld, set SLURM_CONF, or use --executor docker)", err)
	}
	if !strings.Contains(string(out), "UP") {
		return nil, fmt.Errorf("slurm executor: the Slurm controller is not up: %s", strings.TrimSpace(string(out)))
	}
	if o.Partition != "" {
		if _, err := e.cli.run(ctx, "scontrol", "show", "partition", "-o", o.Partition); err != nil {
			return nil, fmt.Errorf("slurm executor: partition %q: %w (runner.slurm.partition in config.yaml)", o.Partition, err)
		}
	}
	return e, nil
}

// Name implements runner.Executor.
func (e *Executor) Name() string { return DriverName }

// Partition is the partition jobs go to ("" for the cluster's default).
func (e *Executor) Partition() string { return e.o.Partition }

// JobDir is where a task's job files live: next to its log, inside the run folder, which a
// multi-node cluster must share with the compute nodes (package doc).
func JobDir(cfg runner.TaskConfig) string {
	return filepath.Join(filepath.Dir(cfg.LogPath), "slurm-"+strings.TrimPrefix(jobName(cfg.ID), "evalmesh-"))
}

// Start implements runner.Executor: it writes the job folder (the task's spec and the batch
// script) and submits the job. The handle's Started is the submission time; the wall clock
// counts from when the container starts on the compute node.
func (e *Executor) Start(ctx context.Context, cfg runner.TaskConfig) (*runner.Handle, error) {
	if cfg.Image == "" {
		return nil, fmt.Errorf("slurm executor: task %s has no image: the compute node runs agents in containers (agent spec image: sha256:…)", cfg.ID)
	}
	if cfg.LogPath == "" || !filepath.IsAbs(cfg.LogPath) {
		return nil, fmt.Errorf("slurm executor: task %s: log path %q must be absolute (the compute node writes it)", cfg.ID, cfg.LogPath)
	}
	dir := JobDir(cfg)
	if _, err := os.Stat(filepath.Join(dir, specFile)); err == nil {
		return nil, fmt.Errorf("slurm executor: task %s was submitted before (%s exists): Recover its saved handle, or Destroy it first", cfg.ID, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("slurm executor: task %s: %w", cfg.ID, err)
	}
	_ = os.Remove(filepath.Join(dir, recordFile)) // of a destroyed earlier task of this ID
	_ = os.Remove(filepath.Join(dir, stoppedFile))
	spec, _ := json.MarshalIndent(jobSpec{Config: cfg, User: e.o.User, StopGrace: e.o.StopGrace.Seconds(), Runtime: e.o.ContainerRuntime}, "", "  ")
	if err := home.WriteFileAtomic(filepath.Join(dir, specFile), spec, 0o644); err != nil {
		return nil, fmt.Errorf("slurm executor: task %s: %w", cfg.ID, err)
	}
	if err := home.WriteFileAtomic(filepath.Join(dir, scriptFile), []byte(jobScript(e.o.JobCommand, dir)), 0o755); err != nil {
		return nil, fmt.Errorf("slurm executor: task %s: %w", cfg.ID, err)
	}
	started := e.o.Now()
	out, err := e.cli.run(ctx, "sbatch", sbatchArgs(cfg, e.o, dir)...)
	if err != nil {
		_ = os.Remove(filepath.Join(dir, specFile))
		return nil, fmt.Errorf("slurm executor: task %s: submit: %w", cfg.ID, err)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";") // "ID;cluster" on a federation
	if !validJobID(id) {
		return nil, fmt.Errorf("slurm executor: task %s: sbatch printed %q, not a job ID", cfg.ID, out)
	}
	h := &runner.Handle{
		Driver:      DriverName,
		Config:      cfg,
		Started:     started,
		DriverState: encodeState(state{JobID: id, JobDir: dir, Partition: e.o.Partition, GPUs: len(cfg.GPUs)}),
	}
	if cfg.Limits.WallClock > 0 {
		h.Deadline = started.Add(cfg.Limits.WallClock)
	}
	return h, nil
}

// Stop implements runner.Executor: it marks the job as stopped by evalmesh and cancels it;
// Slurm sends the job command SIGTERM, which stops the container with the executor's grace
// (the grace argument cannot be passed through Slurm; KillWait bounds it). Stopping a job
// that already ended is not an error.
func (e *Executor) Stop(ctx context.Context, h *runner.Handle, _ time.Duration) error {
	s, err := decodeState(h)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(s.JobDir, specFile)); err != nil {
		return fmt.Errorf("task %s: job %s: job folder gone: %w", h.Config.ID, s.JobID, runner.ErrTaskLost)
	}
	if err := os.WriteFile(filepath.Join(s.JobDir, stoppedFile), []byte(e.o.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return fmt.Errorf("slurm executor: task %s: %w", h.Config.ID, err)
	}
	j, err := e.cli.lookup(ctx, s.JobID)
	if err != nil {
		return err
	}
	if j == nil {
		return fmt.Errorf("task %s: Slurm does not know job %s: %w", h.Config.ID, s.JobID, runner.ErrTaskLost)
	}
	if !j.active() {
		return nil
	}
	if _, err := e.cli.run(ctx, "scancel", s.JobID); err != nil {
		return fmt.Errorf("slurm executor: task %s: cancel job %s: %w", h.Config.ID, s.JobID, err)
	}
	return nil
}

// Destroy implements runner.Executor: it cancels the job if it is still queued or running
// and removes its spec and script, so the handle reads as lost from then on. The compute
// node's record stays in the run folder (it names the node for the attestation).
func (e *Executor) Destroy(ctx context.Context, h *runner.Handle) error {
	s, err := decodeState(h)
	if err != nil {
		if h != nil && h.Driver == DriverName && h.Config.LogPath != "" {
			// Died between writing the job folder and persisting the handle: no job ID.
			return removeJobFiles(JobDir(h.Config))
		}
		return err
	}
	if _, err := os.Stat(filepath.Join(s.JobDir, specFile)); err == nil {
		if j, err := e.cli.lookup(ctx, s.JobID); err == nil && j != nil && j.active() {
			_ = os.WriteFile(filepath.Join(s.JobDir, stoppedFile), nil, 0o644)
			if _, err := e.cli.run(ctx, "scancel", s.JobID); err != nil {
				return fmt.Errorf("slurm executor: task %s: cancel job %s: %w", h.Config.ID, s.JobID, err)
			}
		}
		if err := e.awaitInactive(ctx, h.Config.ID, s.JobID); err != nil {
			return err
		}
	}
	return removeJobFiles(s.JobDir)
}

// awaitInactive waits until Slurm reports the job ended (or forgets it). scancel only asks:
// the job stays COMPLETING until slurmd has killed every process of it (its cgroup or
// proctrack), and a run is not over, nor its GPUs free, before that.
func (e *Executor) awaitInactive(ctx context.Context, task, jobID string) error {
	ctx, cancel := context.WithTimeout(ctx, cancelTimeout)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		j, err := e.cli.lookup(ctx, jobID)
		if err == nil && (j == nil || !j.active()) {
			return nil
		}
		select {
		case <-ctx.Done():
			state := "unknown"
			if j != nil {
				state = j.State
			}
			return fmt.Errorf("slurm executor: task %s: job %s still %s after scancel: %w", task, jobID, state, ctx.Err())
		case <-t.C:
		}
	}
}

// cancelTimeout bounds the wait for a cancelled job to end: Slurm's KillWait (30 s by
// default) between SIGTERM and SIGKILL, plus slack for the epilog.
const cancelTimeout = 2 * time.Minute

func removeJobFiles(dir string) error {
	for _, f := range []string{specFile, scriptFile, stoppedFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("slurm executor: %w", err)
		}
	}
	return nil
}

// FromConfig is the options config.yaml's runner.slurm gives.
func FromConfig(c home.SlurmConfig) Options {
	return Options{Partition: c.Partition, Account: c.Account, QoS: c.QoS, ContainerRuntime: c.ContainerRuntime, ExtraSbatch: c.SbatchOptions}
}

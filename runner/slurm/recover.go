package slurm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/runner"
)

// lostStates are final states that are not the agent's doing: the run fails (no
// attestation) and the slot goes back to the network, as when the docker executor's
// container vanishes.
var lostStates = map[string]string{
	"NODE_FAIL":     "its node failed",
	"BOOT_FAIL":     "its node failed to boot",
	"PREEMPTED":     "it was preempted",
	"DEADLINE":      "it passed its Slurm deadline",
	"REVOKED":       "a sibling cluster took it",
	"LAUNCH_FAILED": "it failed to launch",
}

// taskView is one look at a task: the job as Slurm knows it (nil: forgotten) and the
// compute node's record (nil: none yet).
type taskView struct {
	job *job
	rec *record
}

// look reads the job folder and asks Slurm. A task whose spec is gone (destroyed) or that
// neither Slurm nor a record knows is lost.
func (e *Executor) look(ctx context.Context, h *runner.Handle) (state, taskView, error) {
	s, err := decodeState(h)
	if err != nil {
		return s, taskView{}, err
	}
	if _, err := os.Stat(filepath.Join(s.JobDir, specFile)); err != nil {
		return s, taskView{}, fmt.Errorf("task %s: job %s: its job folder %s is gone (destroyed): %w", h.Config.ID, s.JobID, s.JobDir, runner.ErrTaskLost)
	}
	var v taskView
	if v.job, err = e.cli.lookup(ctx, s.JobID); err != nil {
		return s, v, err
	}
	if v.rec, err = readRecord(s.JobDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s, v, err
	}
	if v.job == nil && v.rec == nil {
		return s, v, fmt.Errorf("task %s: Slurm does not know job %s and its node left no record: %w", h.Config.ID, s.JobID, runner.ErrTaskLost)
	}
	return s, v, nil
}

// ended reports whether the task is over: Slurm says so, or Slurm forgot the job and the
// compute node left its record.
func (v taskView) ended() bool {
	if v.job != nil {
		return !v.job.active()
	}
	return v.rec != nil
}

// Recover implements runner.Executor: a job still queued or running, or one that ended and
// left its record, is re-attached (nil); a job Slurm lost (node failure, preemption,
// cancelled outside evalmesh) or forgot without a record is ErrTaskLost. It changes nothing.
func (e *Executor) Recover(ctx context.Context, h *runner.Handle) error {
	s, v, err := e.look(ctx, h)
	if err != nil {
		return err
	}
	if v.ended() {
		_, err := e.result(h, s, v)
		return err
	}
	return nil
}

// controllerPatience is how long Wait keeps polling a controller that does not answer.
const controllerPatience = 10 * time.Minute

// Wait implements runner.Executor: it polls Slurm until the job ends, then reports how. The
// wall clock is enforced on the compute node (exact, from the container's start) with the
// job's time limit as the backstop, not here: a job may queue for longer than the task
// runs. A controller that does not answer is asked again for up to 10 minutes. If ctx
// ends first, Wait returns ctx.Err() and the job keeps going.
func (e *Executor) Wait(ctx context.Context, h *runner.Handle) (*runner.ExitResult, error) {
	t := time.NewTicker(e.o.PollInterval)
	defer t.Stop()
	var failingSince time.Time
	for {
		s, v, err := e.look(ctx, h)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var ce *cmdError
			if !errors.As(err, &ce) {
				return nil, err // lost, or a bad handle
			}
			// The controller does not answer (restarting, overloaded): the job goes on
			// without it, so keep asking for a while rather than fail the run.
			if failingSince.IsZero() {
				failingSince = e.o.Now()
			} else if e.o.Now().Sub(failingSince) > controllerPatience {
				return nil, fmt.Errorf("%w (for %v)", err, controllerPatience)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-t.C:
			}
			continue
		}
		failingSince = time.Time{}
		if v.ended() {
			return e.result(h, s, v)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// result maps a final job onto an ExitResult: the compute node's record says how the
// container ended; Slurm's state says what it did to the job (TIMEOUT → timed out,
// OUT_OF_MEMORY → OOM-killed, CANCELLED by Stop → the container's signal); states that are
// not the agent's doing are errors wrapping ErrTaskLost.
func (e *Executor) result(h *runner.Handle, s state, v taskView) (*runner.ExitResult, error) {
	var res runner.ExitResult
	if v.rec != nil {
		res = v.rec.Exit
	}
	st, node := "", ""
	if v.job != nil {
		st, node = v.job.State, v.job.Node
		if res.Finished.IsZero() && !v.job.End.IsZero() {
			res.Finished = v.job.End
		}
	}
	if res.Finished.IsZero() {
		res.Finished = e.o.Now()
	}
	_, stoppedErr := os.Stat(filepath.Join(s.JobDir, stoppedFile))
	stopped := stoppedErr == nil
	switch {
	case st == "TIMEOUT":
		res.TimedOut = true
		if v.rec == nil {
			res.ExitCode, res.Signal = -1, 9
		}
		return &res, nil
	case st == "OUT_OF_MEMORY":
		res.OOMKilled = true
		if v.rec == nil {
			res.ExitCode, res.Signal = -1, 9
		}
		return &res, nil
	case st == "CANCELLED" && !stopped:
		return nil, fmt.Errorf("task %s: Slurm job %s was cancelled outside evalmesh (scancel by an operator or the cluster%s): %w", h.Config.ID, s.JobID, onNode(node), runner.ErrTaskLost)
	case st == "CANCELLED":
		if v.rec == nil {
			// Cancelled by Stop before the container started, or its node never reported.
			res.ExitCode, res.Signal = 128+15, 15
		}
		return &res, nil
	case lostStates[st] != "":
		return nil, fmt.Errorf("task %s: Slurm job %s ended %s: %s%s: %w", h.Config.ID, s.JobID, st, lostStates[st], onNode(node), runner.ErrTaskLost)
	}
	if v.rec == nil {
		// COMPLETED or FAILED without a record: the job command failed before or after the
		// container (no engine on the node, a full disk, …); infrastructure, not the agent.
		return nil, fmt.Errorf("slurm executor: task %s: job %s ended %s (exit %d:%d)%s without the node's record; see %s", h.Config.ID, s.JobID, st, v.job.ExitCode, v.job.Signal, onNode(node), tail(filepath.Join(s.JobDir, outFile)))
	}
	return &res, nil
}

func onNode(node string) string {
	if node == "" {
		return ""
	}
	return " on node " + node
}

// tail names a job's output file and quotes its end.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return path
	}
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return fmt.Sprintf("%s: %q", path, strings.TrimSpace(string(b)))
}

// Inspect implements runner.Executor: Running while the job is queued or running; once it
// ended, its result and Slurm's accounting: GPU-seconds (allocated GPUs × elapsed) and
// energy (the compute node's NVML reading, else Slurm's ConsumedEnergy).
func (e *Executor) Inspect(ctx context.Context, h *runner.Handle) (*runner.TaskStatus, error) {
	s, v, err := e.look(ctx, h)
	if err != nil {
		return nil, err
	}
	if !v.ended() {
		return &runner.TaskStatus{Running: true}, nil
	}
	ts := &runner.TaskStatus{}
	res, err := e.result(h, s, v)
	if err != nil {
		res = &runner.ExitResult{ExitCode: -1, Err: err.Error(), Finished: e.o.Now()}
	}
	ts.Exit = res
	ts.GPUSeconds, ts.EnergyJoules = usage(s, v)
	return ts, nil
}

// usage is a final job's accounting: GPU-seconds are the GPUs Slurm allocated (its TRES,
// else what was asked) times the job's elapsed time; energy is the compute node's NVML
// reading, else Slurm's ConsumedEnergy.
func usage(s state, v taskView) (gpuSeconds, energyJoules float64) {
	if v.job != nil {
		gpus := v.job.GPUs
		if gpus == 0 {
			gpus = s.GPUs
		}
		gpuSeconds = float64(gpus) * v.job.Elapsed.Seconds()
		energyJoules = v.job.EnergyJ
	}
	if v.rec != nil && v.rec.EnergyJoules > 0 {
		energyJoules = v.rec.EnergyJoules
	}
	return gpuSeconds, energyJoules
}

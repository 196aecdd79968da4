package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	errdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/evalmesh/evalmesh/runner"
)

// Recover implements runner.Executor: the container named in the handle still exists (running
// or ended) → nil, and Wait works as before the restart; it is gone → ErrTaskLost. It changes
// nothing, so calling it twice is harmless.
func (e *Executor) Recover(ctx context.Context, h *runner.Handle) error {
	s, err := decodeState(h)
	if err != nil {
		return err
	}
	info, err := e.containerInspect(ctx, s.ContainerID)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("task %s: container %s: %w", h.Config.ID, s.Name, runner.ErrTaskLost)
		}
		return fmt.Errorf("docker executor: task %s: inspect: %w", h.Config.ID, err)
	}
	if info.Config != nil && info.Config.Labels[LabelTaskID] != h.Config.ID {
		return fmt.Errorf("task %s: container %s belongs to task %q: %w", h.Config.ID, s.ContainerID, info.Config.Labels[LabelTaskID], runner.ErrTaskLost)
	}
	return nil
}

// Wait implements runner.Executor. It copies the container's log into LogPath from its
// beginning (so the file is complete even if an earlier Wait was cut short by a restart),
// stops the container at the handle's deadline, and reports how it ended. Once the task has
// ended, Wait returns the same result every time until Destroy. If ctx ends first, Wait
// returns ctx.Err() and the task keeps running.
func (e *Executor) Wait(ctx context.Context, h *runner.Handle) (*runner.ExitResult, error) {
	s, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	info, err := e.inspect(ctx, h, s)
	if err != nil {
		return nil, err
	}

	logCtx, stopLogs := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLogs()
	logDone := make(chan error, 1)
	go func() { logDone <- e.copyLogs(logCtx, h, s) }()

	stoppedAtDeadline := false
	if info.State.Running {
		waitC, errC := e.cli.ContainerWait(ctx, s.ContainerID, container.WaitConditionNotRunning)
		var deadline <-chan time.Time
		if !h.Deadline.IsZero() {
			t := time.NewTimer(max(h.Deadline.Sub(e.now()), 0))
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-waitC:
		case err := <-errC:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errdefs.IsNotFound(err) {
				return nil, fmt.Errorf("task %s: %w", h.Config.ID, runner.ErrTaskLost)
			}
			return nil, fmt.Errorf("docker executor: task %s: wait: %w", h.Config.ID, err)
		case <-deadline:
			stoppedAtDeadline = true
			if err := e.Stop(ctx, h, e.grace); err != nil {
				return nil, err
			}
			select {
			case <-waitC:
			case <-errC:
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The log stream ends shortly after the container; do not hang on a wedged engine.
	select {
	case err := <-logDone:
		if err != nil {
			return nil, err
		}
	case <-time.After(30 * time.Second):
		stopLogs()
		<-logDone
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if info, err = e.inspect(ctx, h, s); err != nil {
		return nil, err
	}
	res := exitResult(info.State, h.Deadline)
	if stoppedAtDeadline {
		res.TimedOut = true
	}
	return res, nil
}

func (e *Executor) inspect(ctx context.Context, h *runner.Handle, s state) (container.InspectResponse, error) {
	info, err := e.containerInspect(ctx, s.ContainerID)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return info, fmt.Errorf("task %s: container %s: %w", h.Config.ID, s.Name, runner.ErrTaskLost)
		}
		return info, fmt.Errorf("docker executor: task %s: inspect: %w", h.Config.ID, err)
	}
	if info.State == nil {
		return info, fmt.Errorf("docker executor: task %s: engine reported no container state", h.Config.ID)
	}
	return info, nil
}

// copyLogs rewrites LogPath with the container's whole log (stdout and stderr interleaved as
// the engine stored them), following it until the container ends.
func (e *Executor) copyLogs(ctx context.Context, h *runner.Handle, s state) error {
	rc, err := e.cli.ContainerLogs(ctx, s.ContainerID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("docker executor: task %s: read logs: %w", h.Config.ID, err)
	}
	defer rc.Close()
	f, err := os.OpenFile(h.Config.LogPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("docker executor: task %s: log file: %w", h.Config.ID, err)
	}
	_, cerr := stdcopy.StdCopy(f, f, rc)
	serr := f.Sync()
	if err := f.Close(); err != nil && serr == nil {
		serr = err
	}
	if cerr != nil && ctx.Err() == nil {
		return fmt.Errorf("docker executor: task %s: copy logs: %w", h.Config.ID, cerr)
	}
	if serr != nil {
		return fmt.Errorf("docker executor: task %s: write log file: %w", h.Config.ID, serr)
	}
	return nil
}

// exitResult turns the engine's view of an ended container into an ExitResult. A container
// killed by a signal exits with 128+signal; it counts as timed out when it ended at or after
// the deadline, which also covers a node that stopped it at the deadline and then died
// before it could report.
func exitResult(st *container.State, deadline time.Time) *runner.ExitResult {
	res := &runner.ExitResult{ExitCode: st.ExitCode, OOMKilled: st.OOMKilled}
	if t, err := time.Parse(time.RFC3339Nano, st.FinishedAt); err == nil && !t.IsZero() && t.Year() > 1 {
		res.Finished = t
	}
	if st.ExitCode > 128 && st.ExitCode < 128+65 {
		res.Signal = st.ExitCode - 128
	}
	if st.Error != "" {
		res.Err = st.Error
	}
	if st.Status == "created" {
		// Created but never started (the node died between create and start): not a success.
		res.ExitCode, res.Err = -1, "container was created but never started"
	}
	if !deadline.IsZero() && !res.Finished.IsZero() && !res.Finished.Before(deadline) && st.ExitCode != 0 && !st.OOMKilled {
		res.TimedOut = true
	}
	return res
}

// Inspect implements runner.Executor.
func (e *Executor) Inspect(ctx context.Context, h *runner.Handle) (*runner.TaskStatus, error) {
	s, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	info, err := e.inspect(ctx, h, s)
	if err != nil {
		return nil, err
	}
	ts := &runner.TaskStatus{Running: info.State.Running}
	if !info.State.Running && info.State.Status != "created" {
		ts.Exit = exitResult(info.State, h.Deadline)
	}
	if info.State.Running {
		ts.PIDsLimitHits = pidsLimitHits(info.ID)
		if st, err := e.cli.ContainerStatsOneShot(ctx, s.ContainerID); err == nil {
			var v container.StatsResponse
			if decodeErr := jsonDecode(st.Body, &v); decodeErr == nil {
				ts.PeakMemoryBytes = int64(v.MemoryStats.MaxUsage)
				ts.CPUSeconds = float64(v.CPUStats.CPUUsage.TotalUsage) / 1e9
			}
			st.Body.Close()
		}
	}
	return ts, nil
}

// cgroupRoot is where this host mounts cgroups (a variable for tests).
var cgroupRoot = "/sys/fs/cgroup"

// pidsLimitHits reads the container's pids.events where the engine runs on this host, under
// the cgroup layouts docker uses (v1 or v2, cgroupfs or systemd driver); 0 when none is
// readable (a remote engine, a layout not listed). The cgroup goes with the container's
// exit, so the runner samples this while the agent runs.
func pidsLimitHits(id string) int64 {
	if id == "" {
		return 0
	}
	var n int64
	for _, d := range []string{
		filepath.Join(cgroupRoot, "pids", "docker", id),
		filepath.Join(cgroupRoot, "pids", "system.slice", "docker-"+id+".scope"),
		filepath.Join(cgroupRoot, "docker", id),
		filepath.Join(cgroupRoot, "system.slice", "docker-"+id+".scope"),
	} {
		n = max(n, runner.PIDsLimitHits(d))
	}
	return n
}

// containerInspect is the engine's inspect of container id, asked again when it lost the
// race with the container's exit: podman 4.3 (Debian 12's) fails an inspect whose container
// exits during the call with "read /proc/PID/cgroup: no such process" (ESRCH; podman
// treats it as the exit it is from 4.4, containers/podman#16504). Asked again, it reports
// the container exited. This project's CI hit it once (runner/slurm's
// TestPodmanConformance/LostAfterDestroy), failing a job whose container had ended normally.
func (e *Executor) containerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	return retryExitRace(ctx, func() (container.InspectResponse, error) { return e.cli.ContainerInspect(ctx, id) })
}

// exitRaceTries bounds the retries of an inspect that lost the race with the exit: the
// second try finds the container exited; more would hide an engine that keeps failing.
const exitRaceTries = 4

func retryExitRace[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for try := 1; ; try++ {
		v, err := f()
		if err == nil || try == exitRaceTries || !lostExitRace(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(time.Duration(try) * 50 * time.Millisecond):
		}
	}
}

// lostExitRace says whether err is podman's answer to an inspect that raced the
// container's exit.
func lostExitRace(err error) bool {
	return strings.Contains(err.Error(), "/cgroup: no such process")
}

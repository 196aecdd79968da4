package process

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
)

// ErrStatusUnknown is ExitResult.Err for a task that ended while no executor watched it and
// without its supervisor recording a status (e.g. the whole process group was SIGKILLed).
const ErrStatusUnknown = "exit status unknown after restart"

// Recover implements runner.Executor: the task's supervisor still runs (same PID and start
// time) or has recorded how the task ended → nil; otherwise ErrTaskLost. It changes nothing.
func (e *Executor) Recover(ctx context.Context, h *runner.Handle) error {
	s, err := decodeState(h)
	if err != nil {
		return err
	}
	if _, ok, _ := readStatus(s.StatusPath); ok {
		return nil
	}
	if alive(s) {
		return nil
	}
	e.mu.Lock()
	_, mine := e.children[s.PID]
	e.mu.Unlock()
	if mine {
		return nil
	}
	return fmt.Errorf("task %s: process %d: %w", h.Config.ID, s.PID, runner.ErrTaskLost)
}

func readStatus(path string) (*runner.ExitResult, bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	return parseStatus(b)
}

// Wait implements runner.Executor. The first Wait to see the task end records its result in
// the status file, so every later Wait (in this process or after a restart) returns the same.
func (e *Executor) Wait(ctx context.Context, h *runner.Handle) (*runner.ExitResult, error) {
	s, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(s.StatusPath); err == nil && len(b) > 0 && b[0] == '{' {
		res, ok, err := parseStatus(b)
		if err != nil {
			return nil, fmt.Errorf("process executor: task %s: %w", h.Config.ID, err)
		}
		if ok {
			return res, nil
		}
	}

	e.mu.Lock()
	c := e.children[s.PID]
	e.mu.Unlock()
	var done <-chan struct{}
	if c != nil {
		done = c.done
	} else {
		if err := e.Recover(ctx, h); err != nil {
			return nil, err
		}
		pollCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		done = e.pollExit(pollCtx, s)
		if e.attached != nil {
			e.attached()
		}
	}

	timedOut := false
	var deadline <-chan time.Time
	if !h.Deadline.IsZero() {
		t := time.NewTimer(max(h.Deadline.Sub(e.opts.Now()), 0))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-done:
	case <-deadline:
		timedOut = true
		if err := e.Stop(ctx, h, e.opts.StopGrace); err != nil {
			return nil, err
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	res, ok, _ := readStatus(s.StatusPath)
	if !ok {
		res = &runner.ExitResult{ExitCode: -1}
		switch {
		case c != nil && c.state != nil:
			ws, _ := c.state.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				res.Signal = int(ws.Signal())
				res.ExitCode = 128 + res.Signal
			} else {
				res.ExitCode = ws.ExitStatus()
			}
		case timedOut:
			res.Signal = int(syscall.SIGKILL) // the supervisor died with its group
			res.ExitCode = 128 + res.Signal
		default:
			res.Err = ErrStatusUnknown
		}
	}
	res.TimedOut = timedOut
	res.OOMKilled = res.OOMKilled || oomKilled(s.Cgroups)
	res.Finished = e.opts.Now().UTC()
	if err := recordStatus(s.StatusPath, res); err != nil {
		return nil, fmt.Errorf("process executor: task %s: record result: %w", h.Config.ID, err)
	}
	// Anything the agent left behind in its group dies with it.
	_ = syscall.Kill(-s.PID, syscall.SIGKILL)
	if err := collectOutput(sandboxLayout{Dir: s.Sandbox}, h.Config.OutputDir, h.Config.Limits.OutputBytes); err != nil {
		return nil, fmt.Errorf("process executor: task %s: %w", h.Config.ID, err)
	}
	return res, nil
}

// pollExit closes the returned channel once the (non-child) supervisor has gone.
func (e *Executor) pollExit(ctx context.Context, s state) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		t := time.NewTicker(e.opts.PollInterval)
		defer t.Stop()
		for alive(s) {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch
}

// recordStatus writes the status file atomically and durably (home.WriteAtomic: temp file,
// fsync, rename, folder fsync), so a crash right after never leaves a run whose result was
// reported but not kept.
func recordStatus(path string, res *runner.ExitResult) error {
	b, err := jsonMarshal(res)
	if err != nil {
		return err
	}
	return home.WriteAtomic(path, 0o600, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
}

// Inspect implements runner.Executor.
func (e *Executor) Inspect(ctx context.Context, h *runner.Handle) (*runner.TaskStatus, error) {
	s, err := decodeState(h)
	if err != nil {
		return nil, err
	}
	ts := &runner.TaskStatus{Running: alive(s), PeakMemoryBytes: peakMemory(s.Cgroups)}
	for _, d := range s.Cgroups {
		ts.PIDsLimitHits = max(ts.PIDsLimitHits, runner.PIDsLimitHits(d))
	}
	if !ts.Running {
		res, ok, _ := readStatus(s.StatusPath)
		if !ok {
			e.mu.Lock()
			_, mine := e.children[s.PID]
			e.mu.Unlock()
			if !mine {
				return nil, fmt.Errorf("task %s: %w", h.Config.ID, runner.ErrTaskLost)
			}
			res = &runner.ExitResult{ExitCode: -1, Err: "ended; call Wait for its result"}
		}
		ts.Exit = res
	}
	return ts, nil
}

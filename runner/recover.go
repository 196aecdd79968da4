package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evalmesh/evalmesh/tasks"
)

// ErrExecutorUnavailable means a run was left untouched by Recover because its executor is
// not among the Runner's: the run keeps its phase and its GPUs until a process with that
// executor recovers it.
var ErrExecutorUnavailable = errors.New("executor unavailable")

// Recovered is what Recover did with one unfinished run.
type Recovered struct {
	RunID   string
	Outcome *Outcome // set when the run ended with an attestation
	Err     error    // set when the run was marked failed (or could not be finished)
}

// Recover finishes or fails every run a previous process of this node left unfinished
// (Nomad's RecoverTask shape): a run whose attestation exists is only marked done (never
// signed again); a run whose agent task still exists is re-attached and carried on; a run
// whose agent task is gone, or that never recorded its task, is marked failed and its GPUs
// are released; a run whose executor this Runner lacks is left as it is (Err wraps
// ErrExecutorUnavailable). Runs are handled one after another; RecoverRun handles one.
func (r *Runner) Recover(ctx context.Context) ([]Recovered, error) {
	runs, err := ListRuns(r.Home)
	if err != nil {
		return nil, err
	}
	var out []Recovered
	for _, st := range runs {
		if st.Phase.Final() {
			continue
		}
		o, err := r.recoverRun(ctx, st)
		if errors.Is(err, errOwned) {
			continue // alive in another process: not ours to recover
		}
		out = append(out, Recovered{RunID: st.ID, Outcome: o, Err: err})
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// RecoverRun recovers the one run with this ID (see Recover).
func (r *Runner) RecoverRun(ctx context.Context, runID string) (*Outcome, error) {
	st, err := LoadState(r.Home, runID)
	if err != nil {
		return nil, err
	}
	if st.Phase == PhaseFailed {
		return nil, fmt.Errorf("run %s failed: %s", st.ID, st.Error)
	}
	return r.recoverRun(ctx, st)
}

func (r *Runner) recoverRun(ctx context.Context, st *RunState) (*Outcome, error) {
	release, err := ownRun(r.Home, st.ID)
	if err != nil {
		return nil, err
	}
	defer release()
	// Re-read under the lock: the previous owner may have finished meanwhile.
	if fresh, err := LoadState(r.Home, st.ID); err == nil {
		st = fresh
	}
	if st.Phase == PhaseFailed {
		return nil, fmt.Errorf("run %s failed: %s", st.ID, st.Error)
	}
	if st.Audit {
		return nil, r.abandonAudit(ctx, st)
	}
	dir := RunDir(r.Home, st.ID)
	// An attestation on disk is final, whatever state.json says.
	if _, err := os.Stat(filepath.Join(dir, attestationFile)); err == nil {
		st.Phase = PhaseSigning
		return r.sign(st)
	}
	if _, err := os.Stat(filepath.Join(dir, statementFile)); err == nil {
		st.Phase = PhaseSigning
		return r.sign(st)
	}
	ex, err := r.executor(st.Executor)
	if err != nil {
		// Not this process's to judge: the run's task may well be alive under an executor
		// this process did not open (a docker run recovered by `run --executor process`).
		// Failing it would free GPUs its container still uses; leave it as it is.
		return nil, fmt.Errorf("%w: run %s needs the %s executor: %v (recover it with evalmesh run --recover --executor %s)",
			ErrExecutorUnavailable, st.ID, st.Executor, err, st.Executor)
	}
	switch st.Phase {
	case PhaseStarting:
		// The agent may have been started but its handle was never saved: remove any
		// leftover by its task ID, and fail the run rather than guess.
		if st.AgentHandle == nil {
			cfg, cerr := r.placeholderConfig(st)
			if cerr == nil {
				h := &Handle{Driver: ex.Name(), Config: cfg}
				_ = ex.Stop(ctx, h, 0)
				_ = ex.Destroy(ctx, h)
			}
		}
		r.removeModelLeftover(ctx, ex, st)
		return nil, r.fail(st, errors.New("node restarted before the agent task was recorded"))
	case PhaseAwaitingKey:
		st.Phase = PhaseEvaluating // try the key again (sealed.go)
	case PhaseAgent:
		if err := ex.Recover(ctx, st.AgentHandle); err != nil {
			_ = ex.Destroy(ctx, st.AgentHandle)
			r.removeModelLeftover(ctx, ex, st)
			return nil, r.fail(st, fmt.Errorf("agent task lost after a node restart: %w", err))
		}
		// An agent without its model cannot do its work: both go, and the run fails.
		if st.ModelHandle != nil && !st.ModelEnded {
			if err := ex.Recover(ctx, st.ModelHandle); err != nil {
				_ = ex.Stop(ctx, st.AgentHandle, 0)
				_ = ex.Destroy(ctx, st.AgentHandle)
				r.removeModelLeftover(ctx, ex, st)
				return nil, r.fail(st, fmt.Errorf("model task lost after a node restart: %w", err))
			}
		}
		// The recorder and bridge re-attach too. One lost cuts the agent off its model; the
		// transcript lists what the recorder's folder holds.
		for _, sc := range []struct {
			h     *Handle
			ended *bool
		}{{st.BridgeHandle, &st.BridgeEnded}, {st.ProxyHandle, &st.ProxyEnded}} {
			if sc.h != nil && !*sc.ended {
				if err := ex.Recover(ctx, sc.h); err != nil {
					_ = ex.Destroy(ctx, sc.h)
					*sc.ended = true
				}
			}
		}
	}
	b, err := tasks.Open(st.TaskDir)
	if err != nil {
		if st.AgentHandle != nil && st.Phase == PhaseAgent {
			_ = ex.Stop(ctx, st.AgentHandle, 0)
			_ = ex.Destroy(ctx, st.AgentHandle)
		}
		r.removeModelLeftover(ctx, ex, st)
		return nil, r.fail(st, fmt.Errorf("recover: bundle: %w", err))
	}
	return r.drive(ctx, st, b, nil)
}

func (r *Runner) placeholderConfig(st *RunState) (TaskConfig, error) {
	dir := RunDir(r.Home, st.ID)
	return TaskConfig{ID: st.ID + "-agent", LogPath: filepath.Join(dir, "logs", "agent.log")}, nil
}

// removeModelLeftover stops and removes a run's model task, by its saved handle or, when the
// node died before saving one, by its task ID.
func (r *Runner) removeModelLeftover(ctx context.Context, ex Executor, st *RunState) {
	for _, sc := range []struct {
		h     *Handle
		ended *bool
	}{{st.BridgeHandle, &st.BridgeEnded}, {st.ProxyHandle, &st.ProxyEnded}} {
		if sc.h != nil && !*sc.ended {
			StopModel(ctx, ex, sc.h)
			*sc.ended = true
		}
	}
	if st.Agent.Model == nil || st.ModelEnded {
		return
	}
	h := st.ModelHandle
	if h == nil {
		h = &Handle{Driver: ex.Name(), Config: TaskConfig{ID: st.ID + "-model", LogPath: filepath.Join(RunDir(r.Home, st.ID), "logs", "model.log")}}
	}
	StopModel(ctx, ex, h)
	st.ModelEnded = true
}

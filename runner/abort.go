package runner

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrAborted is the cause a caller gives when it cancels a run's context to abort the run
// (context.WithCancelCause): the slot finished elsewhere, or its lease went to another
// node. Unlike a plain cancellation (the node is shutting down, and a restarted node
// re-attaches to the run's tasks), an aborted run's agent, model and evaluator tasks are
// killed and removed before Run returns, and the run is marked failed so Recover leaves it.
var ErrAborted = errors.New("run aborted")

// abortTimeout bounds how long an abort waits for an executor to confirm its tasks gone
// (a container engine or Slurm controller that does not answer).
const abortTimeout = 2 * time.Minute

// aborted reports whether ctx was cancelled to abort the run (ErrAborted), not to stop
// the node.
func aborted(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrAborted)
}

// abort kills and removes every task of an aborted run (agent, model, evaluator) and waits
// until each executor reports it gone, then marks the run failed. No grace period: the
// run's result no longer counts, so there is nothing for the agent to save, and an agent
// that ignores SIGTERM must not keep its GPUs a moment longer. The returned error is
// ErrAborted (wrapped with any task the executor could not confirm gone).
func (r *Runner) abort(ctx context.Context, ex Executor, st *RunState) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	var errs []error
	tasks := []*Handle{st.EvalHandle}
	if st.Phase == PhaseAgent {
		tasks = append(tasks, st.AgentHandle) // later phases destroyed it already
	}
	for _, h := range tasks {
		if h == nil {
			continue
		}
		// Stop kills the task; Destroy waits until nothing of it is left (the process
		// executor: its session and cgroups empty; docker: the container removed; slurm:
		// the job no longer active).
		if err := ex.Stop(actx, h, 0); err != nil && !errors.Is(err, ErrTaskLost) {
			errs = append(errs, fmt.Errorf("stop task %s: %w", h.Config.ID, err))
		}
		if err := ex.Destroy(actx, h); err != nil {
			errs = append(errs, fmt.Errorf("remove task %s: %w", h.Config.ID, err))
		}
	}
	st.EvalHandle = nil
	r.endModel(actx, ex, st)
	if st.ModelHandle != nil && !st.ModelEnded {
		errs = append(errs, fmt.Errorf("model task %s not removed", st.ModelHandle.Config.ID))
	}
	err := ErrAborted
	if len(errs) > 0 {
		err = fmt.Errorf("%w: %w", ErrAborted, errors.Join(errs...))
	}
	return r.fail(st, err)
}

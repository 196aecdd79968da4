package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evalmesh/evalmesh/attest"
)

// Audits (Request.Audit) re-execute another lab's run with the ordinary run path (same
// agent, bundle, seed and executor) and stop where a run would be signed: the auditor
// signs an audit (attest.NewAudit), not a run, so the re-execution never competes with
// the audited run for its ledger cell.

// auditOutcome finishes an audit's re-execution: the statement it would have signed, left
// unsigned; the run is done.
func (r *Runner) auditOutcome(st *RunState) (*Outcome, error) {
	stmt, err := os.ReadFile(filepath.Join(RunDir(r.Home, st.ID), statementFile))
	if err != nil {
		return nil, r.fail(st, fmt.Errorf("audit: no statement: %w", err))
	}
	parsed, err := attest.ParseStatement(stmt)
	if err != nil {
		return nil, r.fail(st, fmt.Errorf("audit: statement: %w", err))
	}
	var p attest.RunPredicate
	if err := jsonUnmarshal(parsed.Predicate, &p); err != nil {
		return nil, r.fail(st, fmt.Errorf("audit: predicate: %w", err))
	}
	st.Phase = PhaseDone
	if err := saveState(r.Home, st, r.now()); err != nil {
		return nil, err
	}
	r.progress(st, -1)
	return &Outcome{RunID: st.ID, Valid: p.Valid, Score: p.Score, Metric: p.Metric, InvalidReason: p.InvalidReason, Predicate: p, Statement: stmt}, nil
}

// abandonAudit ends an audit a previous process left unfinished: its tasks are removed and
// it fails (the coordinator draws again; nothing was signed).
func (r *Runner) abandonAudit(ctx context.Context, st *RunState) error {
	if ex, err := r.executor(st.Executor); err == nil {
		for _, h := range []*Handle{st.AgentHandle, st.EvalHandle} {
			if h != nil {
				_ = ex.Stop(ctx, h, 0)
				_ = ex.Destroy(ctx, h)
			}
		}
		r.removeModelLeftover(ctx, ex, st)
	}
	return r.fail(st, errors.New("an audit's re-execution is not resumed after a restart"))
}

package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/tasks"
)

// Rescored is a signed re-score of another run's submission.
type Rescored struct {
	AttestationID string
	Envelope      []byte
	Predicate     attest.RescorePredicate
}

// Rescore scores submission (the bytes of the run's submission subject, already checked
// against its sha256 by the caller) against the local bundle in taskDir, independently of
// the run's own evaluation, and signs a re-score attestation of runID under the node's key
// and certificate. Rescore scores with the task's built-in metric only; a task scored by
// its evaluator program is re-scored by RescoreEvaluator (RescoreSubmission picks).
func (r *Runner) Rescore(runID string, run *attest.RunPredicate, submission []byte, submissionName, submissionCID, taskDir string) (*Rescored, error) {
	if r.Key == nil {
		return nil, errors.New("rescore: no signing key (load the node identity first)")
	}
	b, err := tasks.Open(taskDir)
	if err != nil {
		return nil, err
	}
	m := b.Meta
	if m.Evaluator.Image != "" || len(m.Evaluator.Command) > 0 {
		return nil, fmt.Errorf("rescore %s: task %s is scored by its evaluator program, which runs in a container: use RescoreSubmission or RescoreEvaluator", runID, m.Name)
	}
	_, metric, _ := scorerOf(m)
	var ev *evalResult
	if b.Sealed && run == nil {
		return nil, fmt.Errorf("rescore %s: a sealed bundle's key is looked up by the run's task CID; pass the run predicate", runID)
	}
	if b.Sealed {
		// The same decryption as a run's evaluation: labels in memory only.
		labels, lerr := r.sealedLabels(b, run.Slot.Task)
		if lerr != nil {
			return nil, fmt.Errorf("rescore %s: %w", runID, lerr)
		}
		ev, err = scoreLabels(m, metric, "builtin:"+metric, submission, labels)
	} else {
		ev, err = scoreBuiltin(b, metric, "builtin:"+metric, submission)
	}
	if err != nil {
		return nil, err
	}
	if submissionName == "" {
		submissionName = filepath.Base(m.Submission.File)
	}
	return r.signRescore(runID, run, m.Metric.Name, ev, subject(submissionName, submission, submissionCID, attest.RoleSubmission))
}

// RescoreMissing re-scores a run that attested no submission: invalid, as the run says if
// it is honest. The statement's subject is the run attestation itself.
func (r *Runner) RescoreMissing(runID string, run *attest.RunPredicate, runEnvelope []byte, taskDir string) (*Rescored, error) {
	if r.Key == nil {
		return nil, errors.New("rescore: no signing key (load the node identity first)")
	}
	b, err := tasks.Open(taskDir)
	if err != nil {
		return nil, err
	}
	m := b.Meta
	_, _, evaluator := scorerOf(m)
	ev := invalidResult(evaluator, "the run attested no submission", nil)
	return r.signRescore(runID, run, m.Metric.Name, ev, subject("run.json", runEnvelope, runID, "run"))
}

// RescoreEvaluator re-scores another lab's submission (the bytes of its submission subject,
// checked by the caller) of a task scored by its evaluator program: the task's pinned image
// and command run in a container of ex (the docker executor) on this node, against this
// node's own copy of the bundle in taskDir — private/ and labels included, decrypted into
// the re-score's folder for a sealed bundle — through scoreInTask, the run's own path. The
// signed re-score records the same evaluator identity as the run attestation.
func (r *Runner) RescoreEvaluator(ctx context.Context, ex Executor, runID string, run *attest.RunPredicate, submission []byte, submissionName, submissionCID, taskDir string) (*Rescored, error) {
	if r.Key == nil {
		return nil, errors.New("rescore: no signing key (load the node identity first)")
	}
	if !inContainer(ex) {
		return nil, fmt.Errorf("rescore %s: executor %s runs no container; an evaluator image is re-scored with the docker executor", runID, ex.Name())
	}
	b, err := tasks.Open(taskDir)
	if err != nil {
		return nil, err
	}
	m := b.Meta
	builtin, _, evaluator := scorerOf(m)
	if builtin || m.IsHeureka() {
		return nil, fmt.Errorf("rescore %s: task %s has no evaluator program to run; use RescoreSubmission", runID, m.Name)
	}
	if b.Sealed && run == nil {
		return nil, fmt.Errorf("rescore %s: a sealed bundle's key is looked up by the run's task CID; pass the run predicate", runID)
	}
	base := r.Home.RescoresDir()
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "eval-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if b.Sealed {
		ub, clean, err := r.unsealForEvaluator(b, run.Slot.Task, dir)
		if err != nil {
			return nil, fmt.Errorf("rescore %s: %w", runID, err)
		}
		defer clean()
		b = ub
	}
	ev, err := r.scoreInTask(ctx, ex, evalTask{dir: dir, id: "rescore-" + filepath.Base(dir), bundle: b,
		evaluator: evaluator, submission: submission})
	if err != nil {
		return nil, fmt.Errorf("rescore %s: %w", runID, err)
	}
	if submissionName == "" {
		submissionName = filepath.Base(m.Submission.File)
	}
	return r.signRescore(runID, run, m.Metric.Name, ev, subject(submissionName, submission, submissionCID, attest.RoleSubmission))
}

// rescoreContainer is the executor a re-score runs an evaluator image with: the node's
// docker executor, whatever executor its runs use — the image is what the run attested.
func (r *Runner) rescoreContainer(runID string, m *tasks.Meta) (Executor, error) {
	if ex, ok := r.Executors["docker"]; ok && ex != nil {
		return ex, nil
	}
	return nil, fmt.Errorf("rescore %s: task %s is scored by its evaluator image %s, which a re-score runs in a Docker container on this node, and this node has no Docker engine (executors: %s): start dockerd (or set DOCKER_HOST) and restart the daemon, or leave this task's re-scores to a lab that has one",
		runID, m.Name, m.Evaluator.Image, strings.Join(sortedKeys(r.Executors), ", "))
}

// signRescore signs this node's re-score of runID (run: its predicate) with its re-scorer
// draw for the run (attest.RescoreDraw, by Drawer): where the network draws re-scorers, a
// re-score votes only with a draw that drew its lab. The run's lab in the draw is the one its
// predicate names, as the ledger reads it.
func (r *Runner) signRescore(runID string, run *attest.RunPredicate, metric string, ev *evalResult, sub attest.Subject) (*Rescored, error) {
	node, err := peer.IDFromPrivateKey(r.Key)
	if err != nil {
		return nil, err
	}
	pred := attest.RescorePredicate{
		Run: runID, Score: ev.score, Valid: ev.valid, Metric: metric, Evaluator: ev.evaluator,
		Node: node.String(), Lab: r.Lab, Time: r.now().Truncate(time.Second),
	}
	if run != nil {
		// A key that cannot draw (not ed25519) signs without one: its re-score still
		// counts where re-scorers are not drawn.
		if d, _, err := attest.RescoreDraw(r.Drawer(), run); err == nil {
			pred.Draw = d
		}
	}
	stmt, err := attest.NewStatement([]attest.Subject{sub}, attest.PredicateRescoreV1, pred)
	if err != nil {
		return nil, fmt.Errorf("rescore %s: build statement: %w", runID, err)
	}
	env, id, err := attest.Sign(r.Key, r.CurrentCert(), stmt)
	if err != nil {
		return nil, fmt.Errorf("rescore %s: sign: %w", runID, err)
	}
	return &Rescored{AttestationID: id, Envelope: env, Predicate: pred}, nil
}

package runner

import (
	"errors"
	"fmt"
	"path/filepath"
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
// and certificate. Only tasks with a built-in metric can be re-scored here: an evaluator
// image would run the other lab's submission through the same sandbox as a run, which the
// daemon does not do yet.
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
		return nil, fmt.Errorf("rescore %s: task %s has an evaluator program; only built-in metrics are re-scored", runID, m.Name)
	}
	metric := m.Evaluator.Metric
	if metric == "" {
		metric = m.Metric.Name
	}
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
	return r.signRescore(runID, m.Metric.Name, ev, subject(submissionName, submission, submissionCID, attest.RoleSubmission))
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
	metric := m.Evaluator.Metric
	if metric == "" {
		metric = m.Metric.Name
	}
	ev := invalidResult("builtin:"+metric, "the run attested no submission", nil)
	return r.signRescore(runID, m.Metric.Name, ev, subject("run.json", runEnvelope, runID, "run"))
}

func (r *Runner) signRescore(runID, metric string, ev *evalResult, sub attest.Subject) (*Rescored, error) {
	node, err := peer.IDFromPrivateKey(r.Key)
	if err != nil {
		return nil, err
	}
	pred := attest.RescorePredicate{
		Run: runID, Score: ev.score, Valid: ev.valid, Metric: metric, Evaluator: ev.evaluator,
		Node: node.String(), Lab: r.Lab, Time: r.now().Truncate(time.Second),
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

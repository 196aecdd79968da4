package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// Evaluator task paths and variables: the evaluator (and only it) sees private/ and a copy
// of the submission; it runs with --submission-file PATH appended to its command and must
// print EvaluationMarker and a JSON object (the AIRS-Bench evaluate.py contract).
const (
	EvaluatorPrivateDir    = "/private"
	EvaluatorSubmissionDir = "/submission"
	EnvPrivate             = "EVALMESH_PRIVATE"
	EnvSubmission          = "EVALMESH_SUBMISSION"
)

// MaxSubmissionBytes bounds the submission file the runner reads.
const MaxSubmissionBytes = 1 << 30

// EvaluatorWallClock bounds an evaluator task.
var EvaluatorWallClock = time.Hour

type evalResult struct {
	valid      bool
	score      *float64
	reason     string
	evaluator  string
	submission []byte
	// HeurekaBench runs (heureka.go): the judge and per-question outcome, and the verdict file.
	heureka  *attest.HeurekaRunInfo
	verdicts []byte
	// scoreAbsent: a runner without labels attests the submission and no score
	// (Runner.Unscored): its task's scoring labs score it.
	scoreAbsent bool
}

func invalidResult(evaluator, reason string, sub []byte) *evalResult {
	return &evalResult{evaluator: evaluator, reason: reason, submission: sub}
}

// readSubmission reads the agent's submission file from its output folder without following
// anything out of it (OpenOutputFile: no symlink, FIFO, special or hard-linked file, nothing
// over MaxSubmissionBytes). What the executor refused when it collected the output, or an
// output that hit the task's limit, makes it invalid with the reason recorded then.
func readSubmission(outDir, name string) ([]byte, string) {
	if name == "" || strings.Contains(name, "/") || name == ".." || name == "." {
		return nil, fmt.Sprintf("task names no usable submission file (%q)", name)
	}
	rep := ReadOutputReport(outDir)
	if rep != nil && rep.Truncated {
		return nil, fmt.Sprintf("the agent's output reached the task's output limit of %d bytes and was cut off, so %s is not trusted to be whole", rep.LimitBytes, name)
	}
	if why := rep.refusedFor(name); why != "" {
		return nil, why
	}
	f, fi, why := OpenOutputFile(outDir, name, MaxSubmissionBytes)
	if why != "" {
		return nil, why
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, fi.Size()+1))
	if err != nil {
		return nil, fmt.Sprintf("submission %s: %v", name, err)
	}
	if int64(len(data)) != fi.Size() {
		return nil, fmt.Sprintf("submission %s changed while it was read (%d bytes, then %d)", name, fi.Size(), len(data))
	}
	return data, ""
}

// scorerOf says how task m is scored — with its built-in metric (evaluator.metric, or no
// evaluator program) or by its evaluator program — and the evaluator identity its run and
// re-score attestations record: "builtin:METRIC", or the pinned image and command.
func scorerOf(m *tasks.Meta) (builtin bool, metric, evaluator string) {
	builtin = m.Evaluator.Image == "" && len(m.Evaluator.Command) == 0
	metric = m.Evaluator.Metric
	if metric == "" {
		metric = m.Metric.Name
	}
	evaluator = "builtin:" + metric
	if !builtin {
		evaluator = strings.TrimSpace(m.Evaluator.Image + " " + strings.Join(m.Evaluator.Command, " "))
	}
	return builtin, metric, evaluator
}

// evaluate scores the agent's submission: with the built-in metric when the task names one
// (evaluator.metric, or no evaluator image), else in an evaluator task of its own.
func (r *Runner) evaluate(ctx context.Context, ex Executor, st *RunState, b *tasks.Bundle) (*evalResult, error) {
	m := b.Meta
	if m.IsHeureka() {
		return r.evaluateHeureka(ctx, ex, st, b)
	}
	dir := RunDir(r.Home, st.ID)
	builtin, metric, evaluator := scorerOf(m)
	sub, why := readSubmission(filepath.Join(dir, "output"), m.Submission.File)
	if b.Sealed && r.Unscored != nil && r.Unscored(st.TaskCID) {
		// A runner without labels: the submission (or its absence) is what it attests; the
		// task's scoring labs re-score it against the labels this lab was never granted.
		ev := &evalResult{scoreAbsent: true, evaluator: evaluator, submission: sub}
		if sub == nil {
			ev.reason = why
		}
		return ev, nil
	}
	if sub == nil {
		if reason := exitReason(st.AgentExit); reason != "" {
			why += " (agent " + reason + ")"
		}
		return invalidResult(evaluator, why, nil), nil
	}
	if b.Sealed {
		return r.evaluateSealed(ctx, ex, st, b, builtin, metric, evaluator, sub)
	}
	if builtin {
		return scoreBuiltin(b, metric, evaluator, sub)
	}
	return r.evaluateInTask(ctx, ex, st, b, evaluator, sub)
}

// evaluateInTask runs the task's evaluator apart from the agent: a fresh folder holding only
// a copy of the submission, private/ read-only, no network, none of the agent's variables.
func (r *Runner) evaluateInTask(ctx context.Context, ex Executor, st *RunState, b *tasks.Bundle, evaluator string, sub []byte) (*evalResult, error) {
	return r.scoreInTask(ctx, ex, evalTask{
		dir: RunDir(r.Home, st.ID), id: fmt.Sprintf("%s-eval%d", st.ID, st.EvalAttempt), bundle: b, evaluator: evaluator, submission: sub,
		started: func(h *Handle) error {
			st.EvalHandle = h
			return saveState(r.Home, st, r.now())
		},
		ended: func() { st.EvalHandle = nil },
	})
}

// scoreInTask runs t's evaluator program on t.submission and reads the score it prints: the
// one path a run's evaluation and a re-score of another lab's submission (RescoreEvaluator)
// share, so both see the same folders, variables, limits and output contract.
func (r *Runner) scoreInTask(ctx context.Context, ex Executor, t evalTask) (*evalResult, error) {
	exit, out, _, err := r.runEvaluatorTask(ctx, ex, t)
	if err != nil {
		return nil, err
	}
	if !exit.Successful() {
		return invalidResult(t.evaluator, "evaluator "+exitReason(exit), t.submission), nil
	}
	res, err := ParseEvaluatorOutput(out, t.bundle.Meta.Metric.Name)
	if err != nil {
		return invalidResult(t.evaluator, err.Error(), t.submission), nil
	}
	score := res.Score
	return &evalResult{valid: true, score: &score, evaluator: t.evaluator, submission: t.submission}, nil
}

// evalTask is one evaluator (or judge) task: the folder its eval/ is made in (a run's or a
// re-score's), its executor task ID, and what it is handed besides the submission.
type evalTask struct {
	dir, id    string
	bundle     *tasks.Bundle
	evaluator  string
	submission []byte
	// files are written read-only beside the submission (the judge prompt); env gets the
	// task's view of the submission folder and of its workspace and returns extra variables.
	files map[string][]byte
	env   func(subDir, workspace string) map[string]string
	// started is called once the task runs (a run saves its handle); ended once it is gone.
	started func(*Handle) error
	ended   func()
}

// runEvaluatorTask runs t with private/ read-only, no network and a fresh workspace, and
// returns how it ended, its output (bounded) and the host path of its workspace.
func (r *Runner) runEvaluatorTask(ctx context.Context, ex Executor, t evalTask) (*ExitResult, []byte, string, error) {
	m := t.bundle.Meta
	subDir := filepath.Join(t.dir, "eval", "submission")
	work := filepath.Join(t.dir, "eval", "workspace")
	for _, d := range []string{subDir, work} {
		if err := os.RemoveAll(d); err != nil {
			return nil, nil, "", err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, "", err
		}
	}
	if err := os.WriteFile(filepath.Join(subDir, m.Submission.File), t.submission, 0o644); err != nil {
		return nil, nil, "", err
	}
	for name, data := range t.files {
		if err := os.WriteFile(filepath.Join(subDir, name), data, 0o644); err != nil {
			return nil, nil, "", err
		}
	}
	logPath := filepath.Join(t.dir, "logs", "evaluator.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, nil, "", err
	}
	_ = os.Remove(logPath)
	cmd, err := r.resolveCommand(m.Evaluator.Command, ex)
	if err != nil {
		return nil, nil, "", err
	}
	env := map[string]string{}
	taskSub, taskWork := EvaluatorSubmissionDir, AgentWorkspaceDir
	if inContainer(ex) {
		env[EnvPrivate] = EvaluatorPrivateDir
	} else {
		env[EnvPrivate] = t.bundle.PrivateDir()
		taskSub, taskWork = subDir, work
	}
	subPath := filepath.Join(taskSub, m.Submission.File)
	env[EnvSubmission] = subPath
	if t.env != nil {
		for k, v := range t.env(taskSub, taskWork) {
			env[k] = v
		}
	}
	cmd = append(cmd, "--submission-file", subPath)
	cfg := TaskConfig{
		ID:           t.id,
		Image:        m.Evaluator.Image,
		Command:      cmd,
		Env:          env,
		WorkspaceDir: work,
		Limits:       Limits{WallClock: EvaluatorWallClock, MemoryBytes: m.Limits.MemoryBytes},
		LogPath:      logPath,
	}
	if inContainer(ex) {
		// A subprocess gets the host paths in Env instead. The container's user (not root)
		// reads a copy: the bundle's own private/ is closed to every uid but the node's.
		priv := filepath.Join(t.dir, "eval", "private")
		if err := os.RemoveAll(priv); err != nil {
			return nil, nil, "", err
		}
		if err := tasks.CopyTree(t.bundle.PrivateDir(), priv); err != nil {
			return nil, nil, "", fmt.Errorf("task %s: copy private/ for the evaluator: %w", m.Name, err)
		}
		cfg.ExtraMounts = []Mount{
			{Source: priv, Target: EvaluatorPrivateDir},
			{Source: subDir, Target: EvaluatorSubmissionDir},
		}
	}
	h, err := ex.Start(ctx, cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("start evaluator %s: %w", t.evaluator, err)
	}
	if t.started != nil {
		if err := t.started(h); err != nil {
			_ = ex.Stop(context.Background(), h, 0)
			_ = ex.Destroy(context.Background(), h)
			return nil, nil, "", err
		}
	}
	exit, werr := ex.Wait(ctx, h)
	if ctx.Err() != nil {
		return nil, nil, "", ctx.Err()
	}
	_ = ex.Destroy(context.Background(), h)
	if t.ended != nil {
		t.ended()
	}
	if werr != nil {
		return nil, nil, "", fmt.Errorf("evaluator %s: %w", t.evaluator, werr)
	}
	if !exit.Successful() {
		return exit, nil, work, nil
	}
	out, err := readAtMost(logPath, maxEvaluatorOutput+1) // more is refused by the parser
	if err != nil {
		return nil, nil, "", fmt.Errorf("evaluator log: %w", err)
	}
	return exit, out, work, nil
}

// BundleCID computes a bundle folder's root CID (what `ipfs add -r --cid-version=1` gives)
// by packing it into memory. Nodes that fetched the bundle by CID pass that instead.
func BundleCID(ctx context.Context, dir string) (string, error) {
	c, err := tasks.BundleCID(ctx, dir)
	if err != nil {
		return "", err
	}
	return c.String(), nil
}

// readAtMost reads at most n bytes of the file at path.
func readAtMost(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// scoreBuiltin scores sub with the task's built-in metric against its private labels: the
// one path a run's evaluation and a re-score of another lab's submission share.
func scoreBuiltin(b *tasks.Bundle, metric, evaluator string, sub []byte) (*evalResult, error) {
	labels, err := os.ReadFile(b.LabelsPath())
	if err != nil {
		return nil, fmt.Errorf("task %s: labels for the built-in metric: %w (set evaluator.labels in task.yaml)", b.Meta.Name, err)
	}
	return scoreLabels(b.Meta, metric, evaluator, sub, labels)
}

// scoreLabels scores sub with the built-in metric against labels (from a file, or
// decrypted from a sealed bundle into memory).
func scoreLabels(m *tasks.Meta, metric, evaluator string, sub, labels []byte) (*evalResult, error) {
	score, err := scoring.ScoreCSV(metric, sub, labels, scoring.CSVSpec{
		Task: m.Name, Header: m.Submission.Header, Rows: m.Submission.Rows, ScoringColumns: m.ScoringColumn,
	})
	var inv *scoring.InvalidSubmission
	if errors.As(err, &inv) {
		return invalidResult(evaluator, inv.Error(), sub), nil
	}
	if err != nil {
		return nil, fmt.Errorf("task %s: built-in metric %s: %w", m.Name, metric, err)
	}
	return &evalResult{valid: true, score: &score, evaluator: evaluator, submission: sub}, nil
}

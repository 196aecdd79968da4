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
}

func invalidResult(evaluator, reason string, sub []byte) *evalResult {
	return &evalResult{evaluator: evaluator, reason: reason, submission: sub}
}

// readSubmission reads the agent's submission file. A symlink is refused: the runner must
// never follow an agent-made link to a file the agent could not read itself.
func readSubmission(outDir, name string) ([]byte, string) {
	if name == "" || strings.Contains(name, "/") || name == ".." {
		return nil, fmt.Sprintf("task names no usable submission file (%q)", name)
	}
	p := filepath.Join(outDir, name)
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fmt.Sprintf("no submission: the agent left no %s in its output folder", name)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Sprintf("submission %s is not a regular file (%s)", name, fi.Mode().Type())
	}
	if fi.Size() > MaxSubmissionBytes {
		return nil, fmt.Sprintf("submission %s is %d bytes, over the %d-byte limit", name, fi.Size(), MaxSubmissionBytes)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Sprintf("submission %s: %v", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSubmissionBytes+1))
	if err != nil {
		return nil, fmt.Sprintf("submission %s: %v", name, err)
	}
	return data, ""
}

// evaluate scores the agent's submission: with the built-in metric when the task names one
// (evaluator.metric, or no evaluator image), else in an evaluator task of its own.
func (r *Runner) evaluate(ctx context.Context, ex Executor, st *RunState, b *tasks.Bundle) (*evalResult, error) {
	m := b.Meta
	dir := RunDir(r.Home, st.ID)
	builtin := m.Evaluator.Image == "" && len(m.Evaluator.Command) == 0
	metric := m.Evaluator.Metric
	if metric == "" {
		metric = m.Metric.Name
	}
	evaluator := "builtin:" + metric
	if !builtin {
		evaluator = strings.TrimSpace(m.Evaluator.Image + " " + strings.Join(m.Evaluator.Command, " "))
	}
	sub, why := readSubmission(filepath.Join(dir, "output"), m.Submission.File)
	if sub == nil {
		if reason := exitReason(st.AgentExit); reason != "" {
			why += " (agent " + reason + ")"
		}
		return invalidResult(evaluator, why, nil), nil
	}
	if builtin {
		return scoreBuiltin(b, metric, evaluator, sub)
	}
	return r.evaluateInTask(ctx, ex, st, b, evaluator, sub)
}

// evaluateInTask runs the task's evaluator apart from the agent: a fresh folder holding only
// a copy of the submission, private/ read-only, no network, none of the agent's variables.
func (r *Runner) evaluateInTask(ctx context.Context, ex Executor, st *RunState, b *tasks.Bundle, evaluator string, sub []byte) (*evalResult, error) {
	m := b.Meta
	dir := RunDir(r.Home, st.ID)
	subDir := filepath.Join(dir, "eval", "submission")
	work := filepath.Join(dir, "eval", "workspace")
	for _, d := range []string{subDir, work} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(subDir, m.Submission.File), sub, 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "logs", "evaluator.log")
	_ = os.Remove(logPath)
	cmd, err := r.resolveCommand(m.Evaluator.Command, ex)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	subPath := filepath.Join(EvaluatorSubmissionDir, m.Submission.File)
	if inContainer(ex) {
		env[EnvPrivate] = EvaluatorPrivateDir
	} else {
		env[EnvPrivate] = b.PrivateDir()
		subPath = filepath.Join(subDir, m.Submission.File)
	}
	env[EnvSubmission] = subPath
	cmd = append(cmd, "--submission-file", subPath)
	cfg := TaskConfig{
		ID:           fmt.Sprintf("%s-eval%d", st.ID, st.EvalAttempt),
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
		priv := filepath.Join(dir, "eval", "private")
		if err := os.RemoveAll(priv); err != nil {
			return nil, err
		}
		if err := tasks.CopyTree(b.PrivateDir(), priv); err != nil {
			return nil, fmt.Errorf("task %s: copy private/ for the evaluator: %w", m.Name, err)
		}
		cfg.ExtraMounts = []Mount{
			{Source: priv, Target: EvaluatorPrivateDir},
			{Source: subDir, Target: EvaluatorSubmissionDir},
		}
	}
	h, err := ex.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("start evaluator %s: %w", evaluator, err)
	}
	st.EvalHandle = h
	if err := saveState(r.Home, st, r.now()); err != nil {
		_ = ex.Stop(context.Background(), h, 0)
		_ = ex.Destroy(context.Background(), h)
		return nil, err
	}
	exit, werr := ex.Wait(ctx, h)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	_ = ex.Destroy(context.Background(), h)
	st.EvalHandle = nil
	if werr != nil {
		return nil, fmt.Errorf("evaluator %s: %w", evaluator, werr)
	}
	if !exit.Successful() {
		return invalidResult(evaluator, "evaluator "+exitReason(exit), sub), nil
	}
	out, err := readAtMost(logPath, maxEvaluatorOutput+1) // more is refused by the parser
	if err != nil {
		return nil, fmt.Errorf("evaluator log: %w", err)
	}
	res, err := ParseEvaluatorOutput(out, m.Metric.Name)
	if err != nil {
		return invalidResult(evaluator, err.Error(), sub), nil
	}
	score := res.Score
	return &evalResult{valid: true, score: &score, evaluator: evaluator, submission: sub}, nil
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
	m := b.Meta
	labels, err := os.ReadFile(b.LabelsPath())
	if err != nil {
		return nil, fmt.Errorf("task %s: labels for the built-in metric: %w (set evaluator.labels in task.yaml)", m.Name, err)
	}
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

package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// HeurekaBench runs (docs/bundle-format.md §8): the agent writes answers.jsonl; the task's
// judge — an evaluator task like any other, pinned by image digest, with the model digest
// and prompt the task names — reads the answers, private/ (the gold answers) and its
// prompt, and writes a verdict file (scoring.JudgeVerdicts) to its workspace. The runner
// scores the MCQ letters itself (exactly) and takes the OEQ scores from the verdicts; a
// malformed verdict file, a rating outside 1–5 or a question without a verdict makes the
// run invalid with the reason. The verdict file is a subject of the run attestation
// (attest.RoleVerdicts); the judge and the per-question outcome are in its predicate.

// VerdictsFile is the name of the judge's verdict file, in its workspace and as a subject.
const VerdictsFile = "verdicts.json"

// Variables a judge task gets besides EVALMESH_PRIVATE and EVALMESH_SUBMISSION.
const (
	EnvJudgePrompt   = "EVALMESH_JUDGE_PROMPT"   // path of the prompt file (read-only)
	EnvJudgeModel    = "EVALMESH_JUDGE_MODEL"    // the model digest the task pins
	EnvJudgeVerdicts = "EVALMESH_JUDGE_VERDICTS" // where to write verdicts.json
	EnvJudgeNonce    = "EVALMESH_JUDGE_NONCE"    // fresh randomness for a sampling judge
)

// judgePromptName is the prompt's file name beside the submission.
const judgePromptName = "judge_prompt.md"

// JudgeNonce returns the randomness handed to each judge call (EVALMESH_JUDGE_NONCE): a
// sampling judge draws from it, a deterministic one ignores it. Tests replace it to make
// a sampling judge's two calls reproducible.
var JudgeNonce = func() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// judgeInfo is what a HeurekaBench run attests about its judge, from the bundle.
func judgeInfo(b *tasks.Bundle) (*attest.HeurekaRunInfo, string, error) {
	prompt, err := tasks.ReadJudgePrompt(b)
	if err != nil {
		return nil, "", err
	}
	if len(prompt) > attest.MaxJudgePromptBytes {
		return nil, "", fmt.Errorf("task %s: judge prompt is %d bytes, over the %d-byte limit", b.Meta.Name, len(prompt), attest.MaxJudgePromptBytes)
	}
	m := b.Meta
	return &attest.HeurekaRunInfo{Judge: attest.JudgeInfo{
		Image: m.Evaluator.Image, Command: m.Evaluator.Command, Model: m.Heureka.Judge.Model,
		Prompt: prompt, PromptSHA256: attest.PromptDigest(prompt),
	}}, prompt, nil
}

func judgeEvaluator(m *tasks.Meta) string {
	return strings.TrimSpace("judge " + m.Evaluator.Image + " " + strings.Join(m.Evaluator.Command, " ") + " model " + m.Heureka.Judge.Model)
}

// evaluateHeureka scores a HeurekaBench run's answers with the task's judge.
func (r *Runner) evaluateHeureka(ctx context.Context, ex Executor, st *RunState, b *tasks.Bundle) (*evalResult, error) {
	info, prompt, err := judgeInfo(b)
	if err != nil {
		return nil, err
	}
	evaluator := judgeEvaluator(b.Meta)
	sub, why := readSubmission(filepath.Join(RunDir(r.Home, st.ID), "output"), b.Meta.Submission.File)
	if sub == nil {
		if reason := exitReason(st.AgentExit); reason != "" {
			why += " (agent " + reason + ")"
		}
		res := invalidResult(evaluator, why, nil)
		res.heureka = info
		return res, nil
	}
	return r.judge(ctx, ex, evalTask{
		dir: RunDir(r.Home, st.ID), id: fmt.Sprintf("%s-eval%d", st.ID, st.EvalAttempt), bundle: b, evaluator: evaluator, submission: sub,
		started: func(h *Handle) error {
			st.EvalHandle = h
			return saveState(r.Home, st, r.now())
		},
		ended: func() { st.EvalHandle = nil },
	}, info, prompt)
}

// judge runs the judge on t.submission and joins its verdicts with the exact MCQ scores:
// the one path a run and a re-score of another lab's run share.
func (r *Runner) judge(ctx context.Context, ex Executor, t evalTask, info *attest.HeurekaRunInfo, prompt string) (*evalResult, error) {
	set, err := tasks.LoadHeureka(t.bundle)
	if err != nil {
		return nil, err
	}
	res := invalidResult(t.evaluator, "", t.submission)
	res.heureka = info
	answers, err := scoring.ParseHeurekaAnswers(t.submission, set.IDs())
	if err != nil {
		res.reason = err.Error()
		return res, nil
	}
	t.files = map[string][]byte{judgePromptName: []byte(prompt)}
	nonce := JudgeNonce()
	t.env = func(subDir, work string) map[string]string {
		return map[string]string{
			EnvJudgePrompt:   filepath.Join(subDir, judgePromptName),
			EnvJudgeModel:    info.Judge.Model,
			EnvJudgeVerdicts: filepath.Join(work, VerdictsFile),
			EnvJudgeNonce:    nonce,
		}
	}
	exit, _, work, err := r.runEvaluatorTask(ctx, ex, t)
	if err != nil {
		return nil, err
	}
	if !exit.Successful() {
		res.reason = "judge " + exitReason(exit)
		return res, nil
	}
	data, err := readVerdicts(filepath.Join(work, VerdictsFile))
	if err != nil {
		res.reason = err.Error()
		return res, nil
	}
	res.verdicts = data // attested as evidence, also when refused below
	v, err := scoring.ParseJudgeVerdicts(data)
	if err != nil {
		res.reason = err.Error()
		return res, nil
	}
	qs, oeq, err := scoring.HeurekaScore(set.IDs(), set.GoldMCQ(), answers, v)
	if err != nil {
		res.reason = err.Error()
		return res, nil
	}
	sum := sha256.Sum256(data)
	info.Verdicts, info.Questions = hex.EncodeToString(sum[:]), qs
	res.valid, res.score = true, &oeq
	return res, nil
}

// readVerdicts reads the judge's verdict file: a regular file (never a link the judge made)
// of at most scoring.MaxVerdictBytes.
func readVerdicts(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, fmt.Errorf("judge wrote no %s (expected at $%s)", VerdictsFile, EnvJudgeVerdicts)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("judge's %s is not a regular file (%s)", VerdictsFile, fi.Mode().Type())
	}
	if fi.Size() > scoring.MaxVerdictBytes {
		return nil, fmt.Errorf("judge verdicts: %d bytes, over the %d-byte limit", fi.Size(), scoring.MaxVerdictBytes)
	}
	data, err := readAtMost(p, scoring.MaxVerdictBytes+1)
	if err != nil {
		return nil, fmt.Errorf("judge verdicts: %v", err)
	}
	return data, nil
}

// RescoreSubmission re-scores another lab's submission the way its task is scored: a
// HeurekaBench task by re-running its judge on this node's executor for new runs
// (RescoreHeureka), a task scored by its evaluator image by running that image in this
// node's Docker engine (RescoreEvaluator; a node without one refuses), any other task with
// its built-in metric (Rescore). The daemon calls it.
func (r *Runner) RescoreSubmission(ctx context.Context, runID string, run *attest.RunPredicate, submission []byte, submissionName, submissionCID, taskDir string) (*Rescored, error) {
	if run != nil && run.Heureka != nil {
		ex, err := r.executor(r.Executor)
		if err != nil {
			return nil, fmt.Errorf("rescore %s: %w", runID, err)
		}
		return r.RescoreHeureka(ctx, ex, runID, run, submission, submissionName, submissionCID, taskDir)
	}
	m, err := tasks.LoadMeta(taskDir)
	if err != nil {
		return nil, err
	}
	if builtin, _, _ := scorerOf(m); !builtin && !m.IsHeureka() {
		ex, err := r.rescoreContainer(runID, m)
		if err != nil {
			return nil, err
		}
		return r.RescoreEvaluator(ctx, ex, runID, run, submission, submissionName, submissionCID, taskDir)
	}
	return r.Rescore(runID, run, submission, submissionName, submissionCID, taskDir)
}

// RescoreHeureka re-runs the task's judge on another lab's HeurekaBench submission (the
// bytes of its submission subject, checked by the caller) with executor ex, and signs a
// re-score of runID with the OEQ score this node's judge gave. OEQCorrectness has
// tolerance 0 (scoring.LookupMetric): a deterministic judge agrees exactly; a sampling one
// gives another score, which attest.Reconcile reports as a disagreement — never averaged.
func (r *Runner) RescoreHeureka(ctx context.Context, ex Executor, runID string, run *attest.RunPredicate, submission []byte, submissionName, submissionCID, taskDir string) (*Rescored, error) {
	if r.Key == nil {
		return nil, errors.New("rescore: no signing key (load the node identity first)")
	}
	b, err := tasks.Open(taskDir)
	if err != nil {
		return nil, err
	}
	if !b.Meta.IsHeureka() {
		return nil, fmt.Errorf("rescore %s: task %s is not a HeurekaBench task; use Rescore", runID, b.Meta.Name)
	}
	info, prompt, err := judgeInfo(b)
	if err != nil {
		return nil, err
	}
	base := r.Home.RescoresDir()
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "heureka-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ev, err := r.judge(ctx, ex, evalTask{dir: dir, id: "rescore-" + filepath.Base(dir), bundle: b,
		evaluator: judgeEvaluator(b.Meta), submission: submission}, info, prompt)
	if err != nil {
		return nil, fmt.Errorf("rescore %s: %w", runID, err)
	}
	if submissionName == "" {
		submissionName = b.Meta.Submission.File
	}
	return r.signRescore(runID, run, b.Meta.Metric.Name, ev, subject(submissionName, submission, submissionCID, attest.RoleSubmission))
}

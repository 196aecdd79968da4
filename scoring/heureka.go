package scoring

// HeurekaBench scoring (docs/bundle-format.md §8, /work/shared/AIRS-BENCH.md): an agent's
// answers file (one JSON object a line: id, mcq letters, oeq text), the judge's verdict
// file (per question the atomic facts with their labels and a 1–5 score), and the
// per-question outcome the run attests and the ledger reads. Pure: bytes in, values out.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// OEQMetric is the metric name of a HeurekaBench run's score: the mean judge score over
// the task's questions, 1 (worst) to 5 (all gold facts present, no contradiction).
const OEQMetric = "OEQCorrectness"

// OEQ score bounds of the judge's rubric.
const (
	OEQMin = 1
	OEQMax = 5
)

// Fact labels a judge gives each atomic fact of the gold answer.
const (
	FactPresent   = "PRESENT"
	FactPartial   = "PARTIAL"
	FactMissing   = "MISSING"
	FactIncorrect = "INCORRECT"
)

// Bounds on the judge's verdict file and the agent's answers file: both are outside input.
const (
	MaxVerdictBytes      = 4 << 20
	MaxHeurekaQuestions  = 10000
	MaxFactsPerQuestion  = 256
	MaxFactBytes         = 4096
	MaxRationaleBytes    = 16 << 10
	MaxQuestionIDBytes   = 128
	MaxAnswersBytes      = 16 << 20
	MaxOEQAnswerBytes    = 256 << 10
	maxJudgeVerdictDepth = 8
)

// JudgeFact is one atomic fact of the gold answer and how the judge found it in the
// agent's answer.
type JudgeFact struct {
	Fact  string `json:"fact"`
	Label string `json:"label"`
}

// QuestionVerdict is the judge's verdict on one open-ended answer.
type QuestionVerdict struct {
	ID        string      `json:"id"`
	Score     float64     `json:"score"`
	Facts     []JudgeFact `json:"facts"`
	Rationale string      `json:"rationale,omitempty"`
}

// JudgeVerdicts is the judge's verdict file: one verdict per question, in any order.
type JudgeVerdicts struct {
	Questions []QuestionVerdict `json:"questions"`
}

// ParseJudgeVerdicts decodes and checks a verdict file: a single JSON object with at most
// MaxHeurekaQuestions verdicts, each with a non-empty unique id, a finite score in 1–5, at
// most MaxFactsPerQuestion facts labelled PRESENT / PARTIAL / MISSING / INCORRECT, texts
// within their bounds. Unknown fields are refused (a judge that writes something else
// is not the judge this task names). Every failure is an error naming the question.
func ParseJudgeVerdicts(data []byte) (*JudgeVerdicts, error) {
	if len(data) > MaxVerdictBytes {
		return nil, fmt.Errorf("judge verdicts: %d bytes, over the %d-byte limit", len(data), MaxVerdictBytes)
	}
	if err := jsonDepth(data, maxJudgeVerdictDepth); err != nil {
		return nil, fmt.Errorf("judge verdicts: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var v JudgeVerdicts
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("judge verdicts: not a JSON object {\"questions\": [{\"id\", \"score\", \"facts\": [{\"fact\", \"label\"}]}]}: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("judge verdicts: trailing data after the JSON object")
	}
	if v.Questions == nil {
		return nil, errors.New("judge verdicts: no \"questions\" list")
	}
	if len(v.Questions) > MaxHeurekaQuestions {
		return nil, fmt.Errorf("judge verdicts: %d questions, over the limit of %d", len(v.Questions), MaxHeurekaQuestions)
	}
	seen := make(map[string]bool, len(v.Questions))
	for i, q := range v.Questions {
		if err := checkQuestionID(q.ID); err != nil {
			return nil, fmt.Errorf("judge verdicts: question %d: %v", i+1, err)
		}
		if seen[q.ID] {
			return nil, fmt.Errorf("judge verdicts: question %q has two verdicts", q.ID)
		}
		seen[q.ID] = true
		if math.IsNaN(q.Score) || q.Score < OEQMin || q.Score > OEQMax {
			return nil, fmt.Errorf("judge verdicts: question %q: score %v is outside the rubric's %d–%d", q.ID, q.Score, OEQMin, OEQMax)
		}
		if len(q.Facts) > MaxFactsPerQuestion {
			return nil, fmt.Errorf("judge verdicts: question %q: %d facts, over the limit of %d", q.ID, len(q.Facts), MaxFactsPerQuestion)
		}
		if len(q.Rationale) > MaxRationaleBytes || !utf8.ValidString(q.Rationale) {
			return nil, fmt.Errorf("judge verdicts: question %q: rationale is not UTF-8 text of at most %d bytes", q.ID, MaxRationaleBytes)
		}
		for j, f := range q.Facts {
			if f.Fact == "" || len(f.Fact) > MaxFactBytes || !utf8.ValidString(f.Fact) {
				return nil, fmt.Errorf("judge verdicts: question %q fact %d: expected UTF-8 text of 1–%d bytes", q.ID, j+1, MaxFactBytes)
			}
			switch f.Label {
			case FactPresent, FactPartial, FactMissing, FactIncorrect:
			default:
				return nil, fmt.Errorf("judge verdicts: question %q fact %d: label %q; expected PRESENT, PARTIAL, MISSING or INCORRECT", q.ID, j+1, clip(f.Label))
			}
		}
	}
	return &v, nil
}

// jsonDepth refuses JSON nested deeper than max (before a decoder allocates for it).
func jsonDepth(data []byte, max int) error {
	depth := 0
	inStr, esc := false, false
	for _, c := range data {
		switch {
		case inStr:
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			if depth++; depth > max {
				return fmt.Errorf("nested more than %d levels deep", max)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

func checkQuestionID(id string) error {
	if id == "" || len(id) > MaxQuestionIDBytes || !utf8.ValidString(id) {
		return fmt.Errorf("id %q: expected a question id of 1–%d bytes", clip(id), MaxQuestionIDBytes)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("id %q: control characters are not allowed", clip(id))
		}
	}
	return nil
}

// HeurekaAnswer is one line of an agent's answers file.
type HeurekaAnswer struct {
	ID  string `json:"id"`
	MCQ string `json:"mcq"` // letters A–D, comma- or space-separated, any case; "" = unanswered
	OEQ string `json:"oeq"` // free text; "" = unanswered
}

// ParseHeurekaAnswers reads an agent's answers file (JSON lines, blank lines skipped)
// against the task's question ids: every id must be one of them and answered once, the
// MCQ letters must be A–D. Questions without a line are unanswered (they score as wrong),
// not an error. A malformed file is an *InvalidSubmission naming the line.
func ParseHeurekaAnswers(data []byte, questionIDs []string) (map[string]HeurekaAnswer, error) {
	if len(data) > MaxAnswersBytes {
		return nil, &InvalidSubmission{Reason: fmt.Sprintf("answers file is %d bytes, over the %d-byte limit", len(data), MaxAnswersBytes)}
	}
	known := make(map[string]bool, len(questionIDs))
	for _, id := range questionIDs {
		known[id] = true
	}
	out := map[string]HeurekaAnswer{}
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		row := n + 1
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var a HeurekaAnswer
		if err := dec.Decode(&a); err != nil {
			return nil, &InvalidSubmission{Row: row, Reason: fmt.Sprintf("expected a JSON object {\"id\", \"mcq\", \"oeq\"}: %v", err)}
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, &InvalidSubmission{Row: row, Reason: "trailing data after the JSON object"}
		}
		if !known[a.ID] {
			return nil, &InvalidSubmission{Row: row, Column: "id", Reason: fmt.Sprintf("%q is not a question of this task", clip(a.ID))}
		}
		if _, dup := out[a.ID]; dup {
			return nil, &InvalidSubmission{Row: row, Column: "id", Reason: fmt.Sprintf("question %q answered twice", clip(a.ID))}
		}
		if _, ok := parseLetters(a.MCQ); !ok {
			return nil, &InvalidSubmission{Row: row, Column: "mcq", Reason: fmt.Sprintf("expected letters A–D separated by commas, got %q", clip(a.MCQ))}
		}
		if len(a.OEQ) > MaxOEQAnswerBytes || !utf8.ValidString(a.OEQ) {
			return nil, &InvalidSubmission{Row: row, Column: "oeq", Reason: fmt.Sprintf("expected UTF-8 text of at most %d bytes", MaxOEQAnswerBytes)}
		}
		out[a.ID] = a
	}
	return out, nil
}

// HeurekaQuestion is one question's outcome in a run, what the run attests and the
// ledger pools: the judge's OEQ score and the MCQ letter counts (exact when FP = FN = 0
// and TP > 0; answered when TP + FP > 0).
type HeurekaQuestion struct {
	ID  string  `json:"id"`
	OEQ float64 `json:"oeq"`
	TP  int     `json:"tp"`
	FP  int     `json:"fp"`
	FN  int     `json:"fn"`
}

// MCQLetterCounts compares one predicted letter set with the gold one ("A, c" style, case
// and spaces ignored).
func MCQLetterCounts(pred, gold string) (tp, fp, fn int) {
	p, g := letterSet(pred), letterSet(gold)
	return bitsCount(p & g), bitsCount(p &^ g), bitsCount(g &^ p)
}

// ValidMCQLetters reports whether s is a non-empty set of letters A–D.
func ValidMCQLetters(s string) bool {
	v, ok := parseLetters(s)
	return ok && v != 0
}

// HeurekaScore joins the MCQ answers (against gold letters) and the judge's verdicts
// into the run's per-question outcome, in the order of questionIDs, and its OEQ score
// (the mean judge score). A verdict for every question is required: a judge that omits
// one, or judges a question the task does not have, makes the run invalid, and the error
// says which.
func HeurekaScore(questionIDs []string, goldMCQ map[string]string, answers map[string]HeurekaAnswer, v *JudgeVerdicts) ([]HeurekaQuestion, float64, error) {
	if len(questionIDs) == 0 {
		return nil, 0, errors.New("the task has no questions")
	}
	byID := make(map[string]*QuestionVerdict, len(v.Questions))
	for i := range v.Questions {
		byID[v.Questions[i].ID] = &v.Questions[i]
	}
	known := make(map[string]bool, len(questionIDs))
	var missing []string
	for _, id := range questionIDs {
		known[id] = true
		if byID[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, 0, fmt.Errorf("judge verdicts: no verdict for question(s) %s", strings.Join(clipList(missing, 10), ", "))
	}
	for _, q := range v.Questions {
		if !known[q.ID] {
			return nil, 0, fmt.Errorf("judge verdicts: question %q is not one of the task's", clip(q.ID))
		}
	}
	out := make([]HeurekaQuestion, len(questionIDs))
	sum := 0.0
	for i, id := range questionIDs {
		tp, fp, fn := MCQLetterCounts(answers[id].MCQ, goldMCQ[id])
		s := byID[id].Score
		sum += s
		out[i] = HeurekaQuestion{ID: id, OEQ: s, TP: tp, FP: fp, FN: fn}
	}
	return out, sum / float64(len(questionIDs)), nil
}

func clipList(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(append([]string(nil), s[:n]...), fmt.Sprintf("… (%d more)", len(s)-n))
}

// CheckHeurekaQuestions checks an attested per-question outcome: ids unique and valid,
// OEQ scores in 1–5, counts non-negative and a question's letters at most four.
func CheckHeurekaQuestions(qs []HeurekaQuestion) error {
	if len(qs) == 0 {
		return errors.New("no questions")
	}
	if len(qs) > MaxHeurekaQuestions {
		return fmt.Errorf("%d questions, over the limit of %d", len(qs), MaxHeurekaQuestions)
	}
	seen := make(map[string]bool, len(qs))
	for _, q := range qs {
		if err := checkQuestionID(q.ID); err != nil {
			return err
		}
		if seen[q.ID] {
			return fmt.Errorf("question %q listed twice", q.ID)
		}
		seen[q.ID] = true
		if math.IsNaN(q.OEQ) || q.OEQ < OEQMin || q.OEQ > OEQMax {
			return fmt.Errorf("question %q: oeq %v outside %d–%d", q.ID, q.OEQ, OEQMin, OEQMax)
		}
		if q.TP < 0 || q.FP < 0 || q.FN < 0 || q.TP+q.FP > 4 || q.TP+q.FN > 4 || q.TP+q.FN == 0 {
			return fmt.Errorf("question %q: letter counts tp %d fp %d fn %d are not those of letter sets A–D with a non-empty gold", q.ID, q.TP, q.FP, q.FN)
		}
	}
	return nil
}

// MCQFromQuestions pools per-question outcomes into MCQCounts (Value gives the metrics).
func MCQFromQuestions(qs []HeurekaQuestion) MCQCounts {
	var c MCQCounts
	for _, q := range qs {
		c.add(q)
	}
	return c
}

func (c *MCQCounts) add(q HeurekaQuestion) {
	c.Questions++
	c.TP += q.TP
	c.FP += q.FP
	c.FN += q.FN
	if q.FP == 0 && q.FN == 0 && q.TP > 0 {
		c.Exact++
	}
	if q.TP+q.FP == 0 {
		return
	}
	c.Answered++
	pr := float64(q.TP) / float64(q.TP+q.FP)
	var rc float64
	if q.TP+q.FN > 0 {
		rc = float64(q.TP) / float64(q.TP+q.FN)
	}
	c.MacroP += pr
	c.MacroR += rc
	if pr+rc > 0 {
		c.MacroF1 += float64(2*pr*rc) / (pr + rc)
	}
}

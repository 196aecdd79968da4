package tasks

// HeurekaBench bundles (docs/bundle-format.md §8): one dataset under public/data/, the
// questions (each with an open-ended and a multiple-choice form) in public/, the gold
// letters and gold answer text in private/, a judge evaluator pinned by image digest,
// model digest and prompt. task.yaml says `benchmark: heureka`.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// BenchmarkHeureka is task.yaml's `benchmark` for a HeurekaBench bundle.
const BenchmarkHeureka = "heureka"

// Default paths of a HeurekaBench bundle.
const (
	HeurekaQuestionsFile = "public/questions.jsonl"
	HeurekaAnswersFile   = "private/answers.jsonl"
	HeurekaDataDir       = "public/data"
	HeurekaPromptFile    = "evaluate/judge_prompt.md"
	HeurekaSubmission    = "answers.jsonl"
)

// Bounds on a HeurekaBench item file (outside input).
const (
	maxHeurekaItemsBytes = 64 << 20
	maxHeurekaItems      = 10000
	maxHeurekaText       = 64 << 10
	maxHeurekaIDBytes    = 128
)

// HeurekaConfig is task.yaml's `heureka:` mapping.
type HeurekaConfig struct {
	Questions string         `yaml:"questions" json:"questions"`
	Answers   string         `yaml:"answers" json:"answers"`
	Judge     HeurekaJudge   `yaml:"judge" json:"judge"`
	Extra     map[string]any `yaml:",inline" json:"-"`
}

// HeurekaJudge pins the judge's model and prompt; its image and command are the task's
// evaluator.image and evaluator.command.
type HeurekaJudge struct {
	Model  string         `yaml:"model" json:"model"`   // sha256:<64 hex> of the model weights
	Prompt string         `yaml:"prompt" json:"prompt"` // bundle-relative path under evaluate/
	Extra  map[string]any `yaml:",inline" json:"-"`
}

// IsHeureka reports whether m is a HeurekaBench task.
func (m *Meta) IsHeureka() bool { return m.Benchmark == BenchmarkHeureka }

// HeurekaMCQ is the multiple-choice form of a question: options by letter (A–D).
type HeurekaMCQ struct {
	Question string            `json:"question"`
	Options  map[string]string `json:"options"`
}

// HeurekaQuestion is one line of public/questions.jsonl: what the agent sees.
type HeurekaQuestion struct {
	ID  string     `json:"id"`
	OEQ string     `json:"oeq"`
	MCQ HeurekaMCQ `json:"mcq"`
}

// HeurekaFact is one atomic fact of a gold answer. Keywords and Contradicts are hints for
// keyword-matching judges (the example's stand-in); an LLM judge reads Fact.
type HeurekaFact struct {
	Fact        string   `json:"fact"`
	Keywords    []string `json:"keywords,omitempty"`
	Contradicts []string `json:"contradicts,omitempty"`
}

// HeurekaGold is one line of private/answers.jsonl: the gold letters and answer text.
type HeurekaGold struct {
	ID    string        `json:"id"`
	MCQ   string        `json:"mcq"`
	OEQ   string        `json:"oeq"`
	Facts []HeurekaFact `json:"facts,omitempty"`
}

// HeurekaItem is one line of an import file (`evalmesh task import-heureka ITEMS.jsonl`).
type HeurekaItem struct {
	ID  string `json:"id"`
	OEQ struct {
		Question string        `json:"question"`
		Answer   string        `json:"answer"`
		Facts    []HeurekaFact `json:"facts,omitempty"`
	} `json:"oeq"`
	MCQ struct {
		Question string            `json:"question"`
		Options  map[string]string `json:"options"`
		Answer   string            `json:"answer"`
	} `json:"mcq"`
}

// readJSONL decodes a JSON-lines file into one T per non-blank line, refusing unknown
// fields, trailing data, more than maxHeurekaItems lines and files over the bound.
func readJSONL[T any](data []byte, what string) ([]T, error) {
	if len(data) > maxHeurekaItemsBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit", what, len(data), maxHeurekaItemsBytes)
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxHeurekaItemsBytes)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if len(out) == maxHeurekaItems {
			return nil, fmt.Errorf("%s: more than %d items", what, maxHeurekaItems)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", what, n, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("%s line %d: trailing data after the JSON object", what, n)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	return out, nil
}

// ParseHeurekaItems reads an import file. It checks shape only; CheckHeurekaItems checks
// the rules.
func ParseHeurekaItems(data []byte) ([]HeurekaItem, error) {
	return readJSONL[HeurekaItem](data, "heureka items")
}

// ParseHeurekaQuestions reads public/questions.jsonl.
func ParseHeurekaQuestions(data []byte) ([]HeurekaQuestion, error) {
	return readJSONL[HeurekaQuestion](data, HeurekaQuestionsFile)
}

// ParseHeurekaGold reads private/answers.jsonl.
func ParseHeurekaGold(data []byte) ([]HeurekaGold, error) {
	return readJSONL[HeurekaGold](data, HeurekaAnswersFile)
}

// HeurekaSet is a bundle's questions with their gold, in file order.
type HeurekaSet struct {
	Questions []HeurekaQuestion
	Gold      map[string]HeurekaGold
}

// IDs lists the question ids in file order.
func (s *HeurekaSet) IDs() []string {
	out := make([]string, len(s.Questions))
	for i, q := range s.Questions {
		out[i] = q.ID
	}
	return out
}

// GoldMCQ maps question id to gold letters.
func (s *HeurekaSet) GoldMCQ() map[string]string {
	out := make(map[string]string, len(s.Gold))
	for id, g := range s.Gold {
		out[id] = g.MCQ
	}
	return out
}

// LoadHeureka reads and checks a HeurekaBench bundle's questions and gold answers.
func LoadHeureka(b *Bundle) (*HeurekaSet, error) {
	m := b.Meta
	if !m.IsHeureka() || m.Heureka == nil {
		return nil, fmt.Errorf("task %s is not a HeurekaBench bundle (task.yaml benchmark: heureka)", m.Name)
	}
	qd, err := ReadRegular(filepath.Join(b.Dir, filepath.FromSlash(m.Heureka.Questions)))
	if err != nil {
		return nil, fmt.Errorf("task %s: questions: %w", m.Name, err)
	}
	gd, err := ReadRegular(filepath.Join(b.Dir, filepath.FromSlash(m.Heureka.Answers)))
	if err != nil {
		return nil, fmt.Errorf("task %s: answers: %w", m.Name, err)
	}
	qs, err := ParseHeurekaQuestions(qd)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", m.Name, err)
	}
	gs, err := ParseHeurekaGold(gd)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", m.Name, err)
	}
	if probs := checkHeurekaSet(qs, gs); len(probs) > 0 {
		return nil, fmt.Errorf("task %s: %s", m.Name, strings.Join(probs, "; "))
	}
	set := &HeurekaSet{Questions: qs, Gold: map[string]HeurekaGold{}}
	for _, g := range gs {
		set.Gold[g.ID] = g
	}
	return set, nil
}

// ReadJudgePrompt reads the judge prompt the task names.
func ReadJudgePrompt(b *Bundle) (string, error) {
	p, err := ReadRegular(filepath.Join(b.Dir, filepath.FromSlash(b.Meta.Heureka.Judge.Prompt)))
	if err != nil {
		return "", fmt.Errorf("task %s: judge prompt: %w", b.Meta.Name, err)
	}
	return string(p), nil
}

// letters parses an MCQ letter set ("A, c"): upper-case letters A–D, no repeats; ok false
// on anything else.
func letters(s string) ([]string, bool) {
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' }) {
		l := strings.ToUpper(part)
		if len(l) != 1 || l[0] < 'A' || l[0] > 'D' {
			return nil, false
		}
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out, true
}

func checkHeurekaText(what, s string, probs *[]string) {
	switch {
	case strings.TrimSpace(s) == "":
		*probs = append(*probs, what+" is empty")
	case len(s) > maxHeurekaText || !utf8.ValidString(s):
		*probs = append(*probs, fmt.Sprintf("%s: expected UTF-8 text of at most %d bytes", what, maxHeurekaText))
	}
}

// checkHeurekaQuestion checks one question's two forms and its gold: both forms present,
// options A–D (at least two), distinct, gold letters among them.
func checkHeurekaQuestion(id, oeq, mcqQ string, options map[string]string, goldMCQ, goldOEQ string) []string {
	var probs []string
	q := fmt.Sprintf("question %q", id)
	checkHeurekaText(q+": the open-ended form (oeq)", oeq, &probs)
	checkHeurekaText(q+": the multiple-choice question", mcqQ, &probs)
	checkHeurekaText(q+": the gold answer text", goldOEQ, &probs)
	if len(options) < 2 {
		probs = append(probs, fmt.Sprintf("%s: %d option(s); a multiple-choice form needs 2–4 options A–D", q, len(options)))
	}
	texts := map[string]string{}
	for _, l := range sortedKeys(options) {
		if len(l) != 1 || l[0] < 'A' || l[0] > 'D' {
			probs = append(probs, fmt.Sprintf("%s: option %q; options are lettered A, B, C, D", q, l))
			continue
		}
		t := strings.ToLower(strings.Join(strings.Fields(options[l]), " "))
		checkHeurekaText(fmt.Sprintf("%s: option %s", q, l), options[l], &probs)
		if o, dup := texts[t]; dup && t != "" {
			probs = append(probs, fmt.Sprintf("%s: options %s and %s say the same thing; options must be distinct", q, o, l))
		}
		texts[t] = l
	}
	gl, ok := letters(goldMCQ)
	switch {
	case !ok:
		probs = append(probs, fmt.Sprintf("%s: gold letters %q; expected letters A–D separated by commas", q, goldMCQ))
	case len(gl) == 0:
		probs = append(probs, fmt.Sprintf("%s: no gold letters; at least one option is correct", q))
	default:
		for _, l := range gl {
			if _, ok := options[l]; !ok {
				probs = append(probs, fmt.Sprintf("%s: gold letter %s is not among its options", q, l))
			}
		}
	}
	return probs
}

func checkHeurekaID(id string, seen map[string]bool, what string) []string {
	switch {
	case id == "" || len(id) > maxHeurekaIDBytes || !utf8.ValidString(id) || strings.ContainsAny(id, "\n\r\t\x00"):
		return []string{fmt.Sprintf("%s: id %q; expected 1–%d bytes of text", what, id, maxHeurekaIDBytes)}
	case seen[id]:
		return []string{fmt.Sprintf("%s: id %q appears twice", what, id)}
	}
	seen[id] = true
	return nil
}

// CheckHeurekaItems checks an import file against the task check rules.
func CheckHeurekaItems(items []HeurekaItem) []string {
	if len(items) == 0 {
		return []string{"no items"}
	}
	var probs []string
	seen := map[string]bool{}
	for i, it := range items {
		probs = append(probs, checkHeurekaID(it.ID, seen, fmt.Sprintf("item %d", i+1))...)
		probs = append(probs, checkHeurekaQuestion(it.ID, it.OEQ.Question, it.MCQ.Question, it.MCQ.Options, it.MCQ.Answer, it.OEQ.Answer)...)
	}
	return probs
}

// checkHeurekaSet checks a bundle's questions against its gold answers: the same ids,
// each question's two forms and gold.
func checkHeurekaSet(qs []HeurekaQuestion, gs []HeurekaGold) []string {
	var probs []string
	if len(qs) == 0 {
		return []string{HeurekaQuestionsFile + ": no questions"}
	}
	seenQ, seenG := map[string]bool{}, map[string]bool{}
	gold := map[string]HeurekaGold{}
	for i, g := range gs {
		probs = append(probs, checkHeurekaID(g.ID, seenG, fmt.Sprintf("gold answer %d", i+1))...)
		gold[g.ID] = g
	}
	for i, q := range qs {
		probs = append(probs, checkHeurekaID(q.ID, seenQ, fmt.Sprintf("question %d", i+1))...)
		g, ok := gold[q.ID]
		if !ok {
			probs = append(probs, fmt.Sprintf("question %q has no gold answer in private/", q.ID))
			continue
		}
		probs = append(probs, checkHeurekaQuestion(q.ID, q.OEQ, q.MCQ.Question, q.MCQ.Options, g.MCQ, g.OEQ)...)
	}
	var extra []string
	for id := range gold {
		if !seenQ[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	for _, id := range extra {
		probs = append(probs, fmt.Sprintf("gold answer %q has no question", id))
	}
	return probs
}

// validateHeureka is the part of task.yaml validation a HeurekaBench bundle adds.
func (m *Meta) validateHeureka() []FieldError {
	var errs []FieldError
	bad := func(field, msg string, args ...any) {
		errs = append(errs, FieldError{Field: field, Msg: fmt.Sprintf(msg, args...)})
	}
	switch m.Benchmark {
	case "", "airs":
		if m.Heureka != nil {
			bad("heureka", "set, but benchmark is not heureka; add `benchmark: heureka`")
		}
		return errs
	case BenchmarkHeureka:
	default:
		bad("benchmark", "%q: expected airs (the default) or heureka", m.Benchmark)
		return errs
	}
	h := m.Heureka
	if h == nil {
		bad("heureka", "required with benchmark: heureka: questions, answers and judge (docs/bundle-format.md §8)")
		return errs
	}
	path := func(field, p, under, example string) {
		if p == "" {
			bad(field, "required: e.g. %s", example)
		} else if err := checkRelPath(p); err != nil {
			bad(field, "%q: %v; expected a path inside the bundle, e.g. %s", p, err, example)
		} else if !strings.HasPrefix(p, under) {
			bad(field, "%q: must live under %s", p, under)
		}
	}
	path("heureka.questions", h.Questions, "public/", HeurekaQuestionsFile)
	path("heureka.answers", h.Answers, "private/", HeurekaAnswersFile)
	path("heureka.judge.prompt", h.Judge.Prompt, "evaluate/", HeurekaPromptFile)
	if !digestRe.MatchString(h.Judge.Model) {
		bad("heureka.judge.model", "%q: expected the judge model's digest sha256:<64 lowercase hex>", h.Judge.Model)
	}
	if m.Evaluator.Image == "" || len(m.Evaluator.Command) == 0 {
		bad("evaluator", "a HeurekaBench task is scored by its judge: set evaluator.image (sha256:… digest) and evaluator.command")
	}
	if m.Evaluator.Metric != "" {
		bad("evaluator.metric", "%q: a HeurekaBench task is scored by its judge, not a built-in metric; remove it", m.Evaluator.Metric)
	}
	if m.Metric.Name != "OEQCorrectness" {
		bad("metric.name", "%q: a HeurekaBench run's score is OEQCorrectness (the mean judge score, 1–5)", m.Metric.Name)
	}
	return errs
}

// checkHeurekaBundle is `task check` for a HeurekaBench bundle.
func checkHeurekaBundle(b *Bundle) []string {
	set, err := LoadHeureka(b)
	if err != nil {
		return []string{err.Error()}
	}
	var probs []string
	if _, err := ReadJudgePrompt(b); err != nil {
		probs = append(probs, err.Error())
	}
	if b.Meta.Submission.File != HeurekaSubmission {
		probs = append(probs, fmt.Sprintf("submission.file is %q; a HeurekaBench agent writes %s", b.Meta.Submission.File, HeurekaSubmission))
	}
	_ = set
	return probs
}

// HeurekaImportOptions names the bundle ImportHeureka writes.
type HeurekaImportOptions struct {
	Name, Version, Category, ResearchProblem string
	DataDir                                  string // copied to public/data/
	Prompt                                   string // prompt.md; "" = generated
	JudgeImage                               string
	JudgeCommand                             []string
	JudgeModel                               string
	JudgePrompt                              string // the judge prompt text; "" = DefaultJudgePrompt
	SOTA                                     float64
	WallClockSeconds                         int64
}

// DefaultJudgePrompt is the judge prompt an import gets unless it names one: the paper's
// G-Eval atomic-fact rubric.
const DefaultJudgePrompt = `You are judging an AI co-scientist's answer to an open-ended research question about a dataset.
1. Decompose the gold answer into atomic facts (conditions, trends, conclusions).
2. For each fact, label it against the agent's answer: PRESENT (stated), PARTIAL (stated in part or
   vaguely), MISSING (not stated), INCORRECT (contradicted).
3. Score 1-5: 5 = every fact present and no contradiction; 4 = most present, none contradicted;
   3 = about half present; 2 = few present; 1 = all missing or a major contradiction.
   Additional findings that do not contradict the gold answer are not penalised.
Answer with JSON: {"questions": [{"id", "score", "facts": [{"fact", "label"}], "rationale"}]}.
`

// ImportHeureka builds a HeurekaBench bundle at out from an items file and a dataset folder.
// out must not exist or be empty; nothing is left behind on failure.
func ImportHeureka(itemsPath, out string, opts HeurekaImportOptions) (*Meta, error) {
	data, err := ReadRegular(itemsPath)
	if err != nil {
		return nil, fmt.Errorf("import-heureka %s: %w", itemsPath, err)
	}
	items, err := ParseHeurekaItems(data)
	if err != nil {
		return nil, fmt.Errorf("import-heureka %s: %w", itemsPath, err)
	}
	if probs := CheckHeurekaItems(items); len(probs) > 0 {
		return nil, fmt.Errorf("import-heureka %s: %d problem(s):\n  %s", itemsPath, len(probs), strings.Join(probs, "\n  "))
	}
	if opts.DataDir == "" {
		return nil, errors.New("import-heureka: --data DIR is required: the dataset the questions are about (copied to public/data/)")
	}
	if opts.Name == "" {
		opts.Name = strings.TrimSuffix(filepath.Base(itemsPath), filepath.Ext(itemsPath))
	}
	files, m, err := HeurekaBundleFiles(items, opts)
	if err != nil {
		return nil, fmt.Errorf("import-heureka: %w", err)
	}
	if err := writeBundle(out, files, opts.DataDir); err != nil {
		return nil, fmt.Errorf("import-heureka: --out %s: %w", out, err)
	}
	return m, nil
}

// HeurekaBundleFiles lays out a HeurekaBench bundle from checked items: task.yaml,
// prompt.md, public/questions.jsonl, private/answers.jsonl and the judge prompt, by
// slash-separated path (the dataset under public/data/ is the caller's). Same inputs give
// the same bytes.
func HeurekaBundleFiles(items []HeurekaItem, opts HeurekaImportOptions) (map[string][]byte, *Meta, error) {
	if probs := CheckHeurekaItems(items); len(probs) > 0 {
		return nil, nil, fmt.Errorf("%d problem(s):\n  %s", len(probs), strings.Join(probs, "\n  "))
	}
	if opts.Version == "" {
		opts.Version = "1"
	}
	if opts.Category == "" {
		opts.Category = "Single-cell Biology"
	}
	if opts.ResearchProblem == "" {
		opts.ResearchProblem = "Data-driven Scientific Discovery"
	}
	if opts.JudgePrompt == "" {
		opts.JudgePrompt = DefaultJudgePrompt
	}
	if opts.SOTA == 0 {
		opts.SOTA = 1
	}
	files := map[string][]byte{}
	var qs, gs bytes.Buffer
	for _, it := range items {
		q, _ := json.Marshal(HeurekaQuestion{ID: it.ID, OEQ: it.OEQ.Question, MCQ: HeurekaMCQ{Question: it.MCQ.Question, Options: it.MCQ.Options}})
		g, _ := json.Marshal(HeurekaGold{ID: it.ID, MCQ: it.MCQ.Answer, OEQ: it.OEQ.Answer, Facts: it.OEQ.Facts})
		qs.Write(append(q, '\n'))
		gs.Write(append(g, '\n'))
	}
	files[HeurekaQuestionsFile] = qs.Bytes()
	files[HeurekaAnswersFile] = gs.Bytes()
	files[HeurekaPromptFile] = []byte(opts.JudgePrompt)
	prompt := opts.Prompt
	if prompt == "" {
		prompt = HeurekaPrompt(opts.Name)
	}
	files[PromptFile] = []byte(prompt)
	m := &Meta{
		Name: opts.Name, Version: opts.Version, Category: opts.Category, ResearchProblem: opts.ResearchProblem,
		Benchmark:     BenchmarkHeureka,
		Dataset:       Dataset{ID: "heureka/" + opts.Name},
		Metric:        Metric{Name: "OEQCorrectness", OptimalScore: 5},
		ScoringColumn: StringList{"mcq", "oeq"},
		Submission:    Submission{File: HeurekaSubmission},
		SOTA:          SOTA{Score: opts.SOTA},
		Limits:        Limits{WallClockSeconds: opts.WallClockSeconds},
		Evaluator:     Evaluator{Image: opts.JudgeImage, Command: opts.JudgeCommand},
		Heureka: &HeurekaConfig{Questions: HeurekaQuestionsFile, Answers: HeurekaAnswersFile,
			Judge: HeurekaJudge{Model: opts.JudgeModel, Prompt: HeurekaPromptFile}},
	}
	if errs := m.validate(map[string]bool{"metric.lower_is_better": true, "metric.optimal_score": true, "sota.score": true}); len(errs) > 0 {
		return nil, nil, &ValidationError{Fields: errs}
	}
	y, err := m.Marshal()
	if err != nil {
		return nil, nil, err
	}
	files[MetaFile] = y
	return files, m, nil
}

// HeurekaPrompt is the prompt.md of an imported HeurekaBench task.
func HeurekaPrompt(name string) string {
	return "# " + name + ` (HeurekaBench)

You are an AI co-scientist. The dataset is in public/data/. The questions are in
public/questions.jsonl, one JSON object a line: {"id", "oeq", "mcq": {"question", "options": {"A": …}}}.
Analyse the data and answer every question in both forms. Write answers.jsonl to your output
folder, one line per question: {"id": "…", "mcq": "A,C", "oeq": "your findings"}. The MCQ may have
several correct options; list every letter you find correct. The open-ended answer is judged
against the gold finding's atomic facts (1–5); extra findings that do not contradict it are fine.
`
}

// writeBundle writes files (and the data folder under public/data/) into a fresh folder
// beside out and renames it onto out at the end, as ImportAIRS does.
func writeBundle(out string, files map[string][]byte, dataDir string) error {
	if err := checkTarget(out, "--out"); err != nil {
		return err
	}
	out = filepath.Clean(out)
	undoParents, err := makeParents(filepath.Dir(out))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".import-")
	if err != nil {
		undoParents()
		return err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
			undoParents()
		}
	}()
	for _, d := range []string{PublicDir, PrivateDir} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	if dataDir != "" {
		if err := dataFolder(dataDir); err != nil {
			return fmt.Errorf("--data %s: %w", dataDir, err)
		}
		if err := CopyTree(dataDir, filepath.Join(tmp, filepath.FromSlash(HeurekaDataDir))); err != nil {
			return fmt.Errorf("--data %s: %w", dataDir, err)
		}
	}
	for _, rel := range sortedKeys(files) {
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeFileSync(p, files[rel]); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	b, err := Open(tmp)
	if err != nil {
		return fmt.Errorf("the result is not a valid bundle: %w", err)
	}
	if probs := checkHeurekaBundle(b); len(probs) > 0 {
		return fmt.Errorf("the result fails the HeurekaBench check: %s", strings.Join(probs, "; "))
	}
	if fi, err := os.Lstat(out); err == nil && fi.IsDir() {
		if err := os.Remove(out); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		return err
	}
	ok = true
	return syncDir(filepath.Dir(out))
}

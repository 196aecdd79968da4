package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FormatVersion is the version of the bundle format this package reads and writes
// (docs/bundle-format.md). A task.yaml may carry it as `format`; absent means 1. Format 2
// adds sealed bundles (private.age); a format-1 bundle reads as before.
const FormatVersion = 2

// Meta is task.yaml. Keys are snake_case. Fields this version does not know are kept in
// Extra (at every level) and written back unchanged, so an older node re-saving a newer
// task.yaml loses nothing.
type Meta struct {
	Format              int        `yaml:"format,omitempty" json:"format,omitempty"`
	Name                string     `yaml:"name" json:"name"`
	Version             string     `yaml:"version" json:"version"`
	Category            string     `yaml:"category" json:"category"`
	ResearchProblem     string     `yaml:"research_problem" json:"research_problem"`
	Dataset             Dataset    `yaml:"dataset" json:"dataset"`
	Metric              Metric     `yaml:"metric" json:"metric"`
	ScoringColumn       StringList `yaml:"scoring_column" json:"scoring_column"`
	Submission          Submission `yaml:"submission" json:"submission"`
	SOTA                SOTA       `yaml:"sota" json:"sota"`
	EstimatedWorstScore *float64   `yaml:"estimated_worst_score,omitempty" json:"estimated_worst_score,omitempty"`
	Limits              Limits     `yaml:"limits" json:"limits"`
	Evaluator           Evaluator  `yaml:"evaluator" json:"evaluator"`
	// Benchmark is "" or "airs" for an AIRS-Bench-style task, "heureka" for a HeurekaBench
	// bundle, which then has Heureka (heureka.go, docs/bundle-format.md §8).
	Benchmark string         `yaml:"benchmark,omitempty" json:"benchmark,omitempty"`
	Heureka   *HeurekaConfig `yaml:"heureka,omitempty" json:"heureka,omitempty"`
	Extra     map[string]any `yaml:",inline" json:"-"`
}

// Dataset names where the task's data comes from (a Hugging Face dataset for AIRS-Bench).
type Dataset struct {
	ID     string         `yaml:"id" json:"id"`
	Config string         `yaml:"config,omitempty" json:"config,omitempty"`
	Splits Splits         `yaml:"splits,omitempty" json:"splits"`
	Extra  map[string]any `yaml:",inline" json:"-"`
}

// Splits names the upstream splits the public and private data were cut from.
type Splits struct {
	Train string         `yaml:"train,omitempty" json:"train,omitempty"`
	Test  string         `yaml:"test,omitempty" json:"test,omitempty"`
	Extra map[string]any `yaml:",inline" json:"-"`
}

// Metric says how a submission is scored and which direction is better.
type Metric struct {
	Name          string         `yaml:"name" json:"name"`
	LowerIsBetter bool           `yaml:"lower_is_better" json:"lower_is_better"`
	OptimalScore  float64        `yaml:"optimal_score" json:"optimal_score"`
	Extra         map[string]any `yaml:",inline" json:"-"`
}

// Submission describes the file an agent must leave in its output folder.
type Submission struct {
	File string `yaml:"file" json:"file"`
	// Header is the expected CSV header; empty means "not checked".
	Header []string `yaml:"header,omitempty" json:"header,omitempty"`
	// Rows is the expected number of data rows (header excluded); 0 means "not checked".
	Rows  int            `yaml:"rows,omitempty" json:"rows,omitempty"`
	Extra map[string]any `yaml:",inline" json:"-"`
}

// SOTA is the best published human result, the anchor of the normalized score and the
// extra player in Elo.
type SOTA struct {
	Score float64        `yaml:"score" json:"score"`
	Paper string         `yaml:"paper,omitempty" json:"paper,omitempty"`
	URL   string         `yaml:"url,omitempty" json:"url,omitempty"`
	Year  int            `yaml:"year,omitempty" json:"year,omitempty"`
	Venue string         `yaml:"venue,omitempty" json:"venue,omitempty"`
	Extra map[string]any `yaml:",inline" json:"-"`
}

// Limits bound one agent run. Zero means "the node's default".
type Limits struct {
	WallClockSeconds int64   `yaml:"wall_clock_seconds,omitempty" json:"wall_clock_seconds,omitempty"`
	GPUs             int     `yaml:"gpus,omitempty" json:"gpus,omitempty"`
	MemoryBytes      int64   `yaml:"memory_bytes,omitempty" json:"memory_bytes,omitempty"`
	CPUs             float64 `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	PIDs             int64   `yaml:"pids,omitempty" json:"pids,omitempty"`
	// OutputBytes bounds the agent's output folder (0: the runner's default, 1 GiB).
	OutputBytes int64          `yaml:"output_bytes,omitempty" json:"output_bytes,omitempty"`
	Extra       map[string]any `yaml:",inline" json:"-"`
}

// Evaluator says how a submission is scored: a built-in metric over a labels CSV in the
// bundle, or a container image (by digest) running Command with private/ mounted.
type Evaluator struct {
	Metric  string         `yaml:"metric,omitempty" json:"metric,omitempty"`
	Labels  string         `yaml:"labels,omitempty" json:"labels,omitempty"`
	Image   string         `yaml:"image,omitempty" json:"image,omitempty"`
	Command []string       `yaml:"command,omitempty" json:"command,omitempty"`
	Extra   map[string]any `yaml:",inline" json:"-"`
}

// StringList reads either a YAML string or a list of strings (AIRS-Bench writes
// scoring_column both ways).
type StringList []string

// UnmarshalYAML accepts a scalar or a sequence of scalars.
func (s *StringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			*s = nil
			return nil
		}
		*s = StringList{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(StringList, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return typeError(c, "expected a string, got a %s", kindName(c.Kind))
			}
			out = append(out, c.Value)
		}
		*s = out
		return nil
	}
	return typeError(n, "expected a string or a list of strings, got a %s", kindName(n.Kind))
}

// typeError reports a value of the wrong shape as yaml's own type errors are reported, so
// decoding goes on, and the error names the field at that line with the others.
func typeError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d col %d: ", n.Line, n.Column) + fmt.Sprintf(format, args...)}}
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// FieldError is one bad field of a task.yaml: Field is its dotted path
// (e.g. "metric.optimal_score"), Msg what is wrong and what is expected.
type FieldError struct {
	Field string
	Msg   string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Msg }

// ValidationError lists every bad field found, so a task author fixes them in one go.
type ValidationError struct {
	Source string // file name, if known
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	src := e.Source
	if src == "" {
		src = "task.yaml"
	}
	fmt.Fprintf(&b, "%s: %d invalid field(s):", src, len(e.Fields))
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.Error())
	}
	return b.String()
}

// maxMetaSize bounds task.yaml: it is small metadata, and a YAML alias bomb must not get
// a parser started on megabytes.
const maxMetaSize = 1 << 20

// ParseMeta decodes and validates a task.yaml. A *ValidationError lists each bad field.
func ParseMeta(data []byte) (*Meta, error) {
	m, present, err := decodeMeta(data)
	var typeErrs *ValidationError
	if errors.As(err, &typeErrs) && m != nil {
		// yaml keeps decoding past a value of the wrong type, so the rest of the file can
		// still be checked: report every bad field in one go, not the type errors first
		// and the others only once those are fixed. A field with a type error counts as
		// absent for the checks, and its other complaints (e.g. "required") are dropped.
		for _, f := range typeErrs.Fields {
			delete(present, f.Field)
		}
		errs := typeErrs.Fields
		for _, f := range m.validate(present) {
			if !coveredBy(f.Field, typeErrs.Fields) {
				errs = append(errs, f)
			}
		}
		return nil, &ValidationError{Fields: errs}
	}
	if err != nil {
		return nil, err
	}
	if errs := m.validate(present); len(errs) > 0 {
		return nil, &ValidationError{Fields: errs}
	}
	return m, nil
}

// coveredBy tells whether field, a mapping above it or a key under it already has an
// error in errs.
func coveredBy(field string, errs []FieldError) bool {
	under := func(a, b string) bool { return strings.HasPrefix(a, b+".") || strings.HasPrefix(a, b+"[") }
	for _, e := range errs {
		if field == e.Field || under(field, e.Field) || under(e.Field, field) {
			return true
		}
	}
	return false
}

func decodeMeta(data []byte) (*Meta, map[string]bool, error) {
	if len(data) > maxMetaSize {
		return nil, nil, fmt.Errorf("task.yaml: %d bytes is too large (at most %d): task.yaml holds metadata only; put data under public/ or private/", len(data), maxMetaSize)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, fmt.Errorf("task.yaml: not valid YAML: %w", err)
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, nil, errors.New("task.yaml: empty document; expected a mapping with name, version, metric, … (see docs/bundle-format.md)")
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("task.yaml: expected a mapping at the top level, got a %s", kindName(doc.Kind))
	}
	if err := checkAliases(doc, 0); err != nil {
		return nil, nil, err
	}
	present := map[string]bool{}
	collectKeys(doc, "", present)
	var m Meta
	if err := doc.Decode(&m); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return &m, present, typeErrors(doc, err) // m: every field that did decode
		}
		return nil, nil, typeErrors(doc, err)
	}
	return &m, present, nil
}

// lineRe reads yaml's "line N: msg", and typeError's "line N col C: msg" (the column
// tells a flow collection from the scalars inside it on the same line).
var structRe = regexp.MustCompile(`into [A-Z]\w* \(line`)

var lineRe = regexp.MustCompile(`^line (\d+)(?: col (\d+))?: (.*)$`)

// typeErrors turns yaml's "line 15: cannot unmarshal !!str `x` into float64" into field
// errors naming the key (metric.optimal_score) and what type is expected.
func typeErrors(doc *yaml.Node, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("task.yaml: %s", cleanYAMLError(err))
	}
	byLine := map[string]string{}
	byPos := map[string]string{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := prefix + n.Content[i].Value
			v := n.Content[i+1]
			if _, ok := byLine[strconv.Itoa(v.Line)]; !ok || v.Kind == yaml.ScalarNode {
				byLine[strconv.Itoa(v.Line)] = k
			}
			byPos[strconv.Itoa(v.Line)+":"+strconv.Itoa(v.Column)] = k
			walk(v, k+".")
		}
	}
	walk(doc, "")
	ve := &ValidationError{}
	for _, e := range te.Errors {
		field, msg := "task.yaml", e
		if m := lineRe.FindStringSubmatch(e); m != nil {
			if k, ok := byPos[m[1]+":"+m[2]]; ok && m[2] != "" {
				field = k
			} else if k, ok := byLine[m[1]]; ok {
				field = k
			}
			msg = m[3] + " (line " + m[1] + ")"
		}
		msg = strings.ReplaceAll(msg, "tasks.", "")
		switch {
		case strings.Contains(msg, "into float64"):
			msg += "; expected a number"
		case strings.Contains(msg, "into int"):
			msg += "; expected a whole number"
		case strings.Contains(msg, "into bool"):
			msg += "; expected true or false"
		case strings.Contains(msg, "into string"):
			msg += "; expected a string"
		case structRe.MatchString(msg):
			msg += "; expected a mapping of its keys (docs/bundle-format.md §3)"
		}
		ve.Fields = append(ve.Fields, FieldError{Field: field, Msg: msg})
	}
	return ve
}

// checkAliases refuses YAML aliases: a task.yaml never needs them and they are the
// billion-laughs vector.
func checkAliases(n *yaml.Node, depth int) error {
	if depth > 64 {
		return fmt.Errorf("task.yaml: nested more than 64 levels deep")
	}
	if n.Kind == yaml.AliasNode {
		return fmt.Errorf("task.yaml: line %d: YAML aliases (*name) are not allowed; write the value out", n.Line)
	}
	for _, c := range n.Content {
		if err := checkAliases(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func collectKeys(n *yaml.Node, prefix string, out map[string]bool) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := prefix + n.Content[i].Value
		v := n.Content[i+1]
		// `lower_is_better:` with no value (or ~, null) decodes as false/0: count it as
		// missing, so it is reported rather than read as a silent default.
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		out[k] = true
		collectKeys(v, k+".", out)
	}
}

func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: unmarshal errors:\n  ")
	s = strings.ReplaceAll(s, "\n  ", "; ")
	s = strings.ReplaceAll(s, "tasks.", "")
	return s
}

var (
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	digestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// validate returns every problem with m. present holds the dotted keys the YAML had, to
// tell "0" from "missing" for numbers that may legitimately be zero.
func (m *Meta) validate(present map[string]bool) []FieldError {
	var errs []FieldError
	bad := func(field, msg string, args ...any) {
		errs = append(errs, FieldError{Field: field, Msg: fmt.Sprintf(msg, args...)})
	}
	if m.Format < 0 || m.Format > FormatVersion {
		bad("format", "version %d is not supported (this evalmesh reads format 1..%d); upgrade evalmesh", m.Format, FormatVersion)
	}
	if m.Name == "" {
		bad("name", "required: the task's name, e.g. MathQuestionAnsweringSVAMPAccuracy")
	} else if !nameRe.MatchString(m.Name) {
		bad("name", "%q: expected letters, digits, '.', '_' or '-' (at most 128, starting with a letter or digit)", m.Name)
	}
	if strings.TrimSpace(m.Version) == "" {
		bad("version", "required: the bundle's version string, e.g. \"1\"")
	}
	if strings.TrimSpace(m.Category) == "" {
		bad("category", "required: e.g. Math, Code, Time Series")
	}
	if strings.TrimSpace(m.ResearchProblem) == "" {
		bad("research_problem", "required: e.g. Math Question Answering")
	}
	if strings.TrimSpace(m.Dataset.ID) == "" {
		bad("dataset.id", "required: the dataset's identifier, e.g. ChilleD/SVAMP")
	}
	if strings.TrimSpace(m.Metric.Name) == "" {
		bad("metric.name", "required: the metric's name, e.g. Accuracy or MeanAbsoluteError")
	}
	if !present["metric.lower_is_better"] {
		bad("metric.lower_is_better", "required: true when smaller scores are better (errors), false otherwise")
	}
	if !present["metric.optimal_score"] {
		bad("metric.optimal_score", "required: the best possible score, e.g. 1.0 for accuracy, 0.0 for an error")
	} else if !finite(m.Metric.OptimalScore) {
		bad("metric.optimal_score", "must be a finite number")
	}
	if len(m.ScoringColumn) == 0 {
		bad("scoring_column", "required: the label column(s) of the test set, a string or a list")
	}
	for i, c := range m.ScoringColumn {
		if strings.TrimSpace(c) == "" {
			bad(fmt.Sprintf("scoring_column[%d]", i), "empty column name")
		}
	}
	if m.Submission.File == "" {
		bad("submission.file", "required: the file the agent writes, e.g. submission.csv")
	} else if err := checkRelName(m.Submission.File); err != nil || strings.Contains(m.Submission.File, "/") {
		bad("submission.file", "%q: expected a plain file name without folders, e.g. submission.csv", m.Submission.File)
	}
	for i, h := range m.Submission.Header {
		if h == "" {
			bad(fmt.Sprintf("submission.header[%d]", i), "empty column name")
		}
	}
	if m.Submission.Rows < 0 {
		bad("submission.rows", "%d: expected the number of data rows (>= 0; 0 means not checked)", m.Submission.Rows)
	}
	if !present["sota.score"] {
		bad("sota.score", "required: the best published score (the normalized score's anchor)")
	} else if !finite(m.SOTA.Score) {
		bad("sota.score", "must be a finite number")
	} else if finite(m.Metric.OptimalScore) && present["metric.optimal_score"] {
		if m.Metric.LowerIsBetter && m.SOTA.Score < m.Metric.OptimalScore ||
			!m.Metric.LowerIsBetter && m.SOTA.Score > m.Metric.OptimalScore {
			bad("sota.score", "%v is better than metric.optimal_score %v; check metric.lower_is_better", m.SOTA.Score, m.Metric.OptimalScore)
		}
	}
	if m.SOTA.Year != 0 && (m.SOTA.Year < 1900 || m.SOTA.Year > 2200) {
		bad("sota.year", "%d: expected a four-digit year", m.SOTA.Year)
	}
	if m.EstimatedWorstScore != nil && !finite(*m.EstimatedWorstScore) {
		bad("estimated_worst_score", "must be a finite number")
	}
	if m.Limits.WallClockSeconds < 0 {
		bad("limits.wall_clock_seconds", "%d: expected seconds >= 0 (0: node default)", m.Limits.WallClockSeconds)
	}
	if m.Limits.GPUs < 0 {
		bad("limits.gpus", "%d: expected a count >= 0", m.Limits.GPUs)
	}
	if m.Limits.MemoryBytes < 0 {
		bad("limits.memory_bytes", "%d: expected bytes >= 0 (0: node default)", m.Limits.MemoryBytes)
	}
	if m.Limits.CPUs < 0 || !finite(m.Limits.CPUs) {
		bad("limits.cpus", "%v: expected a number of cores >= 0, e.g. 8 or 0.5", m.Limits.CPUs)
	}
	if m.Limits.PIDs < 0 {
		bad("limits.pids", "%d: expected a count >= 0 (0: node default)", m.Limits.PIDs)
	}
	if m.Limits.OutputBytes < 0 {
		bad("limits.output_bytes", "%d: expected bytes >= 0 (0: 1 GiB)", m.Limits.OutputBytes)
	}
	ev := m.Evaluator
	if ev.Metric == "" && ev.Image == "" {
		bad("evaluator", "required: either evaluator.metric (a built-in metric, e.g. Accuracy) with evaluator.labels, or evaluator.image (sha256:… digest) with evaluator.command")
	}
	if ev.Image != "" {
		if !digestRe.MatchString(ev.Image) {
			bad("evaluator.image", "%q: expected an image digest sha256:<64 lowercase hex>, never a tag", ev.Image)
		}
		if len(ev.Command) == 0 {
			bad("evaluator.command", "required with evaluator.image: the argv to run, e.g. [python, /task/evaluate.py]")
		}
	}
	if ev.Labels != "" {
		if err := checkRelPath(ev.Labels); err != nil {
			bad("evaluator.labels", "%q: %v; expected a path inside the bundle, e.g. private/labels.csv", ev.Labels, err)
		} else if !strings.HasPrefix(ev.Labels, "private/") {
			bad("evaluator.labels", "%q: labels must live under private/ so the agent never sees them", ev.Labels)
		}
	}
	return append(errs, m.validateHeureka()...)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// checkRelPath accepts a clean, relative, slash-separated path without "..".
func checkRelPath(p string) error {
	if p == "" {
		return errors.New("empty path")
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) {
		return errors.New("absolute path")
	}
	if strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return errors.New("backslash or NUL in path")
	}
	if path.Clean(p) != p {
		return errors.New("not a clean path")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." {
			return errors.New("'.' or '..' in path")
		}
	}
	return nil
}

func checkRelName(p string) error { return checkRelPath(p) }

// Marshal writes m as task.yaml, unknown fields included.
func (m *Meta) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LoadMeta reads DIR/task.yaml, or else converts DIR/metadata.yaml (an AIRS-Bench task
// folder), so `evalmesh score --tasks` works on both.
func LoadMeta(dir string) (*Meta, error) {
	p := filepath.Join(dir, "task.yaml")
	data, err := ReadRegular(p)
	if err == nil {
		m, err := ParseMeta(data)
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				ve.Source = p
				return nil, ve
			}
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return m, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ap := filepath.Join(dir, "metadata.yaml")
	data, err = ReadRegular(ap)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: neither task.yaml nor metadata.yaml found; expected an evalmesh bundle or an AIRS-Bench task folder", dir)
		}
		return nil, err
	}
	a, err := ParseAIRSMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ap, err)
	}
	m, err := a.ToMeta()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ap, err)
	}
	return m, nil
}

// sortedKeys is a helper for deterministic output of maps.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

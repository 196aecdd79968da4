package tasks

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// AIRSMetadata is an upstream AIRS-Bench metadata.yaml (airsbench/tasks/rad/<Task>/). Its
// values are irregular in the wild (shape as "(4906,)", [1531], "300,1" or a list; a
// requirements list written as the string "-sktime"), so the loose ones are read into
// yaml.Node and normalised by methods.
type AIRSMetadata struct {
	MetricLowerIsBetter                 bool            `yaml:"metric_lower_is_better"`
	FileExportGlobs                     StringList      `yaml:"file_export_globs"`
	ContainerPythonRequirements         Requirements    `yaml:"container_python_requirements"`
	EvaluateContainerPythonRequirements Requirements    `yaml:"evaluate_container_python_requirements"`
	PrepareCodePythonRequirements       Requirements    `yaml:"prepare_code_python_requirements"`
	LoggingInfo                         AIRSLoggingInfo `yaml:"logging_info"`
	Extra                               map[string]any  `yaml:",inline"`
}

// AIRSLoggingInfo is the logging_info block of an AIRS-Bench metadata.yaml.
type AIRSLoggingInfo struct {
	Name              string         `yaml:"name"`
	Dataset           string         `yaml:"dataset"`
	Config            string         `yaml:"config"`
	TrainSplit        string         `yaml:"train_split"`
	TestSplit         string         `yaml:"test_split"`
	InputColumns      StringList     `yaml:"input_columns"`
	ScoringColumn     StringList     `yaml:"scoring_column"`
	Shape             Shape          `yaml:"shape"`
	CustomGoldLabels  bool           `yaml:"custom_gold_labels"`
	CustomRadClass    bool           `yaml:"custom_rad_class"`
	Metric            string         `yaml:"metric"`
	AdditionalMetrics yaml.Node      `yaml:"additional_metrics"`
	Category          string         `yaml:"category"`
	ResearchProblem   string         `yaml:"research_problem"`
	OutputType        string         `yaml:"output_type"`
	SOTA              []AIRSSOTA     `yaml:"sota"`
	DatasetPaperURL   string         `yaml:"dataset_paper_url"`
	EstimatedWorst    *float64       `yaml:"estimated_worst_score"`
	OptimalScore      *float64       `yaml:"optimal_score"`
	Extra             map[string]any `yaml:",inline"`
}

// AIRSSOTA is one entry of logging_info.sota; the first is the one AIRS-Bench uses.
type AIRSSOTA struct {
	PaperTitle string         `yaml:"sota_paper_title"`
	PaperURL   string         `yaml:"sota_paper_url"`
	Score      float64        `yaml:"sota_score"`
	Notes      string         `yaml:"sota_notes"`
	Year       int            `yaml:"sota_year"`
	Venue      string         `yaml:"sota_venue"`
	Extra      map[string]any `yaml:",inline"`
}

// Shape is logging_info.shape: the test set's dimensions. Raw keeps the upstream spelling.
type Shape struct {
	Dims []int
	Raw  string
}

var shapeSplit = regexp.MustCompile(`[\s,]+`)

// UnmarshalYAML accepts "(4906,)", "(19210,2)", "300,1", [1531], [15857, 2] and block lists.
func (s *Shape) UnmarshalYAML(n *yaml.Node) error {
	var parts []string
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		s.Raw = n.Value
		v := strings.TrimSpace(n.Value)
		v = strings.TrimPrefix(strings.TrimPrefix(v, "("), "[")
		v = strings.TrimSuffix(strings.TrimSuffix(v, ")"), "]")
		parts = shapeSplit.Split(strings.TrimSpace(v), -1)
	case yaml.SequenceNode:
		var raw []string
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: shape: expected numbers, got a %s", c.Line, kindName(c.Kind))
			}
			parts = append(parts, c.Value)
			raw = append(raw, strings.TrimSpace(c.Value))
		}
		s.Raw = "[" + strings.Join(raw, ", ") + "]"
	default:
		return fmt.Errorf("line %d: shape: expected a list of numbers or a string like (300,1), got a %s", n.Line, kindName(n.Kind))
	}
	for _, p := range parts {
		if p == "" {
			continue
		}
		d, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || d < 0 {
			return fmt.Errorf("line %d: shape %q: %q is not a non-negative integer", n.Line, s.Raw, p)
		}
		s.Dims = append(s.Dims, d)
	}
	return nil
}

// Requirements is a list of pip requirement strings. Upstream once wrote "-sktime" (a
// YAML list item missing its space), so a scalar is split on commas/whitespace and a
// leading "-" dropped.
type Requirements []string

// UnmarshalYAML accepts a list, or a scalar read leniently.
func (r *Requirements) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		for _, p := range shapeSplit.Split(n.Value, -1) {
			p = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(p), "-"))
			if p != "" {
				*r = append(*r, p)
			}
		}
		return nil
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: requirements: expected strings, got a %s", c.Line, kindName(c.Kind))
			}
			*r = append(*r, strings.TrimSpace(c.Value))
		}
		return nil
	}
	return fmt.Errorf("line %d: requirements: expected a list of strings, got a %s", n.Line, kindName(n.Kind))
}

// ParseAIRSMetadata decodes an AIRS-Bench metadata.yaml and checks that the fields the
// conversion needs are there.
func ParseAIRSMetadata(data []byte) (*AIRSMetadata, error) {
	if len(data) > maxMetaSize {
		return nil, fmt.Errorf("metadata.yaml: %d bytes is too large (at most %d)", len(data), maxMetaSize)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("metadata.yaml: not valid YAML: %w", err)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("metadata.yaml: expected a mapping with metric_lower_is_better and logging_info")
	}
	if err := checkAliases(root.Content[0], 0); err != nil {
		return nil, fmt.Errorf("metadata.yaml: %v", strings.TrimPrefix(err.Error(), "task.yaml: "))
	}
	var a AIRSMetadata
	if err := root.Content[0].Decode(&a); err != nil {
		return nil, fmt.Errorf("metadata.yaml: %s", cleanYAMLError(err))
	}
	var errs []FieldError
	li := a.LoggingInfo
	if li.Name == "" {
		errs = append(errs, FieldError{"logging_info.name", "required: the task folder's name"})
	}
	if li.Metric == "" {
		errs = append(errs, FieldError{"logging_info.metric", "required: the metric name, e.g. Accuracy"})
	}
	if len(li.SOTA) == 0 {
		errs = append(errs, FieldError{"logging_info.sota", "required: a list of {sota_paper_title, sota_score, sota_year, …}; the first entry is used"})
	}
	if len(errs) > 0 {
		return nil, &ValidationError{Source: "metadata.yaml", Fields: errs}
	}
	return &a, nil
}

// AIRSDefaultWallClockSeconds is AIRS-Bench's budget per run (24 h on one GPU).
const AIRSDefaultWallClockSeconds = 86400

// ToMeta maps the upstream fields onto task.yaml (docs/bundle-format.md). What has no evalmesh
// field (input columns, requirements, output type, …) is kept under the `airs` key.
func (a *AIRSMetadata) ToMeta() (*Meta, error) {
	li := a.LoggingInfo
	m := &Meta{
		Format:          1, // an unsealed bundle is format 1 whatever this build reads (its CID stays)
		Name:            li.Name,
		Version:         "1",
		Category:        li.Category,
		ResearchProblem: li.ResearchProblem,
		Dataset: Dataset{
			ID:     li.Dataset,
			Config: li.Config,
			Splits: Splits{Train: li.TrainSplit, Test: li.TestSplit},
		},
		Metric: Metric{
			Name:          li.Metric,
			LowerIsBetter: a.MetricLowerIsBetter,
		},
		ScoringColumn:       li.ScoringColumn,
		EstimatedWorstScore: li.EstimatedWorst,
		Limits:              Limits{WallClockSeconds: AIRSDefaultWallClockSeconds, GPUs: 1},
		Evaluator:           Evaluator{Metric: li.Metric},
	}
	if li.OptimalScore != nil {
		m.Metric.OptimalScore = *li.OptimalScore
	} else if !a.MetricLowerIsBetter {
		m.Metric.OptimalScore = 1
	}
	m.Submission.File = "submission.csv"
	if len(a.FileExportGlobs) > 0 && !strings.ContainsAny(a.FileExportGlobs[0], "*?[") {
		m.Submission.File = a.FileExportGlobs[0]
	}
	m.Submission.Header, m.ScoringColumn = airsSubmissionColumns(li)
	if len(li.Shape.Dims) > 0 {
		m.Submission.Rows = li.Shape.Dims[0]
	}
	s := li.SOTA[0]
	m.SOTA = SOTA{Score: s.Score, Paper: s.PaperTitle, URL: s.PaperURL, Year: s.Year, Venue: s.Venue}
	if m.Category == "" {
		m.Category = "Uncategorized"
	}
	if m.ResearchProblem == "" {
		m.ResearchProblem = m.Category
	}
	if m.Dataset.ID == "" {
		m.Dataset.ID = "unknown"
	}
	if len(m.ScoringColumn) == 0 {
		m.ScoringColumn = StringList{"label"}
	}
	if len(m.Submission.Header) == 0 {
		m.Submission.Header = append([]string(nil), m.ScoringColumn...)
	}

	airs := map[string]any{
		"output_type":        li.OutputType,
		"input_columns":      []string(li.InputColumns),
		"shape":              li.Shape.Raw,
		"custom_gold_labels": li.CustomGoldLabels,
		"custom_rad_class":   li.CustomRadClass,
	}
	if !equalStrings(m.ScoringColumn, li.ScoringColumn) && len(li.ScoringColumn) > 0 {
		airs["scoring_column"] = []string(li.ScoringColumn)
	}
	if li.DatasetPaperURL != "" {
		airs["dataset_paper_url"] = li.DatasetPaperURL
	}
	if li.AdditionalMetrics.Kind == yaml.ScalarNode && li.AdditionalMetrics.Tag != "!!null" {
		airs["additional_metrics"] = li.AdditionalMetrics.Value
	}
	if len(a.ContainerPythonRequirements) > 0 {
		airs["container_python_requirements"] = []string(a.ContainerPythonRequirements)
	}
	if len(a.EvaluateContainerPythonRequirements) > 0 {
		airs["evaluate_container_python_requirements"] = []string(a.EvaluateContainerPythonRequirements)
	}
	if len(a.PrepareCodePythonRequirements) > 0 {
		airs["prepare_code_python_requirements"] = []string(a.PrepareCodePythonRequirements)
	}
	if len(li.SOTA) > 1 {
		var more []map[string]any
		for _, s := range li.SOTA[1:] {
			more = append(more, map[string]any{"score": s.Score, "paper": s.PaperTitle, "url": s.PaperURL, "year": s.Year, "venue": s.Venue})
		}
		airs["more_sota"] = more
	}
	if s.Notes != "" {
		airs["sota_notes"] = s.Notes
	}
	m.Extra = map[string]any{"airs": airs}

	// Round-trip through the validator, so an import never writes a task.yaml that
	// evalmesh itself would refuse.
	out, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	v, err := ParseMeta(out)
	if err != nil {
		return nil, fmt.Errorf("converted task.yaml is invalid: %w", err)
	}
	return v, nil
}

// airsSubmissionColumns returns the header a submission must have and the columns scored,
// as the task's upstream evaluate.py reads them (docs/scoring.md §6, "Submission headers vary").
// Most tasks' submission is the single scoring column (Answer, label, label_target, …),
// but three are not: Pass@k tasks (APPS) submit one outcome column per attempt,
// code1..codeK, scored against the labels' test cases (scoring_column input_output);
// MRR (CodeXGlue) submits query,rankings, scored against the labels' id; DuoRC submits
// has_answer,answer, both compared (upstream's scoring_column, answers, names the
// Hugging Face column the two were derived from). The second shape dimension, where
// upstream writes one, is that header's width (APPS [5000, 5], CodeXGlue (19210,2),
// DuoRC [15857, 2]).
func airsSubmissionColumns(li AIRSLoggingInfo) (header []string, scoring StringList) {
	scoring = append(StringList(nil), li.ScoringColumn...)
	metric := strings.ToLower(strings.TrimSpace(li.Metric))
	switch {
	case strings.HasPrefix(metric, "pass@"):
		k, err := strconv.Atoi(strings.TrimPrefix(metric, "pass@"))
		if err != nil || k < 1 || k > 1000 {
			return nil, scoring
		}
		for i := 1; i <= k; i++ {
			header = append(header, "code"+strconv.Itoa(i))
		}
		return header, scoring
	case metric == "mrr":
		return []string{"query", "rankings"}, scoring
	case li.Name == "QuestionAnsweringDuoRCAccuracy":
		return []string{"has_answer", "answer"}, StringList{"has_answer", "answer"}
	}
	return append([]string(nil), li.ScoringColumn...), scoring
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

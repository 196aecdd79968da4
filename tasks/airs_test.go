package tasks

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Every real AIRS-Bench metadata.yaml imports, and the converted task.yaml carries the
// values the leaderboard needs (docs/scoring.md §6).
func TestAIRSAllTwentyFixtures(t *testing.T) {
	want := map[string]struct {
		metric string
		lower  bool
		sota   float64
		worst  float64
		rows   int
	}{
		"CodeGenerationAPPSPassAt5":                            {"Pass@5", false, 0.187, 0, 5000},
		"CodeRetrievalCodeXGlueMRR":                            {"MRR", false, 0.6113, 0, 19210},
		"CoreferenceResolutionSuperGLUEWSCAccuracy":            {"Accuracy", false, 0.962, 0.3653846154, 104},
		"CoreferenceResolutionWinograndeAccuracy":              {"Accuracy", false, 0.854, 0.4664562, 1531},
		"TextualSimilaritySickSpearmanCorrelation":             {"SpearmanCorrelation", false, 0.854, -0.5870786, 4906},
		"CvMolecularPropertyPredictionQm9MeanAbsoluteError":    {"MeanAbsoluteError", true, 0.021, 132.63319396972656, 10000},
		"GMolecularPropertyPredictionQm9MeanAbsoluteError":     {"MeanAbsoluteError", true, 7.53, 11185110, 10000},
		"R2AbsMolecularPropertyPredictionQm9MeanAbsoluteError": {"MeanAbsoluteError", true, 0.033, 6536.567, 10000},
		"U0MolecularPropertyPredictionQm9MeanAbsoluteError":    {"MeanAbsoluteError", true, 5.83, 24183970, 10000},
		"GraphRegressionZincMae":                               {"MAE", true, 0.017, 9.699924, 5000},
		"MathQuestionAnsweringSVAMPAccuracy":                   {"Accuracy", false, 0.942, 0, 300},
		"QuestionAnsweringDuoRCAccuracy":                       {"Accuracy", false, 0.4648, 0, 15857},
		"QuestionAnsweringEli5RougeL":                          {"RougeL", false, 0.269, 0.002451528, 10000},
		"QuestionAnsweringFinqaAccuracy":                       {"Accuracy", false, 0.7803, 0, 1147},
		"ReadingComprehensionSquadExactMatch":                  {"ExactMatch", false, 0.858, 0, 10570},
		"SentimentAnalysisYelpReviewFullAccuracy":              {"Accuracy", false, 0.778, 0.18208, 50000},
		"TextualClassificationSickAccuracy":                    {"Accuracy", false, 0.905, 0.1451284, 4906},
		"TimeSeriesForecastingKaggleWebTrafficMASE":            {"MASE", true, 0.622, 502962963078372, 145063},
		"TimeSeriesForecastingRideshareMAE":                    {"MAE", true, 1.185, 30.2249, 2304},
		"TimeSeriesForecastingSolarWeeklyMAE":                  {"MAE", true, 576.35, 34761.99, 137},
	}
	dirs, err := filepath.Glob("testdata/airs-bench/*/metadata.yaml")
	if err != nil || len(dirs) != 20 {
		t.Fatalf("want 20 fixtures, found %d (%v)", len(dirs), err)
	}
	for _, p := range dirs {
		name := filepath.Base(filepath.Dir(p))
		t.Run(name, func(t *testing.T) {
			m, err := LoadMeta(filepath.Dir(p))
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[name]
			if !ok {
				t.Fatalf("unexpected fixture %s", name)
			}
			if m.Name != name || m.Metric.Name != w.metric || m.Metric.LowerIsBetter != w.lower || m.SOTA.Score != w.sota {
				t.Errorf("got name %s metric %s lower %v sota %v", m.Name, m.Metric.Name, m.Metric.LowerIsBetter, m.SOTA.Score)
			}
			if m.EstimatedWorstScore == nil || *m.EstimatedWorstScore != w.worst {
				t.Errorf("estimated_worst_score %v, want %v", m.EstimatedWorstScore, w.worst)
			}
			if m.Submission.Rows != w.rows {
				t.Errorf("rows %d, want %d (from shape %v)", m.Submission.Rows, w.rows, m.Extra["airs"])
			}
			wantOpt := 1.0
			if w.lower {
				wantOpt = 0
			}
			if m.Metric.OptimalScore != wantOpt {
				t.Errorf("optimal_score %v, want %v", m.Metric.OptimalScore, wantOpt)
			}
			if len(m.ScoringColumn) == 0 || m.SOTA.Paper == "" || m.SOTA.Year == 0 || m.Category == "" {
				t.Errorf("incomplete: %+v", m)
			}
		})
	}
}

func TestAIRSShapeForms(t *testing.T) {
	cases := []struct {
		src  string
		dims []int
	}{
		{`(4906,)`, []int{4906}},
		{`(19210,2)`, []int{19210, 2}},
		{`"300,1"`, []int{300, 1}},
		{`300,1`, []int{300, 1}},
		{`[1531]`, []int{1531}},
		{`[15857, 2]`, []int{15857, 2}},
		{"\n  - 5000 \n  - 5", []int{5000, 5}},
		{`null`, nil},
	}
	for _, tc := range cases {
		var v struct {
			Shape Shape `yaml:"shape"`
		}
		if err := yaml.Unmarshal([]byte("shape: "+tc.src+"\n"), &v); err != nil {
			t.Errorf("%s: %v", tc.src, err)
			continue
		}
		if !reflect.DeepEqual(v.Shape.Dims, tc.dims) {
			t.Errorf("%s: dims %v, want %v", tc.src, v.Shape.Dims, tc.dims)
		}
	}
	for _, bad := range []string{`(abc)`, `{a: 1}`, `[-1]`} {
		var v struct {
			Shape Shape `yaml:"shape"`
		}
		if err := yaml.Unmarshal([]byte("shape: "+bad+"\n"), &v); err == nil {
			t.Errorf("%s: accepted as %v", bad, v.Shape.Dims)
		}
	}
}

// The KaggleWebTraffic fixture writes `prepare_code_python_requirements: -sktime`.
func TestAIRSMalformedRequirements(t *testing.T) {
	data, err := os.ReadFile("testdata/airs-bench/TimeSeriesForecastingKaggleWebTrafficMASE/metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAIRSMetadata(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual([]string(a.PrepareCodePythonRequirements), []string{"sktime"}) {
		t.Errorf("got %q", a.PrepareCodePythonRequirements)
	}
	if !reflect.DeepEqual([]string(a.LoggingInfo.ScoringColumn), []string{"label_target"}) {
		t.Errorf("scoring column list: %q", a.LoggingInfo.ScoringColumn)
	}
}

func TestAIRSMissingFields(t *testing.T) {
	for name, src := range map[string]string{
		"no sota":     "metric_lower_is_better: false\nlogging_info:\n  name: X\n  metric: Accuracy\n",
		"no metric":   "logging_info:\n  name: X\n  sota: [{sota_score: 0.5}]\n",
		"not mapping": "[1, 2]",
		"bad shape":   "logging_info:\n  name: X\n  metric: A\n  shape: {x: 1}\n  sota: [{sota_score: 0.5}]\n",
	} {
		if _, err := ParseAIRSMetadata([]byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The imported submission header is what the upstream evaluate.py reads (docs/scoring.md §6:
// APPS code1..code5, CodeXGlue query,rankings, DuoRC has_answer,answer; else the scoring
// column), and where upstream's shape has a second dimension it is the header's width.
func TestAIRSSubmissionHeaders(t *testing.T) {
	special := map[string]struct{ header, scoring []string }{
		"CodeGenerationAPPSPassAt5":      {[]string{"code1", "code2", "code3", "code4", "code5"}, []string{"input_output"}},
		"CodeRetrievalCodeXGlueMRR":      {[]string{"query", "rankings"}, []string{"id"}},
		"QuestionAnsweringDuoRCAccuracy": {[]string{"has_answer", "answer"}, []string{"has_answer", "answer"}},
	}
	dirs, _ := filepath.Glob("testdata/airs-bench/*/metadata.yaml")
	if len(dirs) != 20 {
		t.Fatalf("want 20 fixtures, found %d", len(dirs))
	}
	for _, p := range dirs {
		name := filepath.Base(filepath.Dir(p))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		a, err := ParseAIRSMetadata(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		m, err := a.ToMeta()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantH, wantS := []string(a.LoggingInfo.ScoringColumn), []string(a.LoggingInfo.ScoringColumn)
		if s, ok := special[name]; ok {
			wantH, wantS = s.header, s.scoring
			if up := fmt.Sprint(m.Extra["airs"].(map[string]any)["scoring_column"]); name == "QuestionAnsweringDuoRCAccuracy" && up != "[answers]" {
				t.Errorf("%s: upstream scoring_column not kept under airs: %v", name, up)
			}
		}
		if !reflect.DeepEqual(m.Submission.Header, wantH) || !reflect.DeepEqual([]string(m.ScoringColumn), wantS) {
			t.Errorf("%s: header %q scoring %q, want %q %q", name, m.Submission.Header, m.ScoringColumn, wantH, wantS)
		}
		if d := a.LoggingInfo.Shape.Dims; len(d) == 2 && d[1] != len(m.Submission.Header) {
			t.Errorf("%s: shape %v says %d submission columns, header has %d", name, d, d[1], len(m.Submission.Header))
		}
	}
}

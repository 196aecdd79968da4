package tasks

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readTestMeta(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/task.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseMetaComplete(t *testing.T) {
	m, err := ParseMeta(readTestMeta(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "MathQuestionAnsweringSVAMPAccuracy" || m.Metric.Name != "Accuracy" || m.Metric.OptimalScore != 1 || m.Metric.LowerIsBetter {
		t.Errorf("metric/name not read: %+v", m)
	}
	if !reflect.DeepEqual([]string(m.ScoringColumn), []string{"Answer"}) {
		t.Errorf("scoring_column as a single string: got %v", m.ScoringColumn)
	}
	if m.SOTA.Score != 0.942 || m.SOTA.Year != 2026 || m.Submission.Rows != 300 {
		t.Errorf("sota/submission: %+v %+v", m.SOTA, m.Submission)
	}
	if m.Limits.CPUs != 8 || m.Limits.MemoryBytes != 64<<30 || m.Limits.PIDs != 4096 {
		t.Errorf("limits: %+v", m.Limits)
	}
	if m.EstimatedWorstScore == nil || *m.EstimatedWorstScore != 0 {
		t.Errorf("estimated_worst_score: %v", m.EstimatedWorstScore)
	}
	if _, ok := m.Extra["future_field"]; !ok {
		t.Errorf("unknown field not kept: %v", m.Extra)
	}
}

// Unknown fields survive a parse → marshal → parse round trip.
func TestMetaRoundTripKeepsUnknownFields(t *testing.T) {
	m, err := ParseMeta(readTestMeta(t))
	if err != nil {
		t.Fatal(err)
	}
	m.Metric.Extra = map[string]any{"tolerance": 1e-6}
	out, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	m2, err := ParseMeta(out)
	if err != nil {
		t.Fatalf("re-parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Errorf("round trip changed the metadata:\n%+v\n%+v", m, m2)
	}
	if !strings.Contains(string(out), "future_field:") || !strings.Contains(string(out), "tolerance:") {
		t.Errorf("unknown fields lost:\n%s", out)
	}
}

func TestParseMetaErrorsNameFields(t *testing.T) {
	base := string(readTestMeta(t))
	cases := []struct {
		name   string
		edit   func(string) string
		fields []string // every one must be named
	}{
		{"missing name", func(s string) string { return strings.Replace(s, "name: MathQuestionAnsweringSVAMPAccuracy\n", "", 1) }, []string{"name"}},
		{"bad name", func(s string) string {
			return strings.Replace(s, "name: MathQuestionAnsweringSVAMPAccuracy", "name: ../etc", 1)
		}, []string{"name"}},
		{"missing optimal and direction", func(s string) string {
			s = strings.Replace(s, "  lower_is_better: false\n", "", 1)
			return strings.Replace(s, "  optimal_score: 1.0\n", "", 1)
		}, []string{"metric.lower_is_better", "metric.optimal_score"}},
		{"null direction and optimum", func(s string) string {
			s = strings.Replace(s, "  lower_is_better: false\n", "  lower_is_better:\n", 1)
			return strings.Replace(s, "  optimal_score: 1.0\n", "  optimal_score: ~\n", 1)
		}, []string{"metric.lower_is_better", "metric.optimal_score"}},
		{"sota better than optimum", func(s string) string { return strings.Replace(s, "score: 0.942", "score: 1.5", 1) }, []string{"sota.score"}},
		{"negative limits", func(s string) string {
			s = strings.Replace(s, "gpus: 1", "gpus: -1", 1)
			return strings.Replace(s, "cpus: 8", "cpus: -2", 1)
		}, []string{"limits.gpus", "limits.cpus"}},
		{"submission path", func(s string) string {
			return strings.Replace(s, "file: submission.csv", "file: ../submission.csv", 1)
		}, []string{"submission.file"}},
		{"labels outside private", func(s string) string {
			return strings.Replace(s, "labels: private/labels.csv", "labels: public/labels.csv", 1)
		}, []string{"evaluator.labels"}},
		{"labels escaping", func(s string) string {
			return strings.Replace(s, "labels: private/labels.csv", "labels: private/../../x", 1)
		}, []string{"evaluator.labels"}},
		{"image by tag", func(s string) string {
			return strings.Replace(s, "  labels: private/labels.csv\n", "  labels: private/labels.csv\n  image: python:3.12\n", 1)
		}, []string{"evaluator.image", "evaluator.command"}},
		{"no evaluator", func(s string) string {
			return strings.Replace(s, "evaluator:\n  metric: Accuracy\n  labels: private/labels.csv\n", "", 1)
		}, []string{"evaluator"}},
		{"future format", func(s string) string { return strings.Replace(s, "format: 1", "format: 9", 1) }, []string{"format"}},
		{"several at once", func(s string) string {
			s = strings.Replace(s, "category: Math\n", "", 1)
			return strings.Replace(s, "  id: ChilleD/SVAMP\n", "", 1)
		}, []string{"category", "dataset.id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.edit(base)
			if src == base {
				t.Fatal("edit did not apply")
			}
			_, err := ParseMeta([]byte(src))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a ValidationError, got %v", err)
			}
			for _, f := range tc.fields {
				found := false
				for _, fe := range ve.Fields {
					if fe.Field == f && fe.Msg != "" {
						found = true
					}
				}
				if !found {
					t.Errorf("field %s not named in:\n%v", f, err)
				}
			}
		})
	}
}

func TestParseMetaRefusesBadYAML(t *testing.T) {
	cases := map[string]string{
		"empty":        "",
		"list":         "- a\n- b\n",
		"alias bomb":   "a: &a [x, x]\nb: &b [*a, *a]\nname: *b\n",
		"wrong type":   "name: [1, 2]\n",
		"syntax error": "name: \"unterminated\n",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseMeta([]byte(src)); err == nil {
				t.Fatal("accepted")
			} else if !strings.Contains(err.Error(), "task.yaml") {
				t.Errorf("error does not say which file: %v", err)
			}
		})
	}
}

func TestLoadMeta(t *testing.T) {
	// An AIRS-Bench folder (metadata.yaml only) is converted.
	m, err := LoadMeta(svampDir)
	if err != nil || m.Name != "MathQuestionAnsweringSVAMPAccuracy" || m.Submission.Rows != 300 {
		t.Fatalf("AIRS folder: %+v %v", m, err)
	}
	// task.yaml wins over metadata.yaml.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "task.yaml"), readTestMeta(t), 0o644)
	os.WriteFile(filepath.Join(dir, "metadata.yaml"), []byte("garbage: ["), 0o644)
	if m, err := LoadMeta(dir); err != nil || m.Limits.PIDs != 4096 {
		t.Fatalf("task.yaml folder: %v", err)
	}
	// A bad task.yaml is reported with its path and field.
	os.WriteFile(filepath.Join(dir, "task.yaml"), []byte("name: x\n"), 0o644)
	if _, err := LoadMeta(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "task.yaml")) || !strings.Contains(err.Error(), "metric.name") {
		t.Fatalf("bad task.yaml: %v", err)
	}
	if _, err := LoadMeta(t.TempDir()); err == nil || !strings.Contains(err.Error(), "neither task.yaml nor metadata.yaml") {
		t.Fatalf("empty folder: %v", err)
	}
}

func TestOpenChecksLabelsFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "task.yaml"), readTestMeta(t), 0o644)
	os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("hi"), 0o644)
	os.Mkdir(filepath.Join(dir, "public"), 0o755)
	os.Mkdir(filepath.Join(dir, "private"), 0o755)
	_, err := Open(dir)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "evaluator.labels" {
		t.Fatalf("missing labels file: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "private", "labels.csv"), []byte("Answer\n1\n"), 0o644)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b.LabelsPath() != filepath.Join(dir, "private", "labels.csv") || b.PublicDir() != filepath.Join(dir, "public") ||
		b.PrivateDir() != filepath.Join(dir, "private") || b.PromptPath() != filepath.Join(dir, "prompt.md") {
		t.Errorf("paths: %s %s %s %s", b.LabelsPath(), b.PublicDir(), b.PrivateDir(), b.PromptPath())
	}
	// A symlinked public/ is a layout error.
	os.Remove(filepath.Join(dir, "public"))
	os.Symlink(t.TempDir(), filepath.Join(dir, "public"))
	var le *LayoutError
	if _, err := Open(dir); !errors.As(err, &le) || !strings.Contains(err.Error(), "public: is a symlink") {
		t.Fatalf("symlinked public/: %v", err)
	}
}

// A wrong type and a wrong value are reported in the same run, each under its own field,
// with no extra "required" for a field whose value was there but of the wrong type; a
// scoring_column of the wrong shape is named as scoring_column, not by a key inside it.
func TestParseMetaTypeAndValueErrorsTogether(t *testing.T) {
	base := string(readTestMeta(t))
	cases := []struct {
		name string
		edit func(string) string
		want []string // exactly these fields, in this order
	}{
		{"bool, number and a bad value", func(s string) string {
			s = strings.Replace(s, "lower_is_better: false", "lower_is_better: maybe", 1)
			s = strings.Replace(s, "cpus: 8", "cpus: eight", 1)
			return strings.Replace(s, "gpus: 1", "gpus: -1", 1)
		}, []string{"metric.lower_is_better", "limits.cpus", "limits.gpus"}},
		{"optimum of the wrong type is not compared with sota", func(s string) string {
			s = strings.Replace(s, "optimal_score: 1.0", "optimal_score: one", 1)
			return strings.Replace(s, "category: Math\n", "", 1)
		}, []string{"metric.optimal_score", "category"}},
		{"scoring_column as a mapping", func(s string) string {
			return strings.Replace(s, "scoring_column: Answer", "scoring_column: {a: 1}", 1)
		}, []string{"scoring_column"}},
		{"metric as a list", func(s string) string {
			return strings.Replace(s, "metric:\n  name: Accuracy\n  lower_is_better: false\n  optimal_score: 1.0\n", "metric: [Accuracy]\n", 1)
		}, []string{"metric"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.edit(base)
			if src == base {
				t.Fatal("edit did not apply")
			}
			_, err := ParseMeta([]byte(src))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want a ValidationError, got %v", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("fields %q, want %q:\n%v", got, tc.want, err)
			}
		})
	}
}

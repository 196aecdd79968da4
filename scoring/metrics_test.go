package scoring

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// fixtures is the in-repository copy of the AIRS-Bench task metadata and the SVAMP gold
// submissions (tasks/testdata/NOTICE.md), so the fixture tests run in any clone.
const fixtures = "../tasks/testdata/airs-bench"

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestScoreCSV(t *testing.T) {
	tests := []struct {
		name, metric, sub, labels string
		spec                      CSVSpec
		want                      float64
	}{
		{"accuracy ints", "Accuracy", "Answer\n27\n4\n16\n", "Answer\n27\n4\n15\n", CSVSpec{}, 2.0 / 3},
		{"accuracy int vs float", "Accuracy", "Answer\n27.0\n4\n", "Answer\n27\n4\n", CSVSpec{}, 1},
		{"accuracy text", "accuracy", "label\nentailment\n neutral\n", "label\nentailment\ncontradiction\n", CSVSpec{}, 0.5},
		{"accuracy any of json list, case-insensitive", "Accuracy", "answer\nParis\nlyon\n", "answer\n\"[\"\"paris\"\", \"\"Paris, France\"\"]\"\n\"[\"\"Nice\"\"]\"\n", CSVSpec{}, 0.5},
		{"accuracy two columns both must match", "Accuracy", "has_answer,answer\nTrue,x\nFalse,y\n", "has_answer,answer\nTrue,x\nTrue,y\n", CSVSpec{}, 0.5},
		{"accuracy header order free", "Accuracy", "b,a\n1,2\n", "a,b\n2,1\n", CSVSpec{}, 1},
		{"exact match squad normalisation", "ExactMatch", "answers\nThe  Eiffel tower!\nDenver Broncos\n", "answers\n\"[\"\"Eiffel Tower\"\"]\"\n\"[\"\"Carolina Panthers\"\"]\"\n", CSVSpec{}, 0.5},
		{"mae", "MeanAbsoluteError", "y\n1\n2\n", "y\n1.5\n0\n", CSVSpec{}, 1.25},
		{"mae lists skip nan labels", "MAE", "label_target\n\"[1, 2, 3]\"\n", "label_target\n\"[2, NaN, 5]\"\n", CSVSpec{}, 1.5},
		{"spearman perfect", "SpearmanCorrelation", "s\n1\n2\n3\n", "s\n10\n20\n30\n", CSVSpec{}, 1},
		{"spearman negative", "SpearmanCorrelation", "s\n3\n2\n1\n", "s\n10\n20\n30\n", CSVSpec{}, -1},
		{"mrr", "MRR", "query,rankings\nq1,\"[3, 1, 2]\"\nq2,\"[\"\"a\"\", \"\"b\"\"]\"\n", "query,id\nq1,1\nq2,\"\"\"z\"\"\"\n", CSVSpec{Header: []string{"query", "rankings"}, ScoringColumns: []string{"id"}}, 0.25},
		{"mrr rounds to 4 decimals", "MRR", "query,rankings\nq1,\"[9, 9, 1]\"\n", "query,id\nq1,1\n", CSVSpec{Header: []string{"query", "rankings"}}, 0.3333},
		{"rougeL identical", "RougeL", "answers\nthe cat sat\n", "answers\nThe cat sat.\n", CSVSpec{}, 1},
		{"pass@5 outcomes", "Pass@5", "code1,code2,code3,code4,code5\n0,0,1,0,0\nfalse,false,false,false,false\n", "input_output\nx\ny\n", CSVSpec{Header: []string{"code1", "code2", "code3", "code4", "code5"}, ScoringColumns: []string{"input_output"}}, 0.5},
		{"pass@1 unbiased", "Pass@1", "c1,c2,c3,c4\n1,0,0,0\n", "input_output\nx\n", CSVSpec{Header: []string{"c1", "c2", "c3", "c4"}}, 0.25},
		{"mcq accuracy", "MCQAccuracy", "answer\n\"A, C\"\nb\n\"\"\n", "answer\n\"C,A\"\n\"B,D\"\nA\n", CSVSpec{}, 1.0 / 3},
		{"mcq micro recall", "MCQRecallMicro", "answer\n\"A, C\"\nb\n\"\"\n", "answer\n\"C,A\"\n\"B,D\"\nA\n", CSVSpec{}, 3.0 / 5},
		{"mcq macro precision", "MCQPrecisionMacro", "answer\n\"A, B\"\nb\n\"\"\n", "answer\nA\n\"B,D\"\nA\n", CSVSpec{}, 0.75},
		{"mcq macro recall", "MCQRecallMacro", "answer\n\"A, B\"\nb\n\"\"\n", "answer\nA\n\"B,D\"\nA\n", CSVSpec{}, 0.75},
		{"mcq macro f1", "MCQF1Macro", "answer\n\"A, B\"\nb\n\"\"\n", "answer\nA\n\"B,D\"\nA\n", CSVSpec{}, 2.0 / 3},
		{"mcq micro f1", "MCQF1Micro", "answer\n\"A, B\"\nb\n\"\"\n", "answer\nA\n\"B,D\"\nA\n", CSVSpec{}, 2 * (2.0 / 3) * 0.5 / (2.0/3 + 0.5)},
		{"bom and spaces in header", "Accuracy", "\xef\xbb\xbf Answer \n1\n", "Answer\n1\n", CSVSpec{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ScoreCSV(tt.metric, []byte(tt.sub), []byte(tt.labels), tt.spec)
			if err != nil {
				t.Fatalf("ScoreCSV: %v", err)
			}
			if !near(got, tt.want, 1e-12) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestScoreCSVInvalid(t *testing.T) {
	tests := []struct {
		name, metric, sub, labels string
		spec                      CSVSpec
		row                       int
		col, reason               string
	}{
		{"too few rows", "Accuracy", "Answer\n1\n", "Answer\n1\n2\n", CSVSpec{}, 0, "", "1 data rows, expected 2"},
		{"too many rows", "Accuracy", "Answer\n1\n2\n3\n", "Answer\n1\n2\n", CSVSpec{}, 0, "", "3 data rows, expected 2"},
		{"labels disagree with spec rows", "Accuracy", "Answer\n1\n", "Answer\n1\n", CSVSpec{Rows: 2}, -1, "", ""},
		{"wrong header", "Accuracy", "answer\n1\n", "Answer\n1\n", CSVSpec{}, 0, "Answer", "missing column"},
		{"extra column", "Accuracy", "Answer,id\n1,2\n", "Answer\n1\n", CSVSpec{}, 0, "", "expected header Answer"},
		{"duplicate column", "Accuracy", "Answer,Answer\n1,1\n", "Answer\n1\n", CSVSpec{}, 0, "Answer", "twice"},
		{"empty file", "Accuracy", "", "Answer\n1\n", CSVSpec{}, 0, "", "empty file"},
		{"ragged row", "Accuracy", "a,b\n1,2\n3\n", "a,b\n1,2\n3,4\n", CSVSpec{}, 2, "", "wrong number of fields"},
		{"bad quote", "Accuracy", "a\n\"1\n", "a\n1\n", CSVSpec{}, 1, "", "malformed CSV"},
		{"unparsable number", "Accuracy", "Answer\n1\nseven\n", "Answer\n1\n7\n", CSVSpec{}, 2, "Answer", "not a number"},
		{"empty number", "MAE", "y\n1\n\n2\n", "y\n1\n2\n3\n", CSVSpec{}, 0, "", "2 data rows"},
		{"empty cell number", "MAE", "x,y\n1,1\n1,\n", "x,y\n1,1\n1,2\n", CSVSpec{}, 2, "y", "empty value"},
		{"nan", "MeanAbsoluteError", "y\n1\nNaN\n", "y\n1\n2\n", CSVSpec{}, 2, "y", "finite"},
		{"inf", "SpearmanCorrelation", "y\n1\ninf\n", "y\n1\n2\n", CSVSpec{}, 2, "y", "finite"},
		{"nan in list", "MAE", "t\n\"[1, nan]\"\n", "t\n\"[1, 2]\"\n", CSVSpec{}, 1, "t", "NaN"},
		{"short list", "MAE", "t\n\"[1]\"\n", "t\n\"[1, 2]\"\n", CSVSpec{}, 1, "t", "1 values, expected 2"},
		{"not a list", "MAE", "t\nabc\n", "t\n\"[1, 2]\"\n", CSVSpec{}, 1, "t", "list of 2 numbers"},
		{"constant spearman", "SpearmanCorrelation", "s\n1\n1\n", "s\n1\n2\n", CSVSpec{}, 0, "s", "undefined"},
		{"mrr bad rankings", "MRR", "query,rankings\nq1,[1\n", "query,id\nq1,1\n", CSVSpec{Header: []string{"query", "rankings"}}, 1, "rankings", "JSON list"},
		{"mrr missing query", "MRR", "query,rankings\nq9,[1]\n", "query,id\nq1,1\n", CSVSpec{Header: []string{"query", "rankings"}}, 1, "query", "no prediction"},
		{"pass outcome", "Pass@5", "c1\nmaybe\n", "x\n1\n", CSVSpec{Header: []string{"c1"}}, 1, "c1", "test outcome"},
		{"mcq letter", "MCQAccuracy", "answer\nE\n", "answer\nA\n", CSVSpec{}, 1, "answer", "letters A–D"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ScoreCSV(tt.metric, []byte(tt.sub), []byte(tt.labels), tt.spec)
			if tt.row < 0 {
				if err == nil {
					t.Fatalf("labels/spec mismatch accepted: %v", v)
				}
				var inv *InvalidSubmission
				if errors.As(err, &inv) {
					t.Fatalf("labels problem reported as an invalid submission: %v", err)
				}
				return
			}
			var inv *InvalidSubmission
			if !errors.As(err, &inv) {
				t.Fatalf("want *InvalidSubmission, got score %v err %v", v, err)
			}
			if inv.Row != tt.row || inv.Column != tt.col || !strings.Contains(inv.Reason, tt.reason) {
				t.Fatalf("got row %d col %q reason %q; want row %d col %q reason ~%q", inv.Row, inv.Column, inv.Reason, tt.row, tt.col, tt.reason)
			}
			msg := err.Error()
			if tt.row > 0 && !strings.Contains(msg, "row "+itoa(tt.row)) {
				t.Fatalf("message %q does not name row %d", msg, tt.row)
			}
			if tt.col != "" && !strings.Contains(msg, `"`+tt.col+`"`) {
				t.Fatalf("message %q does not name column %q", msg, tt.col)
			}
		})
	}
}

func TestScoreCSVLabelsErrorsAreNotInvalidSubmissions(t *testing.T) {
	for _, c := range []struct{ metric, sub, labels string }{
		{"Accuracy", "a\n1\n", ""},
		{"Accuracy", "a\n1\n", "b\n1\n"},
		{"MAE", "a\n1\n", "a\nxyz\n"},
		{"MASE", "a\n\"[1]\"\n", "a\n\"[1]\"\n"},
		{"NoSuchMetric", "a\n1\n", "a\n1\n"},
	} {
		_, err := ScoreCSV(c.metric, []byte(c.sub), []byte(c.labels), CSVSpec{Header: []string{"a"}})
		var inv *InvalidSubmission
		if err == nil || errors.As(err, &inv) {
			t.Errorf("%s %q vs labels %q: got %v, want a labels/metric error", c.metric, c.sub, c.labels, err)
		}
	}
}

// The AIRS-Bench task-folder check for SVAMP: gold scores the optimum, permutations less.
func TestSVAMPFixture(t *testing.T) {
	dir := filepath.Join(fixtures, "MathQuestionAnsweringSVAMPAccuracy")
	gold, err := os.ReadFile(filepath.Join(dir, "gold_submission.csv"))
	if err != nil {
		t.Skipf("fixture not available: %v", err)
	}
	spec := CSVSpec{Header: []string{"Answer"}}
	v, err := ScoreCSV("Accuracy", gold, gold, spec)
	if err != nil || v != 1.0 {
		t.Fatalf("gold vs gold = %v, %v; want 1.0", v, err)
	}
	for _, f := range []string{"gold_submission_permuted_1.csv", "gold_submission_permuted_2.csv"} {
		sub, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		p, err := ScoreCSV("Accuracy", sub, gold, spec)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !(p < 1.0) {
			t.Fatalf("%s scores %v, want strictly below 1.0", f, p)
		}
		t.Logf("%s: %.4f", f, p)
	}
}

// Every metric named in the 20 AIRS-Bench tasks is known, with the task's direction and
// optimum.
func TestLookupMetricCoversAIRSBench(t *testing.T) {
	dirs, err := os.ReadDir(fixtures)
	if err != nil {
		t.Skipf("fixtures not available: %v", err)
	}
	n := 0
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(fixtures, d.Name(), "metadata.yaml"))
		if err != nil {
			continue
		}
		var m struct {
			Lower bool `yaml:"metric_lower_is_better"`
			Info  struct {
				Metric  string  `yaml:"metric"`
				Optimal float64 `yaml:"optimal_score"`
			} `yaml:"logging_info"`
		}
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		mi, ok := LookupMetric(m.Info.Metric)
		if !ok {
			t.Errorf("%s: metric %q unknown", d.Name(), m.Info.Metric)
			continue
		}
		if mi.LowerIsBetter != m.Lower || mi.Optimum != m.Info.Optimal {
			t.Errorf("%s: %s says lower=%v optimum=%v, metadata lower=%v optimum=%v", d.Name(), mi.Name, mi.LowerIsBetter, mi.Optimum, m.Lower, m.Info.Optimal)
		}
		n++
	}
	if n != 20 {
		t.Fatalf("checked %d tasks, want 20", n)
	}
	if _, ok := LookupMetric("Pass@0"); ok {
		t.Error("Pass@0 accepted")
	}
	if mi, ok := LookupMetric("pass@10"); !ok || mi.Name != "Pass@10" {
		t.Errorf("pass@10: %+v %v", mi, ok)
	}
}

func TestPassAtK(t *testing.T) {
	// n=5, c=2, k=1: 1 − C(3,1)/C(5,1) = 0.4; k=2: 1 − C(3,2)/C(5,2) = 0.7.
	row := [][]bool{{true, true, false, false, false}}
	if v := PassAtK(row, 1); !near(v, 0.4, 1e-12) {
		t.Errorf("pass@1 = %v", v)
	}
	if v := PassAtK(row, 2); !near(v, 0.7, 1e-12) {
		t.Errorf("pass@2 = %v", v)
	}
	if v := PassAtK(row, 5); v != 1 {
		t.Errorf("pass@5 = %v", v)
	}
	if v := PassAtK([][]bool{{false, false}}, 1); v != 0 {
		t.Errorf("all fail = %v", v)
	}
}

func TestMASE(t *testing.T) {
	// History 1,2,4 → naive MAE (1+2)/2 = 1.5; horizon error mean |5−6|,|7−7| = 0.5 → 1/3.
	s := []MASESeries{
		{History: []float64{1, 2, 4}, Actual: []float64{6, 7}, Predicted: []float64{5, 7}},
		{History: []float64{3, 3, 3}, Actual: []float64{3}, Predicted: []float64{100}}, // constant: skipped
		{History: []float64{math.NaN(), 0, 2}, Actual: []float64{math.NaN(), 4}, Predicted: []float64{0, 0}},
	}
	v, ok := MASE(s)
	// second kept series: scale 2, error |4−0| = 4 → 2. Mean (1/3 + 2)/2.
	if !ok || !near(v, (1.0/3+2)/2, 1e-12) {
		t.Fatalf("MASE = %v %v", v, ok)
	}
	if _, ok := MASE(s[1:2]); ok {
		t.Fatal("all-constant MASE should be undefined")
	}
	// Through the CSV: history in "target", first len(history) values not scored.
	labels := "label_target,target\n\"[1, 2, 4, 6, 7]\",\"[1, 2, 4]\"\n\"[3, 3, 3]\",\"[3, 3]\"\n"
	sub := "label_target\n\"[0, 0, 0, 5, 7]\"\n\"[9, 9, 9]\"\n"
	got, err := ScoreCSV("MASE", []byte(sub), []byte(labels), CSVSpec{Header: []string{"label_target"}, ScoringColumns: []string{"label_target"}})
	if err != nil || !near(got, 1.0/3, 1e-12) {
		t.Fatalf("MASE csv = %v, %v", got, err)
	}
}

func TestNormalizeSQuAD(t *testing.T) {
	for in, want := range map[string]string{
		"The Eiffel  Tower!":  "eiffel tower",
		"an apple, a day":     "apple day",
		"  Denver Broncos.  ": "denver broncos",
		"theater":             "theater",
		// Only ASCII punctuation goes (Python's string.punctuation): curly quotes and
		// dashes stay, and an article next to one is still a word of its own.
		"“Denver”":       "“denver”",
		"the—end":        "—end",
		"l'an 2000":      "lan 2000",
		"a_b the_end":    "ab theend", // _ is punctuation too
		"$5 + tax=the":   "5 taxthe",
		"Café the crème": "café crème",
	} {
		if got := NormalizeSQuAD(in); got != want {
			t.Errorf("NormalizeSQuAD(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRougeL(t *testing.T) {
	// rouge_score: reference "the cat sat on the mat", prediction "the cat on mat":
	// LCS 4, P = 4/4, R = 4/6 → F = 0.8.
	if v := RougeLF("the cat sat on the mat", "the cat on mat"); !near(v, 0.8, 1e-12) {
		t.Errorf("RougeL = %v", v)
	}
	if v := RougeLF("abc", ""); v != 0 {
		t.Errorf("empty prediction = %v", v)
	}
	// Stemming: "running dogs" vs "run dog" match fully after Porter.
	if v := RougeLF("running dogs", "run dog"); v != 1 {
		t.Errorf("stemmed RougeL = %v, want 1", v)
	}
}

func TestSpearmanTies(t *testing.T) {
	// scipy.stats.spearmanr([1,2,2,3],[1,3,2,4]) = 0.9486832980505138
	if v := Spearman([]float64{1, 2, 2, 3}, []float64{1, 3, 2, 4}); !near(v, 0.9486832980505138, 1e-12) {
		t.Errorf("spearman with ties = %v", v)
	}
	if v := Spearman([]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}); v != -1 {
		t.Errorf("negative spearman = %v", v)
	}
}

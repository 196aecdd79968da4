package runner

import (
	"errors"
	"strings"
	"testing"
)

func TestParseEvaluatorOutput(t *testing.T) {
	tests := []struct {
		name   string
		out    string
		metric string
		want   float64
		wantM  string
		err    string
	}{
		{name: "airs-bench shape", out: "loading...\nscoring 300 rows\n--- EVALUATION RESULT ---\n{\"Accuracy\": 0.75}\n", metric: "Accuracy", want: 0.75, wantM: "Accuracy"},
		{name: "single number under another name", out: "--- EVALUATION RESULT ---\n{\"accuracy\": 1}", metric: "Accuracy", want: 1, wantM: "accuracy"},
		{name: "named among several", out: "--- EVALUATION RESULT ---\n{\"MAE\": 2.5, \"RMSE\": 3, \"note\": \"x\"}", metric: "MAE", want: 2.5, wantM: "MAE"},
		{name: "marker with spaces and CRLF", out: "  --- EVALUATION RESULT ---  \r\n{\"MAE\": -0.5}\r\n", metric: "MAE", want: -0.5, wantM: "MAE"},
		{name: "last marker wins", out: "--- EVALUATION RESULT ---\n{\"Accuracy\": 1}\n--- EVALUATION RESULT ---\n{\"Accuracy\": 0.1}", metric: "Accuracy", want: 0.1, wantM: "Accuracy"},
		{name: "pretty printed JSON", out: "--- EVALUATION RESULT ---\n{\n  \"Accuracy\": 0.5\n}\n", metric: "Accuracy", want: 0.5, wantM: "Accuracy"},
		{name: "no marker", out: "Accuracy: 0.9\n{\"Accuracy\": 0.9}", metric: "Accuracy", err: "no --- EVALUATION RESULT"},
		{name: "marker inside a line", out: "x --- EVALUATION RESULT --- y\n{\"Accuracy\": 0.9}", metric: "Accuracy", err: "no --- EVALUATION RESULT"},
		{name: "nothing after marker", out: "--- EVALUATION RESULT ---\n", metric: "Accuracy", err: "no JSON object"},
		{name: "not JSON", out: "--- EVALUATION RESULT ---\nAccuracy=0.9", metric: "Accuracy", err: "not a JSON object"},
		{name: "JSON array", out: "--- EVALUATION RESULT ---\n[0.9]", metric: "Accuracy", err: "not a JSON object"},
		{name: "null", out: "--- EVALUATION RESULT ---\nnull", metric: "Accuracy", err: "null"},
		{name: "no number", out: "--- EVALUATION RESULT ---\n{\"Accuracy\": \"high\"}", metric: "Accuracy", err: "no finite numeric"},
		{name: "ambiguous", out: "--- EVALUATION RESULT ---\n{\"a\": 1, \"b\": 2}", metric: "Accuracy", err: "several numbers (a, b)"},
		{name: "huge number is not finite", out: "--- EVALUATION RESULT ---\n{\"MAE\": 1e999}", metric: "MAE", err: "no finite numeric"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := ParseEvaluatorOutput([]byte(tt.out), tt.metric)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Score != tt.want || res.Metric != tt.wantM {
				t.Fatalf("got %s=%v, want %s=%v", res.Metric, res.Score, tt.wantM, tt.want)
			}
		})
	}
	if _, err := ParseEvaluatorOutput([]byte("no marker"), "x"); !errors.Is(err, ErrNoMarker) {
		t.Fatalf("no marker: %v, want ErrNoMarker", err)
	}
}

func FuzzParseEvaluatorOutput(f *testing.F) {
	f.Add([]byte("--- EVALUATION RESULT ---\n{\"Accuracy\": 0.75}\n"), "Accuracy")
	f.Add([]byte("progress\n--- EVALUATION RESULT ---\n{\"MAE\": 2.5, \"RMSE\": 3}"), "MAE")
	f.Add([]byte("--- EVALUATION RESULT ---\n{\"a\": 1e400}"), "a")
	f.Add([]byte("--- EVALUATION RESULT ---\n[1,2]"), "")
	f.Add([]byte("nothing"), "Accuracy")
	f.Fuzz(func(t *testing.T, out []byte, metric string) {
		res, err := ParseEvaluatorOutput(out, metric)
		if err != nil {
			if res != nil {
				t.Fatal("result with error")
			}
			return
		}
		if !strings.Contains(string(out), EvaluationMarker) {
			t.Fatalf("accepted output without the marker: %q", out)
		}
		if res.Metric == "" {
			t.Fatalf("accepted result without a metric name: %q", out)
		}
		if _, dup := res.Extra[res.Metric]; dup {
			t.Fatal("score also listed as extra")
		}
	})
}

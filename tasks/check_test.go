package tasks

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/scoring"
)

func scoreCSV(task, metric string, sub, labels []byte, header []string, rows int, cols []string) (float64, error) {
	return scoring.ScoreCSV(metric, sub, labels, scoring.CSVSpec{Task: task, Header: header, Rows: rows, ScoringColumns: cols})
}

// svampBundle imports the SVAMP fixture with the gold answers as labels; labels can be
// edited before the import.
func svampBundle(t *testing.T, editLabels func([]byte) []byte) string {
	t.Helper()
	src := standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy")
	gold, err := os.ReadFile(filepath.Join(svampDir, "gold_submission.csv"))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	os.Mkdir(filepath.Join(data, "test_with_labels"), 0o755)
	os.WriteFile(filepath.Join(data, "test_with_labels", "labels.csv"), editLabels(gold), 0o644)
	out := filepath.Join(t.TempDir(), "svamp")
	if _, err := ImportAIRS(src, out, ImportOptions{DataDir: data}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckGoldSVAMP(t *testing.T) {
	dir := svampBundle(t, func(b []byte) []byte { return b })
	r := Check(dir, CheckOptions{Score: scoreCSV})
	if !r.OK || r.Gold == nil || !r.Gold.OK {
		t.Fatalf("check failed: %+v %+v", r, r.Gold)
	}
	if *r.Gold.Score != 1 {
		t.Errorf("gold scored %v", *r.Gold.Score)
	}
	// Our shuffle plus the two upstream permuted files.
	if len(r.Gold.Permuted) != 3 {
		t.Fatalf("permuted checks: %+v", r.Gold.Permuted)
	}
	for _, p := range r.Gold.Permuted {
		if p.Score == nil || *p.Score >= 1 {
			t.Errorf("%s scored %v", p.Source, p.Score)
		}
	}
}

func TestCheckGoldFailures(t *testing.T) {
	t.Run("gold below optimum", func(t *testing.T) {
		dir := svampBundle(t, func(b []byte) []byte {
			lines := strings.Split(string(b), "\n")
			lines[1] = "99999"
			return []byte(strings.Join(lines, "\n"))
		})
		r := Check(dir, CheckOptions{Score: scoreCSV})
		if r.OK || len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "expected the optimum") {
			t.Fatalf("want a gold failure, got %+v", r)
		}
	})
	t.Run("order does not matter", func(t *testing.T) {
		// Every label the same: any permutation scores the optimum, so the check must fail.
		same := func(b []byte) []byte { return []byte("Answer\n" + strings.Repeat("7\n", 300)) }
		dir := svampBundle(t, same)
		os.WriteFile(filepath.Join(dir, "gold_submission.csv"), same(nil), 0o644)
		r := Check(dir, CheckOptions{Score: scoreCSV})
		if r.OK || r.Gold == nil || r.Gold.Submission != "gold_submission.csv" {
			t.Fatalf("want a permuted-gold failure, got %+v", r)
		}
		if !strings.Contains(strings.Join(r.Problems, "\n"), "not strictly worse") {
			t.Errorf("problem does not say why: %v", r.Problems)
		}
	})
}

func TestCheckReportsInvalidBundle(t *testing.T) {
	dir := svampBundle(t, func(b []byte) []byte { return b })
	y, _ := os.ReadFile(filepath.Join(dir, "task.yaml"))
	y = bytes.Replace(y, []byte("optimal_score: 1"), []byte("optimal_score: nope"), 1)
	os.WriteFile(filepath.Join(dir, "task.yaml"), y, 0o644)
	os.Remove(filepath.Join(dir, "prompt.md"))
	r := Check(dir, CheckOptions{Score: scoreCSV})
	if r.OK || len(r.Problems) == 0 || !strings.Contains(strings.Join(r.Problems, "\n"), "prompt.md") {
		t.Fatalf("got %+v", r)
	}
	os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("hi"), 0o644)
	r = Check(dir, CheckOptions{Score: scoreCSV})
	if r.OK || !strings.Contains(strings.Join(r.Problems, "\n"), "metric.optimal_score: cannot unmarshal") {
		t.Fatalf("got %+v", r)
	}
}

func TestCheckRefusesSymlinkInBundle(t *testing.T) {
	dir := svampBundle(t, func(b []byte) []byte { return b })
	os.Symlink("/etc/passwd", filepath.Join(dir, "public", "x"))
	r := Check(dir, CheckOptions{Score: scoreCSV})
	if r.OK || !strings.Contains(strings.Join(r.Problems, "\n"), "public/x") {
		t.Fatalf("got %+v", r)
	}
}

func TestPermuteCSVDeterministic(t *testing.T) {
	in := []byte("h\n1\n2\n3\n4\n5\n")
	a, err := PermuteCSV(in, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := PermuteCSV(in, 1)
	if !bytes.Equal(a, b) || bytes.Equal(a, in) || !bytes.HasPrefix(a, []byte("h\n")) || len(a) != len(in) {
		t.Errorf("PermuteCSV: %q / %q", a, b)
	}
	if _, err := PermuteCSV([]byte("h\n1\n"), 1); err == nil {
		t.Error("permuted a single row")
	}
}

// A permuted gold is compared with the gold's own score: when the gold misses the optimum,
// a permuted copy identical to it is not "strictly worse".
func TestCheckPermutedComparedWithGold(t *testing.T) {
	dir := svampBundle(t, func(b []byte) []byte {
		lines := strings.Split(string(b), "\n")
		lines[1] = "99999"
		return []byte(strings.Join(lines, "\n"))
	})
	gold, _ := os.ReadFile(filepath.Join(dir, "source", "gold_submission.csv"))
	os.WriteFile(filepath.Join(dir, "source", "gold_submission_permuted_9.csv"), gold, 0o644)
	r := Check(dir, CheckOptions{Score: scoreCSV})
	if r.OK || r.Gold == nil {
		t.Fatalf("want a failure, got %+v", r)
	}
	for _, p := range r.Gold.Permuted {
		if p.Source == "source/gold_submission_permuted_9.csv" {
			if p.OK || p.Score == nil || *p.Score != *r.Gold.Score {
				t.Errorf("copy of the gold: score %v ok %v (gold %v)", p.Score, p.OK, *r.Gold.Score)
			}
			return
		}
	}
	t.Fatalf("permuted_9 not checked: %+v", r.Gold.Permuted)
}

// Unknown task.yaml keys are kept but reported as warnings (a typo such as `lables:`
// otherwise goes unnoticed); the import's own `airs` block is not reported.
func TestCheckWarnsUnknownKeys(t *testing.T) {
	dir := svampBundle(t, func(b []byte) []byte { return b })
	y, _ := os.ReadFile(filepath.Join(dir, "task.yaml"))
	y = bytes.Replace(y, []byte("evaluator:\n"), []byte("evaluator:\n  lables: private/x.csv\n"), 1)
	y = append(y, []byte("sotta: 1\n")...)
	os.WriteFile(filepath.Join(dir, "task.yaml"), y, 0o644)
	r := Check(dir, CheckOptions{Score: scoreCSV})
	if !r.OK {
		t.Fatalf("unknown keys made the check fail: %v", r.Problems)
	}
	w := strings.Join(r.Warnings, "\n")
	if !strings.Contains(w, "unknown key sotta") || !strings.Contains(w, "unknown key evaluator.lables") || strings.Contains(w, "key airs") {
		t.Errorf("warnings:\n%s", w)
	}
}

// The scorer is told which task it scores: some AIRS-Bench tasks compare answers their own
// way (SVAMP compares int(prediction) with int(label)).
func TestCheckPassesTaskNameToScorer(t *testing.T) {
	dir := svampBundle(t, func(b []byte) []byte { return b })
	var seen []string
	Check(dir, CheckOptions{Score: func(task, metric string, sub, labels []byte, header []string, rows int, cols []string) (float64, error) {
		seen = append(seen, task)
		return scoreCSV(task, metric, sub, labels, header, rows, cols)
	}})
	if len(seen) == 0 {
		t.Fatal("the scorer was never called")
	}
	for _, task := range seen {
		if task != "MathQuestionAnsweringSVAMPAccuracy" {
			t.Fatalf("scorer got task %q, want MathQuestionAnsweringSVAMPAccuracy", task)
		}
	}
}

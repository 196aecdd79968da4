package scoring

import (
	"errors"
	"strings"
	"testing"
)

// DuoRC's upstream evaluate.py: has_answer=False is right exactly when the question has no
// answer (the answer text is ignored); otherwise the answer must equal one of the label's
// answers ignoring case. has_answer is a pandas boolean (any case, or 1/0).
func TestScoreCSVDuoRC(t *testing.T) {
	spec := CSVSpec{Header: []string{"has_answer", "answer"}, ScoringColumns: []string{"has_answer", "answer"}}
	labels := "has_answer,answer\n" +
		"False,\n" + // 1: no answer
		"True,Bob\n" + // 2
		"True,Bob\n" + // 3
		"False,\n" + // 4: no answer
		`True,"[""Anna"", ""the queen""]"` + "\n" + // 5: several accepted answers
		"True,Carl\n" // 6
	for _, c := range []struct {
		name, sub string
		want      float64
	}{
		{"gold", "has_answer,answer\nFalse,\nTrue,Bob\nTrue,Bob\nFalse,\nTrue,Anna\nTrue,Carl\n", 1},
		// Row 3 differs in case only (upstream lower()s both); row 4 says no answer but
		// writes text, which upstream ignores; row 5 picks the second accepted answer;
		// has_answer spelt true/FALSE/1/0.
		{"upstream leniency", "has_answer,answer\n0,\ntrue,Bob\nTRUE,bOB\nFALSE,whatever\n1,The Queen\nTrue,carl\n", 1},
		// Row 1 answers a question that has none; row 2 declines one that has an answer;
		// row 6 is wrong text.
		{"wrong", "has_answer,answer\nTrue,\nFalse,Bob\nTrue,Bob\nFalse,\nTrue,Anna\nTrue,Dan\n", 3.0 / 6},
		// Columns in the other order are the same submission.
		{"column order", "answer,has_answer\n,False\nBob,True\nBob,True\n,False\nAnna,True\nCarl,True\n", 1},
	} {
		got, err := ScoreCSV("Accuracy", []byte(c.sub), []byte(labels), spec)
		if err != nil || !near(got, c.want, 1e-12) {
			t.Errorf("%s: Accuracy = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	_, err := ScoreCSV("Accuracy", []byte("has_answer,answer\nFalse,\nmaybe,Bob\nTrue,Bob\nFalse,\nTrue,Anna\nTrue,Carl\n"), []byte(labels), spec)
	var inv *InvalidSubmission
	if !errors.As(err, &inv) || inv.Row != 2 || inv.Column != "has_answer" {
		t.Fatalf("has_answer \"maybe\": %v, want an invalid submission at row 2 column has_answer", err)
	}
}

// A submission-wide problem does not claim to be in the header.
func TestInvalidSubmissionWording(t *testing.T) {
	_, err := ScoreCSV("Accuracy", []byte("Answer\n1\n"), []byte("Answer\n1\n2\n"), CSVSpec{})
	if err == nil || !strings.HasPrefix(err.Error(), "submission: 1 data rows, expected 2") {
		t.Errorf("row count: %v", err)
	}
	_, err = ScoreCSV("Accuracy", []byte("Answr\n1\n"), []byte("Answer\n1\n"), CSVSpec{})
	if err == nil || !strings.HasPrefix(err.Error(), `submission header column "Answer": missing column`) {
		t.Errorf("header: %v", err)
	}
}

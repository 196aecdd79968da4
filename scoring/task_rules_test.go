package scoring

import (
	"errors"
	"testing"
)

// FinQA's evaluate.py: numbers within max(1e-4, 1e-4·max(1,|label|)), with %, currency,
// commas and (negatives); text ignoring case and spacing; a text answer to a numeric
// question is wrong — never an invalid submission.
func TestScoreCSVFinQA(t *testing.T) {
	spec := CSVSpec{Header: []string{"answer"}, Task: "QuestionAnsweringFinqaAccuracy"}
	labels := "answer\n" +
		"0.05\n" + // 1
		"-123\n" + // 2
		"1234.5\n" + // 3
		"yes\n" + // 4
		"10000\n" + // 5
		"3.2\n" + // 6
		"42\n" + // 7
		"no\n" // 8
	for _, c := range []struct {
		name, sub string
		want      float64
	}{
		{"gold", "answer\n0.05\n-123\n1234.5\nyes\n10000\n3.2\n42\nno\n", 1},
		// 5% = 0.05; (123) = −123; "$1,234.50"; "  YES "; 10000.9 is within 1e-4·10000;
		// 3.2003 is within 1e-4·3.2; 4_2 is Python's 42.
		{"upstream leniency", "answer\n5%\n(123)\n\"$1,234.50\"\n  YES \n10000.9\n3.2003\n4_2\nNo\n", 1},
		// 3.2004 is outside 1e-4·3.2; text for a number and a number for text are wrong,
		// and so is a missing answer (N/A) — but the run is valid.
		{"wrong but valid", "answer\n0.05\n-123\n1234.5\n1\n10000\n3.2004\nforty-two\nN/A\n", 4.0 / 8},
		{"hex is not a number to Python", "answer\n0.05\n-123\n1234.5\nyes\n10000\n3.2\n0x2a\nno\n", 7.0 / 8},
	} {
		got, err := ScoreCSV("Accuracy", []byte(c.sub), []byte(labels), spec)
		if err != nil || !near(got, c.want, 1e-12) {
			t.Errorf("%s: Accuracy = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	// Without the task name the generic rule applies: a text answer to a numeric label is
	// an invalid submission.
	if _, err := ScoreCSV("Accuracy", []byte("answer\n0.05\n-123\n1234.5\nyes\n10000\n3.2\nforty-two\nno\n"), []byte(labels), CSVSpec{Header: []string{"answer"}}); err == nil {
		t.Error("generic rule accepted text for a numeric label")
	}
}

// SVAMP, SuperGLUE-WSC and Winogrande compare int(prediction) == int(label).
func TestScoreCSVIntTruncation(t *testing.T) {
	labels := "Answer\n27.0\n4\n-3\n"
	for _, task := range []string{"MathQuestionAnsweringSVAMPAccuracy", "CoreferenceResolutionSuperGLUEWSCAccuracy", "CoreferenceResolutionWinograndeAccuracy"} {
		spec := CSVSpec{Header: []string{"Answer"}, Task: task}
		got, err := ScoreCSV("Accuracy", []byte("Answer\n27.9\n4.0\n-3.99\n"), []byte(labels), spec)
		if err != nil || got != 1 {
			t.Errorf("%s: truncated answers score %v, %v; want 1", task, got, err)
		}
		got, err = ScoreCSV("Accuracy", []byte("Answer\n28\n3.99\n-4\n"), []byte(labels), spec)
		if err != nil || got != 0 {
			t.Errorf("%s: wrong answers score %v, %v; want 0", task, got, err)
		}
		_, err = ScoreCSV("Accuracy", []byte("Answer\n27\nfour\n-3\n"), []byte(labels), spec)
		var inv *InvalidSubmission
		if !errors.As(err, &inv) || inv.Row != 2 || inv.Column != "Answer" {
			t.Errorf("%s: text answer: %v, want invalid at row 2 column Answer (upstream's int() raises)", task, err)
		}
	}
	// The generic rule compares numbers exactly.
	if got, _ := ScoreCSV("Accuracy", []byte("Answer\n27.9\n4.0\n-3.99\n"), []byte(labels), CSVSpec{}); !near(got, 1.0/3, 1e-12) {
		t.Errorf("generic: %v, want 1/3", got)
	}
}

// ZINC's evaluate.py takes "[0.95]" as 0.95 (ast.literal_eval, first element); a NaN is
// still invalid (its isfinite check raises).
func TestScoreCSVZincListPrediction(t *testing.T) {
	spec := CSVSpec{Header: []string{"y"}, Task: "GraphRegressionZincMae"}
	labels := "y\n1.0\n2.0\n"
	got, err := ScoreCSV("MAE", []byte("y\n\"[0.5]\"\n\"[2.5, 9]\"\n"), []byte(labels), spec)
	if err != nil || !near(got, 0.5, 1e-12) {
		t.Errorf("list predictions: %v, %v; want 0.5", got, err)
	}
	var inv *InvalidSubmission
	if _, err := ScoreCSV("MAE", []byte("y\n\"[nan]\"\n2\n"), []byte(labels), spec); !errors.As(err, &inv) || inv.Row != 1 {
		t.Errorf("[nan]: %v, want invalid at row 1", err)
	}
	if _, err := ScoreCSV("MAE", []byte("y\n\"[0.5]\"\n2\n"), []byte(labels), CSVSpec{Header: []string{"y"}}); !errors.As(err, &inv) {
		t.Errorf("generic MAE accepted a list for a scalar label: %v", err)
	}
}

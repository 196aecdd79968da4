package scoring

import (
	"fmt"
	"math"
	"strings"
)

// CSVSpec says what a submission must look like and which columns are scored.
type CSVSpec struct {
	// Header is the expected submission header (any column order); empty = the labels' header.
	Header []string
	// Rows is the expected number of data rows; 0 = the labels' row count.
	Rows int
	// ScoringColumns are compared between submission and labels; empty = every submission
	// column the labels also have.
	ScoringColumns []string
	// Task is the AIRS-Bench task name, when known. A few tasks' evaluate.py compare
	// answers their own way (FinQA, SVAMP, SuperGLUE-WSC, Winogrande, ZINC); ScoreCSV
	// follows them when Task names one: see taskRules in csv_tasks.go. Empty: the generic
	// rules of ScoreCSV's doc.
	Task string
}

// InvalidSubmission is why a submission cannot be scored: the run counts as invalid.
type InvalidSubmission struct {
	Row    int    // 1-based data row; 0 = the header or the file as a whole
	Column string // "" when the problem is not tied to one column
	Reason string
}

func (e *InvalidSubmission) Error() string {
	where := "submission"
	switch {
	case e.Row > 0:
		where += fmt.Sprintf(" row %d", e.Row)
	case e.Column != "":
		where += " header"
	}
	if e.Column != "" {
		where += fmt.Sprintf(" column %q", e.Column)
	}
	return where + ": " + e.Reason
}

func invalid(row int, col, format string, a ...any) error {
	return &InvalidSubmission{Row: row, Column: col, Reason: fmt.Sprintf(format, a...)}
}

// ScoreCSV scores a submission CSV against a labels CSV (both with a header row, same row
// order) with the named metric. A malformed submission returns a *InvalidSubmission, never
// a score and never a panic; a problem with the labels (the task bundle's fault) returns an
// ordinary error starting with "labels:".
//
// Column conventions per metric (what AIRS-Bench's evaluators read):
//   - Accuracy: each scoring column compared per row; numbers compare as numbers ("27.0" =
//     "27"), text as trimmed text; a label holding a JSON list of strings accepts any of
//     them, case-insensitively. A row is right when every column is. Scoring columns
//     exactly has_answer and answer (DuoRC) follow upstream's rule: see duorcAccuracy.
//   - ExactMatch: SQuAD normalisation; a label may be a JSON list of accepted answers.
//   - MeanAbsoluteError / MAE: numbers, or JSON lists of numbers of the label's length
//     (time series); NaN labels are skipped; the mean over all compared values.
//   - MASE: the scoring column holds JSON lists; the labels also carry the history in a
//     column "target" (JSON list); as upstream, the first len(history) values of the label
//     and prediction lists are the in-sample part and are not scored.
//   - SpearmanCorrelation: numbers.
//   - MRR: submission columns query and rankings (JSON list of ids); labels query and the
//     scoring column (the right id). Rounded to 4 decimals, as upstream.
//   - RougeL: text; mean ROUGE-L F over rows. Upstream reports rouge_score's
//     BootstrapAggregator "mid" — the median of 1,000 unseeded resamples of that same
//     mean — so its value jitters slightly from run to run; the plain mean is the
//     deterministic quantity it estimates, and one re-scoring nodes can agree on.
//   - Pass@k: every submission column holds one program's test outcome (true/false, 1/0,
//     pass/fail), as the APPS evaluator produces by running the programs (running them is
//     not this package's business); the labels only fix the row count.
//   - MCQ*: comma-separated letter sets A–D; an empty answer is unanswered.
func ScoreCSV(metric string, submission, labels []byte, spec CSVSpec) (float64, error) {
	mi, ok := LookupMetric(metric)
	if !ok {
		return 0, fmt.Errorf("unknown metric %q: known metrics are %s", metric, strings.Join(MetricNames(), ", "))
	}
	lab, err := parseTable(labels)
	if err != nil {
		return 0, fmt.Errorf("labels: %v", err)
	}
	sub, err := parseTable(submission)
	if err != nil {
		return 0, err
	}
	header := spec.Header
	if len(header) == 0 {
		header = lab.header
	}
	for _, h := range header {
		if sub.col(h) < 0 {
			return 0, invalid(0, h, "missing column; expected header %s, got %s", strings.Join(header, ","), strings.Join(sub.header, ","))
		}
	}
	if len(sub.header) != len(header) {
		return 0, invalid(0, "", "expected header %s, got %s", strings.Join(header, ","), strings.Join(sub.header, ","))
	}
	rows := spec.Rows
	if rows == 0 {
		rows = len(lab.rows)
	}
	if len(lab.rows) != rows {
		return 0, fmt.Errorf("labels: %d data rows, but the task expects %d", len(lab.rows), rows)
	}
	if len(sub.rows) != rows {
		return 0, invalid(0, "", "%d data rows, expected %d (one per test item, in test order)", len(sub.rows), rows)
	}
	cols := spec.ScoringColumns
	if len(cols) == 0 {
		for _, h := range sub.header {
			if lab.col(h) >= 0 {
				cols = append(cols, h)
			}
		}
	}
	key := strings.ToLower(mi.Name)
	if len(cols) == 0 && key != "mrr" && !strings.HasPrefix(key, "pass@") {
		return 0, fmt.Errorf("labels: no scoring column: the labels header %s shares no column with the submission header %s",
			strings.Join(lab.header, ","), strings.Join(sub.header, ","))
	}
	if key != "mrr" && !strings.HasPrefix(key, "pass@") {
		for _, c := range cols {
			if lab.col(c) < 0 {
				return 0, fmt.Errorf("labels: scoring column %q missing from the labels header %s", c, strings.Join(lab.header, ","))
			}
			if sub.col(c) < 0 {
				if len(spec.Header) > 0 {
					// The submission has exactly the expected header, so the task's spec
					// is what disagrees with itself.
					return 0, fmt.Errorf("labels: scoring column %q is not in the task's submission header %s", c, strings.Join(spec.Header, ","))
				}
				return 0, invalid(0, c, "missing scoring column")
			}
		}
	}
	s := &scorer{sub: sub, lab: lab, cols: cols, task: spec.Task}
	var v float64
	switch {
	case key == "accuracy":
		v, err = s.accuracy()
	case key == "exactmatch":
		v, err = s.exactMatch()
	case key == "meanabsoluteerror" || key == "mae":
		v, err = s.mae()
	case key == "mase":
		v, err = s.mase()
	case key == "spearmancorrelation":
		v, err = s.spearman()
	case key == "mrr":
		v, err = s.mrr(spec)
	case key == "rougel":
		v, err = s.rougeL()
	case strings.HasPrefix(key, "pass@"):
		k, _ := parsePassK(key)
		// Every submission column is one program's outcome; the task's scoring column
		// names the labels' test cases (APPS: input_output), not a submission column.
		v, err = s.passK(k, sub.header)
	case strings.HasPrefix(key, "mcq"):
		v, err = s.mcq(mi.Name)
	default:
		return 0, fmt.Errorf("metric %q has no CSV scorer", mi.Name)
	}
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, invalid(0, "", "the metric is not a finite number (%v)", v)
	}
	return v, nil
}

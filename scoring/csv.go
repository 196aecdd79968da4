package scoring

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
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
	// answers their own way, and ScoreCSV follows them when Task names one of those:
	// QuestionAnsweringFinqaAccuracy (numbers with tolerance, %, $, (negatives); text
	// ignoring case; a wrong kind of answer is wrong, not invalid) and SVAMP, SuperGLUE-WSC
	// and Winogrande (int(prediction) == int(label): numbers truncated). Empty: the
	// generic rules below. GraphRegressionZincMae also takes a prediction written as a
	// list, "[0.95]", as its first element.
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

// table is a parsed CSV with a header row.
type table struct {
	header []string
	index  map[string]int
	rows   [][]string
}

func (t *table) col(name string) int {
	if i, ok := t.index[name]; ok {
		return i
	}
	return -1
}

// maxCSVBytes bounds what ScoreCSV accepts, so a hostile submission cannot exhaust memory
// through the parser. AIRS-Bench's largest submission (KaggleWebTraffic) is a few hundred MB
// at most; callers wanting larger must split.
const maxCSVBytes int64 = 2 << 30

// parseTable reads a CSV with a header row. Fields per record must equal the header's.
func parseTable(data []byte) (*table, error) {
	if int64(len(data)) > maxCSVBytes {
		return nil, invalid(0, "", "file is %d bytes, over the %d-byte limit", len(data), maxCSVBytes)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	r := csv.NewReader(bytes.NewReader(data))
	r.ReuseRecord = false
	hdr, err := r.Read()
	if err == io.EOF {
		return nil, invalid(0, "", "empty file: expected a header row")
	}
	if err != nil {
		return nil, csvErr(err, 0)
	}
	t := &table{index: map[string]int{}}
	for i, h := range hdr {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, invalid(0, "", "header column %d has no name", i+1)
		}
		if _, dup := t.index[h]; dup {
			return nil, invalid(0, h, "column named twice in the header")
		}
		t.index[h] = i
		t.header = append(t.header, h)
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvErr(err, len(t.rows)+1)
		}
		t.rows = append(t.rows, rec)
	}
	return t, nil
}

func csvErr(err error, row int) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		// pe.StartLine is the file line; data row = line - 1 (header is line 1).
		r := pe.StartLine - 1
		if r < 0 {
			r = row
		}
		reason := pe.Err.Error()
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			reason = "wrong number of fields for the header"
		}
		return invalid(r, "", "malformed CSV: %s (line %d)", reason, pe.Line)
	}
	return invalid(row, "", "malformed CSV: %v", err)
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

type scorer struct {
	sub, lab *table
	cols     []string
	task     string
}

func (s *scorer) cell(t *table, row int, col string) string {
	return t.rows[row][t.col(col)]
}

// parseNumber accepts what pandas would read as a float; NaN and infinities are refused
// for submissions (they would poison the metric), and reported by the caller.
func parseNumber(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

func subNumber(v string, row int, col string) (float64, error) {
	f, ok := parseNumber(v)
	if !ok {
		if strings.TrimSpace(v) == "" {
			return 0, invalid(row, col, "empty value, expected a number")
		}
		return 0, invalid(row, col, "%q is not a number", clip(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, invalid(row, col, "%q: expected a finite number", clip(v))
	}
	return f, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// jsonStrings decodes a JSON list of strings, or reports ok=false.
func jsonStrings(v string) ([]string, bool) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") {
		return nil, false
	}
	var out []string
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, false
	}
	return out, true
}

// numberList decodes a JSON-style list of numbers; NaN/null entries become NaN (Python's
// repr writes nan, the AIRS-Bench evaluator accepts NaN).
func numberList(v string) ([]float64, bool) {
	v = strings.TrimSpace(v)
	if len(v) < 2 || v[0] != '[' || v[len(v)-1] != ']' {
		return nil, false
	}
	inner := strings.TrimSpace(v[1 : len(v)-1])
	if inner == "" {
		return []float64{}, true
	}
	parts := strings.Split(inner, ",")
	out := make([]float64, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		switch strings.ToLower(p) {
		case "nan", "null", "none":
			out[i] = math.NaN()
			continue
		}
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

func (s *scorer) accuracy() (float64, error) {
	if len(s.cols) == 2 && slices.Contains(s.cols, "has_answer") && slices.Contains(s.cols, "answer") {
		return s.duorcAccuracy()
	}
	switch s.task {
	case "QuestionAnsweringFinqaAccuracy":
		return s.finqaAccuracy()
	case "MathQuestionAnsweringSVAMPAccuracy", "CoreferenceResolutionSuperGLUEWSCAccuracy", "CoreferenceResolutionWinograndeAccuracy":
		return s.intAccuracy()
	}
	correct := 0
	for i := range s.lab.rows {
		ok := true
		for _, c := range s.cols {
			lv, pv := strings.TrimSpace(s.cell(s.lab, i, c)), strings.TrimSpace(s.cell(s.sub, i, c))
			if lf, isNum := parseNumber(lv); isNum && !math.IsNaN(lf) {
				pf, err := subNumber(pv, i+1, c)
				if err != nil {
					return 0, err
				}
				if pf != lf {
					ok = false
				}
				continue
			}
			if alts, isList := jsonStrings(lv); isList {
				hit := false
				for _, a := range alts {
					if strings.EqualFold(a, pv) {
						hit = true
						break
					}
				}
				ok = ok && hit
				continue
			}
			if lv != pv {
				ok = false
			}
		}
		if ok {
			correct++
		}
	}
	return float64(correct) / float64(len(s.lab.rows)), nil
}

// duorcAccuracy is DuoRC's rule (upstream evaluate.py): a row whose submission says
// has_answer = False is right exactly when the question has no answer, whatever the answer
// text; otherwise the answer is right when it equals one of the label's answers ignoring
// case (a JSON list of them, or one text; an empty label answer accepts nothing).
// has_answer is read as pandas reads a boolean column: True/False in any case, or 1/0.
func (s *scorer) duorcAccuracy() (float64, error) {
	correct := 0
	for i := range s.lab.rows {
		subHas, ok := parseBool(s.cell(s.sub, i, "has_answer"))
		if !ok {
			return 0, invalid(i+1, "has_answer", "expected True or False, got %q", clip(s.cell(s.sub, i, "has_answer")))
		}
		labHas, ok := parseBool(s.cell(s.lab, i, "has_answer"))
		if !ok {
			return 0, fmt.Errorf("labels: row %d column \"has_answer\": %q is not True or False", i+1, clip(s.cell(s.lab, i, "has_answer")))
		}
		if !subHas {
			if !labHas {
				correct++
			}
			continue
		}
		lv := s.cell(s.lab, i, "answer")
		cands, isList := jsonStrings(lv)
		if !isList && lv != "" {
			cands = []string{lv}
		}
		pv := strings.ToLower(s.cell(s.sub, i, "answer"))
		for _, c := range cands {
			if strings.ToLower(c) == pv {
				correct++
				break
			}
		}
	}
	return float64(correct) / float64(len(s.lab.rows)), nil
}

// intAccuracy is evaluate.py's int(p) == int(y) (SVAMP, SuperGLUE-WSC, Winogrande): both
// read as numbers and truncated toward zero, so 27.9 answers 27. A prediction that is not
// a finite number makes upstream's int() raise: an invalid submission.
func (s *scorer) intAccuracy() (float64, error) {
	correct := 0
	for i := range s.lab.rows {
		ok := true
		for _, c := range s.cols {
			lv := s.cell(s.lab, i, c)
			lf, isNum := parseNumber(lv)
			if !isNum || math.IsNaN(lf) || math.IsInf(lf, 0) {
				return 0, fmt.Errorf("labels: row %d column %q: %q is not a number", i+1, c, clip(lv))
			}
			pf, err := subNumber(s.cell(s.sub, i, c), i+1, c)
			if err != nil {
				return 0, err
			}
			if math.Trunc(pf) != math.Trunc(lf) {
				ok = false
			}
		}
		if ok {
			correct++
		}
	}
	return float64(correct) / float64(len(s.lab.rows)), nil
}

// finqaAccuracy is FinQA's evaluate.py: when prediction and label both read as numbers
// (finqaNumber) they match within max(1e-4, 1e-4·max(1, |label|)); otherwise their texts
// match after trimming, lower-casing and collapsing white space. Any answer is scored —
// a text answer to a numeric question is wrong, not an invalid submission. Cells pandas
// reads as missing (empty, NaN, N/A, …) are the empty text.
func (s *scorer) finqaAccuracy() (float64, error) {
	correct := 0
	norm := func(v string) string { return strings.Join(strings.Fields(strings.ToLower(v)), " ") }
	for i := range s.lab.rows {
		ok := true
		for _, c := range s.cols {
			pv, lv := pandasNA(s.cell(s.sub, i, c)), s.cell(s.lab, i, c)
			pn, pok := finqaNumber(pv)
			tn, tok := finqaNumber(lv)
			if pok && tok {
				if !(math.Abs(pn-tn) <= math.Max(1e-4, 1e-4*math.Max(1, math.Abs(tn)))) {
					ok = false
				}
				continue
			}
			if norm(pv) != norm(lv) {
				ok = false
			}
		}
		if ok {
			correct++
		}
	}
	return float64(correct) / float64(len(s.lab.rows)), nil
}

// pandasNA maps the strings pandas.read_csv reads as NaN by default to "" (FinQA turns
// NaN predictions into the empty text).
func pandasNA(v string) string {
	switch v {
	case "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
		"<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null":
		return ""
	}
	return v
}

// finqaNumber is FinQA's to_number: "(123)" is −123; $ £ € commas and spaces are dropped;
// a trailing % divides by 100; then Python's float() (which, unlike ParseFloat, takes no
// hexadecimal, and takes _ between digits).
func finqaNumber(v string) (float64, bool) {
	ss := strings.TrimSpace(v)
	if ss == "" {
		return 0, false
	}
	neg := false
	if strings.HasPrefix(ss, "(") && strings.HasSuffix(ss, ")") {
		neg = true
		ss = strings.TrimSpace(ss[1 : len(ss)-1])
	}
	ss = strings.NewReplacer("$", "", "£", "", "€", "", ",", "", " ", "").Replace(ss)
	pct := strings.HasSuffix(ss, "%")
	ss = strings.TrimSuffix(ss, "%")
	if strings.ContainsAny(ss, "xXpP") {
		return 0, false
	}
	for i := 0; i < len(ss); i++ {
		// Python allows an underscore only between two digits.
		if ss[i] == '_' && (i == 0 || i == len(ss)-1 || !isDigit(ss[i-1]) || !isDigit(ss[i+1])) {
			return 0, false
		}
	}
	ss = strings.ReplaceAll(ss, "_", "")
	f, err := strconv.ParseFloat(ss, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		f = -f
	}
	if pct {
		f /= 100
	}
	return f, true
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func parseBool(v string) (b, ok bool) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "1.0":
		return true, true
	case "false", "0", "0.0":
		return false, true
	}
	return false, false
}

func (s *scorer) exactMatch() (float64, error) {
	hits, total := 0, 0
	for i := range s.lab.rows {
		for _, c := range s.cols {
			total++
			lv, pv := s.cell(s.lab, i, c), s.cell(s.sub, i, c)
			p := NormalizeSQuAD(pv)
			alts, isList := jsonStrings(lv)
			if !isList {
				alts = []string{lv}
			}
			for _, a := range alts {
				if NormalizeSQuAD(a) == p {
					hits++
					break
				}
			}
		}
	}
	if total == 0 {
		return 0, invalid(0, "", "no rows to score")
	}
	return float64(hits) / float64(total), nil
}

func (s *scorer) mae() (float64, error) {
	var sum float64
	var n int
	for i := range s.lab.rows {
		for _, c := range s.cols {
			lv, pv := s.cell(s.lab, i, c), s.cell(s.sub, i, c)
			if ll, isList := numberList(lv); isList {
				pl, ok := numberList(pv)
				if !ok {
					return 0, invalid(i+1, c, "expected a list of %d numbers like [1.5, 2.0], got %q", len(ll), clip(pv))
				}
				if len(pl) != len(ll) {
					return 0, invalid(i+1, c, "list has %d values, expected %d", len(pl), len(ll))
				}
				for j := range ll {
					if math.IsNaN(ll[j]) {
						continue
					}
					if math.IsNaN(pl[j]) {
						return 0, invalid(i+1, c, "value %d of the list is NaN", j+1)
					}
					sum += math.Abs(pl[j] - ll[j])
					n++
				}
				continue
			}
			lf, ok := parseNumber(lv)
			if !ok {
				return 0, fmt.Errorf("labels: row %d column %q: %q is not a number", i+1, c, clip(lv))
			}
			if s.task == "GraphRegressionZincMae" {
				// ZINC's evaluate.py reads a prediction written as a list, "[0.95]", as
				// its first element.
				if l, isList := numberList(pv); isList && len(l) > 0 {
					pv = strconv.FormatFloat(l[0], 'g', -1, 64)
				}
			}
			pf, err := subNumber(pv, i+1, c)
			if err != nil {
				return 0, err
			}
			if math.IsNaN(lf) {
				continue
			}
			sum += math.Abs(pf - lf)
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("labels: every label is NaN, nothing to score")
	}
	return sum / float64(n), nil
}

func (s *scorer) mase() (float64, error) {
	if s.lab.col("target") < 0 {
		return 0, fmt.Errorf("labels: MASE needs the in-sample history in a column \"target\" (JSON list); header is %s", strings.Join(s.lab.header, ","))
	}
	var series []MASESeries
	for i := range s.lab.rows {
		hist, ok := numberList(s.cell(s.lab, i, "target"))
		if !ok {
			return 0, fmt.Errorf("labels: row %d column \"target\" is not a list of numbers", i+1)
		}
		for _, c := range s.cols {
			if c == "target" {
				continue
			}
			ll, ok := numberList(s.cell(s.lab, i, c))
			if !ok {
				return 0, fmt.Errorf("labels: row %d column %q is not a list of numbers", i+1, c)
			}
			pv := s.cell(s.sub, i, c)
			pl, ok := numberList(pv)
			if !ok {
				return 0, invalid(i+1, c, "expected a list of %d numbers like [1.5, 2.0], got %q", len(ll), clip(pv))
			}
			if len(pl) != len(ll) {
				return 0, invalid(i+1, c, "list has %d values, expected %d", len(pl), len(ll))
			}
			skip := len(hist)
			if skip > len(ll) {
				skip = len(ll)
			}
			for j := skip; j < len(ll); j++ {
				if !math.IsNaN(ll[j]) && math.IsNaN(pl[j]) {
					return 0, invalid(i+1, c, "value %d of the list is NaN", j+1)
				}
			}
			series = append(series, MASESeries{History: hist, Actual: ll[skip:], Predicted: pl[skip:]})
		}
	}
	v, ok := MASE(series)
	if !ok {
		return 0, fmt.Errorf("labels: every series is constant or has no horizon; MASE is undefined")
	}
	return v, nil
}

func (s *scorer) spearman() (float64, error) {
	if len(s.cols) != 1 {
		return 0, fmt.Errorf("labels: SpearmanCorrelation needs exactly one scoring column, have %v", s.cols)
	}
	c := s.cols[0]
	x := make([]float64, len(s.lab.rows))
	y := make([]float64, len(s.lab.rows))
	for i := range s.lab.rows {
		lf, ok := parseNumber(s.cell(s.lab, i, c))
		if !ok || math.IsNaN(lf) {
			return 0, fmt.Errorf("labels: row %d column %q is not a number", i+1, c)
		}
		pf, err := subNumber(s.cell(s.sub, i, c), i+1, c)
		if err != nil {
			return 0, err
		}
		x[i], y[i] = pf, lf
	}
	v := Spearman(x, y)
	if math.IsNaN(v) {
		return 0, invalid(0, c, "every prediction is the same value; the Spearman correlation is undefined")
	}
	return v, nil
}

func (s *scorer) mrr(spec CSVSpec) (float64, error) {
	if s.sub.col("query") < 0 || s.sub.col("rankings") < 0 {
		return 0, invalid(0, "", "MRR needs columns query and rankings, got %s", strings.Join(s.sub.header, ","))
	}
	idCol := ""
	for _, c := range spec.ScoringColumns {
		if c != "query" {
			idCol = c
		}
	}
	if idCol == "" {
		for _, c := range s.lab.header {
			if c != "query" {
				idCol = c
				break
			}
		}
	}
	if s.lab.col("query") < 0 || idCol == "" || s.lab.col(idCol) < 0 {
		return 0, fmt.Errorf("labels: MRR needs columns query and the right id, header is %s", strings.Join(s.lab.header, ","))
	}
	preds := make(map[string][]string, len(s.sub.rows))
	for i := range s.sub.rows {
		rv := s.cell(s.sub, i, "rankings")
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(rv), &raw); err != nil {
			return 0, invalid(i+1, "rankings", "expected a JSON list of ids, got %q", clip(rv))
		}
		ids := make([]string, len(raw))
		for j, r := range raw {
			ids[j] = idString(r)
		}
		preds[s.cell(s.sub, i, "query")] = ids
	}
	var sum float64
	for i := range s.lab.rows {
		q := s.cell(s.lab, i, "query")
		ids, ok := preds[q]
		if !ok {
			return 0, invalid(i+1, "query", "no prediction for the query in labels row %d", i+1)
		}
		want := idString(json.RawMessage(strings.TrimSpace(s.cell(s.lab, i, idCol))))
		for rank, id := range ids {
			if id == want {
				sum += 1 / float64(rank+1)
				break
			}
		}
	}
	v := sum / float64(len(s.lab.rows))
	return math.Round(v*1e4) / 1e4, nil
}

// idString compares ids across JSON and CSV: a JSON string by its content, anything else
// (numbers) by its literal text.
func idString(r json.RawMessage) string {
	var str string
	if json.Unmarshal(r, &str) == nil {
		return str
	}
	return strings.TrimSpace(string(r))
}

func (s *scorer) rougeL() (float64, error) {
	var sum float64
	var n int
	for i := range s.lab.rows {
		for _, c := range s.cols {
			sum += RougeLF(s.cell(s.lab, i, c), s.cell(s.sub, i, c))
			n++
		}
	}
	if n == 0 {
		return 0, invalid(0, "", "no rows to score")
	}
	return sum / float64(n), nil
}

func (s *scorer) passK(k int, cols []string) (float64, error) {
	out := make([][]bool, len(s.sub.rows))
	for i := range s.sub.rows {
		row := make([]bool, 0, len(cols))
		for _, c := range cols {
			if s.sub.col(c) < 0 {
				return 0, invalid(0, c, "missing outcome column")
			}
			v := strings.ToLower(strings.TrimSpace(s.cell(s.sub, i, c)))
			switch v {
			case "1", "true", "pass", "passed":
				row = append(row, true)
			case "0", "false", "fail", "failed":
				row = append(row, false)
			default:
				return 0, invalid(i+1, c, "expected a test outcome (true/false, 1/0, pass/fail), got %q", clip(v))
			}
		}
		out[i] = row
	}
	return PassAtK(out, k), nil
}

func (s *scorer) mcq(name string) (float64, error) {
	if len(s.cols) != 1 {
		return 0, fmt.Errorf("labels: MCQ metrics need exactly one scoring column, have %v", s.cols)
	}
	c := s.cols[0]
	pred := make([]string, len(s.lab.rows))
	gold := make([]string, len(s.lab.rows))
	for i := range s.lab.rows {
		pv := s.cell(s.sub, i, c)
		if _, ok := parseLetters(pv); !ok {
			return 0, invalid(i+1, c, "expected letters A–D separated by commas, got %q", clip(pv))
		}
		lv := s.cell(s.lab, i, c)
		if g, ok := parseLetters(lv); !ok || g == 0 {
			return 0, fmt.Errorf("labels: row %d column %q: %q is not a letter set A–D", i+1, c, clip(lv))
		}
		pred[i], gold[i] = pv, lv
	}
	return MCQ(pred, gold).Value(name), nil
}

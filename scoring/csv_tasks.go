package scoring

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Per-task answer rules: where one AIRS-Bench task's evaluate.py compares answers its own
// way, ScoreCSV follows it when CSVSpec.Task names that task. Find a task by its name in
// taskRules; every other task scores by the generic rules in csv_scorers.go.

// taskRule is how one task's evaluate.py departs from the generic rule of its metric.
type taskRule struct {
	// accuracy, when set, replaces the generic Accuracy comparison.
	accuracy func(*scorer) (float64, error)
	// maePrediction, when set, rewrites a prediction cell before MAE reads it as a number.
	maePrediction func(cell string) string
}

// taskRules is keyed by AIRS-Bench task name (metadata.yaml logging_info.name). DuoRC
// (QuestionAnsweringDuoRCAccuracy) is not here: it is recognised by its scoring columns,
// exactly has_answer and answer, whatever the task name (duorcAccuracy).
var taskRules = map[string]taskRule{
	// numbers within a tolerance, %, $ and (negatives); text ignoring case and spacing;
	// a wrong kind of answer is wrong, not invalid.
	"QuestionAnsweringFinqaAccuracy": {accuracy: (*scorer).finqaAccuracy},
	// int(prediction) == int(label): numbers truncated toward zero.
	"MathQuestionAnsweringSVAMPAccuracy":        {accuracy: (*scorer).intAccuracy},
	"CoreferenceResolutionSuperGLUEWSCAccuracy": {accuracy: (*scorer).intAccuracy},
	"CoreferenceResolutionWinograndeAccuracy":   {accuracy: (*scorer).intAccuracy},
	// a prediction written as a list, "[0.95]", is read as its first element.
	"GraphRegressionZincMae": {maePrediction: firstListElement},
}

// firstListElement is ZINC's evaluate.py reading a prediction written as a list by its
// first element; any other cell is returned as it is.
func firstListElement(cell string) string {
	if l, isList := numberList(cell); isList && len(l) > 0 {
		return strconv.FormatFloat(l[0], 'g', -1, 64)
	}
	return cell
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

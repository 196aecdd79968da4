package scoring

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// One scorer per metric family, each the generic rule AIRS-Bench's evaluators share; the
// tasks whose evaluate.py departs from it are in csv_tasks.go.

// scorer holds one submission and its labels while a metric reads them.
type scorer struct {
	sub, lab *table
	cols     []string
	task     string
}

func (s *scorer) cell(t *table, row int, col string) string {
	return t.rows[row][t.col(col)]
}

func (s *scorer) accuracy() (float64, error) {
	if len(s.cols) == 2 && slices.Contains(s.cols, "has_answer") && slices.Contains(s.cols, "answer") {
		return s.duorcAccuracy()
	}
	if rule := taskRules[s.task]; rule.accuracy != nil {
		return rule.accuracy(s)
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
			if rule := taskRules[s.task]; rule.maePrediction != nil {
				pv = rule.maePrediction(pv)
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

package scoring

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
)

// The CSV side of ScoreCSV: reading a submission or labels file into a table, and reading
// one cell as a number, a list or a boolean the way AIRS-Bench's pandas-based evaluators do.

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

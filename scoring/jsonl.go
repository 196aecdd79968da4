package scoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"

	"github.com/evalmesh/evalmesh/internal/jsonkeys"
)

// resultLine is one line of a results file. Pointers tell a missing field from a zero.
type resultLine struct {
	Task          *string          `json:"task"`
	Agent         *string          `json:"agent"`
	Seed          *json.RawMessage `json:"seed"`
	Status        *string          `json:"status"`
	Score         *json.RawMessage `json:"score"`
	AttestationID string           `json:"attestation_id,omitempty"`
}

// ParseResultsJSONL parses a results file, one JSON object a line:
// {"task": NAME, "agent": NAME, "seed": INT, "status": "SUCCESS"|OTHER, "score": NUMBER|null}
// (optionally "attestation_id"). Blank lines are skipped. The first bad line is an error
// that names its line number and what is wrong with it.
//
// Large inputs are split at line boundaries and parsed on all cores; each line goes
// through a small scanner for the flat objects results files hold, and falls back to
// encoding/json (which also words the errors) for anything the scanner does not take.
func ParseResultsJSONL(data []byte) ([]Result, error) {
	rs, _, err := parseJSONL(data, false)
	return rs, err
}

// ParseResultsJSONLLines is ParseResultsJSONL that also returns, for each result, the
// 1-based line it came from, so later checks (an unknown task, say) can name the line.
func ParseResultsJSONLLines(data []byte) ([]Result, []int, error) {
	return parseJSONL(data, true)
}

func parseJSONL(data []byte, wantLines bool) ([]Result, []int, error) {
	// A UTF-8 byte-order mark (some Windows editors write one) is not part of line 1.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	workers := runtime.GOMAXPROCS(0)
	if len(data) < 1<<20 || workers < 2 {
		return parseChunk(data, 0, newInterner(), wantLines)
	}
	type part struct {
		data      []byte
		firstLine int
		out       []Result
		lines     []int
		err       error
	}
	parts := make([]part, 0, workers)
	line := 0
	for len(data) > 0 {
		n := len(data) / (workers - len(parts))
		if len(parts) == workers-1 || n >= len(data) {
			n = len(data)
		} else if i := bytes.IndexByte(data[n:], '\n'); i >= 0 {
			n += i + 1
		} else {
			n = len(data)
		}
		parts = append(parts, part{data: data[:n], firstLine: line})
		line += bytes.Count(data[:n], []byte{'\n'})
		data = data[n:]
	}
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func(p *part) {
			defer wg.Done()
			p.out, p.lines, p.err = parseChunk(p.data, p.firstLine, newInterner(), wantLines)
		}(&parts[i])
	}
	wg.Wait()
	total := 0
	for _, p := range parts {
		if p.err != nil {
			return nil, nil, p.err
		}
		total += len(p.out)
	}
	out := make([]Result, 0, total)
	var lines []int
	if wantLines {
		lines = make([]int, 0, total)
	}
	for _, p := range parts {
		out = append(out, p.out...)
		lines = append(lines, p.lines...)
	}
	return out, lines, nil
}

func parseChunk(data []byte, line int, in interner, wantLines bool) ([]Result, []int, error) {
	out := make([]Result, 0, bytes.Count(data, []byte{'\n'})+1)
	var lines []int
	if wantLines {
		lines = make([]int, 0, cap(out))
	}
	scores := make([]float64, 0, cap(out))
	for len(data) > 0 {
		line++
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		if wantLines {
			lines = append(lines, line)
		}
		r, score, hasScore, ok := fastResultLine(raw, in)
		if !ok {
			var err error
			r, err = parseResultLine(raw)
			if err != nil {
				return nil, nil, fmt.Errorf("results line %d: %v", line, err)
			}
			out = append(out, r)
			continue
		}
		if hasScore {
			// One backing array for all scores: a million tiny allocations cost more
			// than the parse.
			if len(scores) == cap(scores) {
				scores = make([]float64, 0, 1024)
			}
			scores = append(scores, score)
			r.Score = &scores[len(scores)-1]
		}
		out = append(out, r)
	}
	return out, lines, nil
}

// interner shares the few distinct task, agent and status names across a million lines.
type interner map[string]string

func newInterner() interner { return interner{} }

func (in interner) get(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	in[s] = s
	return s
}

// fastResultLine takes the common shape: one flat object whose string values have no
// escapes, integer seed, number-or-null score, the known keys each at most once. Anything
// else returns ok=false and the caller uses encoding/json, so the two paths accept the
// same lines (FuzzParseResultsJSONL checks that they agree).
func fastResultLine(b []byte, in interner) (r Result, score float64, hasScore, ok bool) {
	i := 0
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r') {
			i++
		}
	}
	str := func() ([]byte, bool) {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' {
			if b[j] == '\\' || b[j] < 0x20 || b[j] >= 0x80 {
				return nil, false
			}
			j++
		}
		if j >= len(b) {
			return nil, false
		}
		s := b[i+1 : j]
		i = j + 1
		return s, true
	}
	ws()
	if i >= len(b) || b[i] != '{' {
		return r, 0, false, false
	}
	i++
	var seen [6]bool
	first := true
	for {
		ws()
		if i < len(b) && b[i] == '}' && first {
			return r, 0, false, false // empty object: let the slow path word the error
		}
		key, kok := str()
		if !kok {
			return r, 0, false, false
		}
		ws()
		if i >= len(b) || b[i] != ':' {
			return r, 0, false, false
		}
		i++
		ws()
		var k int
		switch string(key) {
		case "task":
			k = 0
		case "agent":
			k = 1
		case "seed":
			k = 2
		case "status":
			k = 3
		case "score":
			k = 4
		case "attestation_id":
			k = 5
		default:
			return r, 0, false, false
		}
		if seen[k] {
			return r, 0, false, false
		}
		seen[k] = true
		switch k {
		case 0, 1, 3, 5:
			v, vok := str()
			if !vok || len(v) == 0 {
				return r, 0, false, false
			}
			switch k {
			case 0:
				r.Task = in.get(v)
			case 1:
				r.Agent = in.get(v)
			case 3:
				r.Status = in.get(v)
			case 5:
				r.AttestationID = string(v)
			}
		case 2:
			j := i
			if j < len(b) && b[j] == '-' {
				return r, 0, false, false // negative (or -0): the slow path decides and words it
			}
			d := j
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == d || j-d > 10 || (b[d] == '0' && j-d > 1) {
				return r, 0, false, false
			}
			n, err := strconv.ParseInt(string(b[i:j]), 10, 64)
			if err != nil || n < math.MinInt32 || n > math.MaxInt32 {
				return r, 0, false, false
			}
			r.Seed = int(n)
			i = j
		case 4:
			if bytes.HasPrefix(b[i:], []byte("null")) {
				i += 4
				break
			}
			j := i
			for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
				j++
			}
			if !jsonNumber(b[i:j]) {
				return r, 0, false, false
			}
			f, err := strconv.ParseFloat(string(b[i:j]), 64)
			if err != nil || math.IsInf(f, 0) {
				return r, 0, false, false
			}
			score, hasScore = f, true
			i = j
		}
		first = false
		ws()
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		return r, 0, false, false
	}
	ws()
	if i != len(b) || !seen[0] || !seen[1] || !seen[2] || !seen[3] || r.Agent == SOTAPlayer {
		return r, 0, false, false
	}
	return r, score, hasScore, true
}

// jsonNumber reports whether b is a number in JSON's grammar.
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}

func parseResultLine(raw []byte) (Result, error) {
	var l resultLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Result{}, fmt.Errorf("not a results object (%v); expected {\"task\":…,\"agent\":…,\"seed\":INT,\"status\":…,\"score\":NUMBER|null}", err)
	}
	if dec.More() {
		return Result{}, fmt.Errorf("more than one JSON value on the line")
	}
	// encoding/json took the last of two "score"s, or "Score" for "score"; other tools
	// read such a line otherwise, so it has no one meaning.
	if err := jsonkeys.Check(raw); err != nil {
		return Result{}, err
	}
	switch {
	case l.Task == nil || *l.Task == "":
		return Result{}, fmt.Errorf("missing \"task\"")
	case l.Agent == nil || *l.Agent == "":
		return Result{}, fmt.Errorf("missing \"agent\"")
	case l.Seed == nil:
		return Result{}, fmt.Errorf("missing \"seed\"")
	case l.Status == nil || *l.Status == "":
		return Result{}, fmt.Errorf("missing \"status\"")
	}
	if *l.Agent == SOTAPlayer {
		return Result{}, fmt.Errorf("agent name %q is reserved for the human-SOTA player", SOTAPlayer)
	}
	seed, err := strconv.ParseInt(string(*l.Seed), 10, 64)
	if err != nil || seed < math.MinInt32 || seed > math.MaxInt32 || !jsonNumber(*l.Seed) {
		return Result{}, fmt.Errorf("\"seed\" %s is not an integer in 32-bit range", clip(string(*l.Seed)))
	}
	if seed < 0 {
		return Result{}, fmt.Errorf("\"seed\" %d is negative: seeds number a slot's runs from 0", seed)
	}
	r := Result{Task: *l.Task, Agent: *l.Agent, Seed: int(seed), Status: *l.Status, AttestationID: l.AttestationID}
	if l.Score != nil && string(*l.Score) != "null" {
		// A quoted number would decode into json.Number too; the format says NUMBER.
		var n json.Number
		if err := json.Unmarshal(*l.Score, &n); err != nil || !jsonNumber(*l.Score) {
			return Result{}, fmt.Errorf("\"score\" %s is not a number or null", string(*l.Score))
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) {
			return Result{}, fmt.Errorf("\"score\" %s is out of float64 range", n.String())
		}
		r.Score = &f
	}
	return r, nil
}

// ScoreRange is the interval a task's scores can take. The task's optimum bounds the better
// end whatever its metric; when metric (the task metadata's metric name) is one LookupMetric
// knows, the metric's range (MetricInfo.Range) bounds the other end, widened by the metric's
// tolerance. An unknown metric is unbounded at the worse end.
func ScoreRange(t TaskInfo, metric string) (lo, hi float64) {
	lo, hi = math.Inf(-1), math.Inf(1)
	tol := 0.0
	if m, ok := LookupMetric(metric); ok && m.LowerIsBetter == t.LowerIsBetter {
		lo, hi = m.Range()
		tol = m.Tolerance
	}
	if t.LowerIsBetter {
		lo = t.Optimum
	} else {
		hi = t.Optimum
	}
	return lo - tol, hi + tol
}

// CheckScoreRanges finds the first result whose score lies outside its task's ScoreRange
// (ranges by task name; tasks not in it are not checked) and returns its index and an error
// naming the score, the task and the range; -1 and nil when every score is in range.
func CheckScoreRanges(results []Result, ranges map[string][2]float64) (int, error) {
	for i, r := range results {
		rg, ok := ranges[r.Task]
		if !ok || r.Score == nil {
			continue
		}
		if s := *r.Score; s < rg[0] || s > rg[1] {
			return i, fmt.Errorf("score %v of agent %q seed %d is outside task %q's range [%v, %v]: a metric cannot take it; fix the evaluator or the task's metric.optimal_score",
				s, r.Agent, r.Seed, r.Task, rg[0], rg[1])
		}
	}
	return -1, nil
}

package scoring

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseResultsJSONL(t *testing.T) {
	in := `{"task":"T","agent":"a","seed":3,"status":"SUCCESS","score":0.5}

{"task": "T", "agent": "b", "seed": -0, "status": "FAILED", "score": null}
{"agent":"c","task":"T\u00e9","seed":0,"status":"SUCCESS","score":1e-3,"attestation_id":"bafyX"}
{"task":"T","agent":"d","seed":0,"status":"TIMEOUT"}
`
	got, err := ParseResultsJSONL([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Task: "T", Agent: "a", Seed: 3, Status: "SUCCESS", Score: fp(0.5)},
		{Task: "T", Agent: "b", Seed: 0, Status: "FAILED"},
		{Task: "Té", Agent: "c", Seed: 0, Status: "SUCCESS", Score: fp(1e-3), AttestationID: "bafyX"},
		{Task: "T", Agent: "d", Seed: 0, Status: "TIMEOUT"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestParseResultsJSONLErrors(t *testing.T) {
	good := `{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":0.5}` + "\n"
	for _, c := range []struct{ line, want string }{
		{`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":"0.5"}`, `"score"`},
		{`{"task":"T","agent":"a","seed":1.5,"status":"SUCCESS","score":0.5}`, `"seed"`},
		{`{"task":"T","agent":"a","seed":"1","status":"SUCCESS","score":0.5}`, `"seed"`},
		{`{"task":"T","agent":"a","status":"SUCCESS","score":0.5}`, `missing "seed"`},
		{`{"agent":"a","seed":1,"status":"SUCCESS"}`, `missing "task"`},
		{`{"task":"T","seed":1,"status":"SUCCESS"}`, `missing "agent"`},
		{`{"task":"T","agent":"a","seed":1}`, `missing "status"`},
		{`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":1e999}`, `out of float64 range`},
		{`{"task":"T","agent":"a","seed":99999999999,"status":"SUCCESS"}`, `32-bit`},
		{`{"task":"T","agent":"sota","seed":1,"status":"SUCCESS"}`, `reserved`},
		{`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","extra":1}`, `unknown field`},
		{`{"task":"T","agent":"a","seed":1,"status":"SUCCESS"} {}`, `more than one`},
		{`[1,2]`, `not a results object`},
		{`{"task":"T","agent":"a","seed":-1,"status":"SUCCESS","score":0.5}`, `"seed" -1 is negative`},
		{`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":0.5,"score":1}`, `"score" appears twice`},
		{`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":0.5,"Score":1}`, `differ only in case`},
		{`{"task":"T","agent":"a","Agent":"b","seed":1,"status":"SUCCESS","score":0.5}`, `differ only in case`},
		{`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","sc\u006fre":0.5,"score":1}`, `appears twice`},
		{`not json`, `not a results object`},
	} {
		data := good + good + c.line + "\n" + good
		_, err := ParseResultsJSONL([]byte(data))
		if err == nil || !strings.Contains(err.Error(), "results line 3:") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("line %s: err = %v, want line 3 and %q", c.line, err, c.want)
		}
	}
}

// Big inputs are parsed in parallel chunks; line numbers in errors stay file-global.
func TestParseResultsJSONLByteOrderMark(t *testing.T) {
	rs, lines, err := ParseResultsJSONLLines([]byte("\xef\xbb\xbf" + `{"task":"T","agent":"a","seed":0,"status":"SUCCESS","score":0.5}` + "\n"))
	if err != nil || len(rs) != 1 || rs[0].Task != "T" || lines[0] != 1 {
		t.Fatalf("results with a BOM: %v %v %v", rs, lines, err)
	}
}

func TestParseResultsJSONLChunkedLineNumbers(t *testing.T) {
	line := `{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":0.5}` + "\n"
	var b bytes.Buffer
	n := (2<<20)/len(line) + 10
	for i := 0; i < n; i++ {
		if i == n-5 {
			b.WriteString("{broken\n")
			continue
		}
		b.WriteString(line)
	}
	_, err := ParseResultsJSONL(b.Bytes())
	if err == nil || !strings.Contains(err.Error(), "results line "+itoa(n-4)+":") {
		t.Fatalf("err = %v, want line %d", err, n-4)
	}
	rs, err := ParseResultsJSONL(bytes.Repeat([]byte(line), n))
	if err != nil || len(rs) != n {
		t.Fatalf("parsed %d of %d: %v", len(rs), n, err)
	}
}

// FuzzParseResultsJSONL: never panics; the fast scanner and encoding/json agree on every
// line the scanner accepts; what parses re-encodes and parses back the same.
func FuzzParseResultsJSONL(f *testing.F) {
	for _, s := range []string{
		`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":0.5}`,
		`{"task":"T","agent":"a","seed":-0,"status":"FAILED","score":null}`,
		`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":-1.5e-7,"attestation_id":"x"}`,
		`{"task":"T","agent":"a","seed":01,"status":"SUCCESS"}`,
		`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":1.}`,
		`{"task":"T","agent":"a","seed":1,"status":"SUCCESS","score":1e400}`,
		`{"task":"T","task":"U","agent":"a","seed":1,"status":"S"}`,
		`{"Task":"T","agent":"a","seed":1,"status":"S"}`,
		`{"task":"T","agent":"a","seed":-3,"status":"S"}`,
		`{"task":"T","agent":"a","seed":1,"status":"S","score":1,"SCORE":2}`,
		"{\"task\":\"T\\n\",\"agent\":\"a\",\"seed\":1,\"status\":\"S\"}\n\n{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseResultsJSONL(data)
		for _, line := range bytes.Split(data, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			fast, score, has, ok := fastResultLine(line, newInterner())
			if !ok {
				continue
			}
			if has {
				fast.Score = &score
			}
			slow, serr := parseResultLine(line)
			if serr != nil {
				t.Fatalf("fast path accepted %q, encoding/json refused: %v", line, serr)
			}
			if !sameResult(fast, slow) {
				t.Fatalf("paths disagree on %q:\nfast %+v\nslow %+v", line, fast, slow)
			}
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "results line ") {
				t.Fatalf("error does not name the line: %v", err)
			}
			return
		}
		for _, r := range rs {
			if r.Task == "" || r.Agent == "" || r.Status == "" || r.Agent == SOTAPlayer {
				t.Fatalf("accepted an incomplete result %+v", r)
			}
			if r.Seed < 0 {
				t.Fatalf("accepted a negative seed %+v", r)
			}
			if r.Score != nil && (math.IsNaN(*r.Score) || math.IsInf(*r.Score, 0)) {
				t.Fatalf("accepted a non-finite score %+v", r)
			}
		}
		back, err := ParseResultsJSONL(resultsJSONLWithIDs(rs))
		if err != nil {
			t.Fatalf("re-encoded results do not parse: %v", err)
		}
		if len(back) != len(rs) {
			t.Fatalf("round trip: %d results, want %d", len(back), len(rs))
		}
	})
}

func sameResult(a, b Result) bool {
	if (a.Score == nil) != (b.Score == nil) || a.Score != nil && *a.Score != *b.Score {
		return false
	}
	a.Score, b.Score = nil, nil
	return a == b
}

func resultsJSONLWithIDs(rs []Result) []byte {
	var b bytes.Buffer
	for _, r := range rs {
		line := resultsJSONL([]Result{r})
		if r.AttestationID != "" {
			line = append(bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("}")), []byte(`,"attestation_id":`+quote(r.AttestationID)+"}\n")...)
		}
		b.Write(line)
	}
	return b.Bytes()
}

func quote(s string) string {
	var b bytes.Buffer
	b.WriteString(`"`)
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(`"`)
	return b.String()
}

// FuzzScoreCSV: any submission bytes against fixed, valid labels give either a finite
// score or a *InvalidSubmission naming a row/column — never a panic, never another error.
func FuzzScoreCSV(f *testing.F) {
	type task struct {
		metric, labels string
		spec           CSVSpec
	}
	tasks := []task{
		{"Accuracy", "Answer\n27\n4\n16\n", CSVSpec{Header: []string{"Answer"}}},
		{"ExactMatch", "answers\n\"[\"\"Denver\"\"]\"\nParis\nx\n", CSVSpec{}},
		{"MAE", "label_target\n\"[1, NaN, 3]\"\n\"[2, 2, 2]\"\n\"[0, 0, 1]\"\n", CSVSpec{}},
		{"MeanAbsoluteError", "y\n1.5\n-2\n3e3\n", CSVSpec{}},
		{"MASE", "label_target,target\n\"[1, 2, 4, 6]\",\"[1, 2, 4]\"\n\"[1, 3, 5, 7]\",\"[1, 3]\"\n\"[5, 6]\",\"[5]\"\n", CSVSpec{Header: []string{"label_target"}, ScoringColumns: []string{"label_target"}}},
		{"SpearmanCorrelation", "s\n1\n2\n3\n", CSVSpec{}},
		{"MRR", "query,id\nq1,1\nq2,2\nq3,\"\"\"x\"\"\"\n", CSVSpec{Header: []string{"query", "rankings"}, ScoringColumns: []string{"id"}}},
		{"RougeL", "answers\nthe cat sat\nrunning dogs\n\"\"\n", CSVSpec{}},
		{"Pass@5", "input_output\na\nb\nc\n", CSVSpec{Header: []string{"code1", "code2"}}},
		{"MCQF1Micro", "answer\nA\n\"B,C\"\nD\n", CSVSpec{}},
		{"Accuracy", "has_answer,answer\nFalse,\nTrue,Bob\nTrue,\"[\"\"Anna\"\"]\"\n", CSVSpec{Header: []string{"has_answer", "answer"}, ScoringColumns: []string{"has_answer", "answer"}}}, // DuoRC
		{"Accuracy", "answer\n0.05\nyes\n(12)\n", CSVSpec{Header: []string{"answer"}, Task: "QuestionAnsweringFinqaAccuracy"}},
		{"Accuracy", "Answer\n27.0\n4\n-3\n", CSVSpec{Header: []string{"Answer"}, Task: "MathQuestionAnsweringSVAMPAccuracy"}},
	}
	for i, t := range tasks {
		f.Add(uint8(i), []byte(t.labels))
	}
	f.Add(uint8(0), []byte("Answer\n27\n4\nNaN\n"))
	f.Add(uint8(6), []byte("query,rankings\nq1,\"[1,2]\"\nq2,[]\nq3,\"[\"\"x\"\"]\"\n"))
	f.Add(uint8(8), []byte("code1,code2\n1,0\nfalse,pass\n0,0\n"))
	f.Add(uint8(2), []byte("label_target\n\"[1,2,3]\"\n\"[1e308,-1e308,0]\"\n\"[0,0,nan]\"\n"))
	f.Add(uint8(10), []byte("answer,has_answer\n,false\nbob,1\nANNA,True\n"))
	f.Add(uint8(11), []byte("answer\n5%\n1_0\n\"$1,2\"\n"))
	f.Add(uint8(12), []byte("Answer\n27.9\n4e0\n-3.5\n"))
	f.Fuzz(func(t *testing.T, which uint8, sub []byte) {
		tk := tasks[int(which)%len(tasks)]
		v, err := ScoreCSV(tk.metric, sub, []byte(tk.labels), tk.spec)
		if err != nil {
			var inv *InvalidSubmission
			if !errors.As(err, &inv) {
				t.Fatalf("%s: non-submission error for submission %q: %v", tk.metric, sub, err)
			}
			if inv.Reason == "" {
				t.Fatalf("empty reason")
			}
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("%s: non-finite score %v for %q", tk.metric, v, sub)
		}
	})
}

func TestScoreRange(t *testing.T) {
	acc := TaskInfo{Name: "A", Optimum: 1}
	mae := TaskInfo{Name: "M", LowerIsBetter: true, Optimum: 0}
	rho := TaskInfo{Name: "S", Optimum: 1}
	odd := TaskInfo{Name: "X", Optimum: 50}
	for _, tc := range []struct {
		t      TaskInfo
		metric string
		score  float64
		ok     bool
	}{
		{acc, "Accuracy", 0, true}, {acc, "Accuracy", 1, true}, {acc, "Accuracy", 1.5, false},
		{acc, "accuracy", -0.1, false}, {acc, "Accuracy", 1 + 1e-12, true}, // within tolerance
		{mae, "MAE", 1e9, true}, {mae, "MAE", -1, false},
		{rho, "SpearmanCorrelation", -1, true}, {rho, "SpearmanCorrelation", -1.5, false},
		{odd, "SomeNewMetric", -1e9, true}, {odd, "SomeNewMetric", 51, false}, // unknown: the optimum bounds
	} {
		lo, hi := ScoreRange(tc.t, tc.metric)
		rs := []Result{{Task: tc.t.Name, Agent: "a", Seed: 2, Status: "SUCCESS", Score: fp(tc.score)}}
		i, err := CheckScoreRanges(rs, map[string][2]float64{tc.t.Name: {lo, hi}})
		if (err == nil) != tc.ok || (err != nil && (i != 0 || !strings.Contains(err.Error(), "outside task"))) {
			t.Errorf("%s %s score %v (range [%v, %v]): %d %v, want ok=%v", tc.t.Name, tc.metric, tc.score, lo, hi, i, err, tc.ok)
		}
	}
}

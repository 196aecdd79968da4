package scoring

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Hand-computed: gold q1 {A,C}, q2 {B}, q3 {A,B,D}, q4 {C}.
// Predictions: q1 " c , a" (exact; case and spaces), q2 "B,D" (tp1 fp1), q3 "a" (tp1 fn2),
// q4 missing (unanswered: wrong, counted in recall's FN, not in macro means).
// Accuracy 1/4. Micro: TP 1+... = 2+1+1 = 4, FP 1, FN 0+0+2+1 = 3 → P 4/5, R 4/7, F1 2PR/(P+R) = 2/3.
// Macro over the 3 answered: P (1 + 1/2 + 1)/3 = 5/6; R (1 + 1 + 1/3)/3 = 7/9;
// F1 (1 + 2/3 + 1/2)/3 = 13/18.
func TestHeurekaMCQHandComputed(t *testing.T) {
	ids := []string{"q1", "q2", "q3", "q4"}
	gold := map[string]string{"q1": "A,C", "q2": "B", "q3": "A, B ,D", "q4": "C"}
	answers, err := ParseHeurekaAnswers([]byte(`{"id":"q1","mcq":" c , a","oeq":"x"}
{"id":"q2","mcq":"B,D","oeq":""}

{"id":"q3","mcq":"a","oeq":""}
`), ids)
	if err != nil {
		t.Fatal(err)
	}
	v := &JudgeVerdicts{}
	for _, id := range ids {
		v.Questions = append(v.Questions, QuestionVerdict{ID: id, Score: 2})
	}
	v.Questions[0].Score = 5
	qs, oeq, err := HeurekaScore(ids, gold, answers, v)
	if err != nil {
		t.Fatal(err)
	}
	if oeq != 11.0/4 {
		t.Fatalf("OEQ mean %v, want 11/4", oeq)
	}
	c := MCQFromQuestions(qs)
	for name, want := range map[string]float64{
		"MCQAccuracy":       1.0 / 4,
		"MCQPrecisionMicro": 4.0 / 5,
		"MCQRecallMicro":    4.0 / 7,
		"MCQF1Micro":        2.0 / 3,
		"MCQPrecisionMacro": 5.0 / 6,
		"MCQRecallMacro":    7.0 / 9,
		"MCQF1Macro":        13.0 / 18,
	} {
		if got := c.Value(name); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// The same numbers as the CSV path's MCQ (one implementation of the rules).
	pred := []string{" c , a", "B,D", "a", ""}
	g := []string{"A,C", "B", "A, B ,D", "C"}
	if c2 := MCQ(pred, g); c2 != c {
		t.Fatalf("MCQFromQuestions %+v != MCQ %+v", c, c2)
	}
}

func TestHeurekaAnswersRefused(t *testing.T) {
	ids := []string{"q1", "q2"}
	for _, c := range []struct{ in, want string }{
		{`{"id":"q9","mcq":"A"}`, "not a question"},
		{`{"id":"q1","mcq":"E"}`, "letters A–D"},
		{`{"id":"q1","mcq":"A"}` + "\n" + `{"id":"q1","mcq":"B"}`, "answered twice"},
		{`{"id":"q1","mcq":"A","extra":1}`, "unknown field"},
		{`[1,2]`, "JSON object"},
		{`{"id":"q1"} {"id":"q2"}`, "trailing"},
	} {
		_, err := ParseHeurekaAnswers([]byte(c.in), ids)
		var inv *InvalidSubmission
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want an InvalidSubmission with %q", c.in, err, c.want)
		}
	}
}

const goodVerdicts = `{"questions":[{"id":"q1","score":4,"facts":[{"fact":"ISG15 up","label":"PRESENT"},{"fact":"IFIT1 up","label":"PARTIAL"}],"rationale":"ok"},{"id":"q2","score":1,"facts":[{"fact":"x","label":"INCORRECT"}]}]}`

func TestParseJudgeVerdicts(t *testing.T) {
	v, err := ParseJudgeVerdicts([]byte(goodVerdicts))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Questions) != 2 || v.Questions[0].Facts[1].Label != FactPartial || v.Questions[1].Score != 1 {
		t.Fatalf("parsed %+v", v)
	}
	big := `{"questions":[{"id":"q1","score":3,"facts":[` + strings.Repeat(`{"fact":"f","label":"MISSING"},`, MaxFactsPerQuestion) + `{"fact":"f","label":"MISSING"}]}]}`
	for _, c := range []struct{ name, in, want string }{
		{"over 5", `{"questions":[{"id":"q1","score":6,"facts":[]}]}`, "outside the rubric's 1–5"},
		{"under 1", `{"questions":[{"id":"q1","score":0,"facts":[]}]}`, "outside the rubric's 1–5"},
		{"label", `{"questions":[{"id":"q1","score":3,"facts":[{"fact":"f","label":"MAYBE"}]}]}`, "PRESENT, PARTIAL, MISSING or INCORRECT"},
		{"duplicate", `{"questions":[{"id":"q1","score":3},{"id":"q1","score":3}]}`, "two verdicts"},
		{"no id", `{"questions":[{"score":3}]}`, "expected a question id"},
		{"no list", `{}`, "no \"questions\" list"},
		{"unknown field", `{"questions":[],"verdict":"great"}`, "unknown field"},
		{"trailing", goodVerdicts + `{}`, "trailing data"},
		{"not json", `the answers look good`, "not a JSON object"},
		{"string score", `{"questions":[{"id":"q1","score":"5"}]}`, "not a JSON object"},
		{"too many facts", big, "over the limit of 256"},
		{"too deep", strings.Repeat("[", 100), "nested more than"},
		{"too large", `{"questions":[{"id":"q1","score":3,"rationale":"` + strings.Repeat("x", MaxVerdictBytes) + `"}]}`, "over the 4194304-byte limit"},
	} {
		if _, err := ParseJudgeVerdicts([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}

func TestHeurekaScoreNeedsEveryVerdict(t *testing.T) {
	v, _ := ParseJudgeVerdicts([]byte(goodVerdicts))
	if _, _, err := HeurekaScore([]string{"q1", "q2", "q3"}, map[string]string{"q1": "A", "q2": "A", "q3": "A"}, nil, v); err == nil || !strings.Contains(err.Error(), "no verdict for question(s) q3") {
		t.Fatalf("omitted question: %v", err)
	}
	if _, _, err := HeurekaScore([]string{"q1"}, map[string]string{"q1": "A"}, nil, v); err == nil || !strings.Contains(err.Error(), `"q2" is not one of the task's`) {
		t.Fatalf("extra question: %v", err)
	}
}

func TestOEQMetricTolerance(t *testing.T) {
	m, ok := LookupMetric("OEQCorrectness")
	if !ok || m.Tolerance != 0 || m.Optimum != 5 {
		t.Fatalf("OEQCorrectness: %+v %v; want tolerance 0 (a sampling judge disagrees), optimum 5", m, ok)
	}
	if lo, hi := m.Range(); lo != 1 || hi != 5 {
		t.Fatalf("range %v..%v, want 1..5", lo, hi)
	}
}

func FuzzParseJudgeVerdicts(f *testing.F) {
	f.Add([]byte(goodVerdicts))
	f.Add([]byte(`{"questions":[]}`))
	f.Add([]byte(`{"questions":[{"id":"q1","score":6}]}`))
	f.Add([]byte(`{"questions":[{"id":"\u0000","score":3}]}`))
	f.Add([]byte(`[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJudgeVerdicts(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, q := range v.Questions {
			if q.Score < OEQMin || q.Score > OEQMax || math.IsNaN(q.Score) || seen[q.ID] || q.ID == "" || len(q.Facts) > MaxFactsPerQuestion {
				t.Fatalf("accepted a verdict outside the rules: %+v", q)
			}
			seen[q.ID] = true
		}
	})
}

func FuzzParseHeurekaAnswers(f *testing.F) {
	f.Add([]byte(`{"id":"q1","mcq":"A, c","oeq":"text"}`))
	f.Add([]byte("{\"id\":\"q2\",\"mcq\":\"\"}\n\n{\"id\":\"q1\",\"mcq\":\"d\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseHeurekaAnswers(data, []string{"q1", "q2"})
		if err != nil {
			return
		}
		for id, x := range a {
			if id != "q1" && id != "q2" {
				t.Fatalf("accepted unknown id %q", id)
			}
			if _, ok := parseLetters(x.MCQ); !ok {
				t.Fatalf("accepted letters %q", x.MCQ)
			}
		}
	})
}

package scoring

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func heurekaResult(agent string, seed int, oeq []float64, mcq [][3]int) Result {
	run := &HeurekaRun{}
	sum := 0.0
	for i, s := range oeq {
		run.Questions = append(run.Questions, HeurekaQuestion{ID: string(rune('a' + i)), OEQ: s, TP: mcq[i][0], FP: mcq[i][1], FN: mcq[i][2]})
		sum += s
	}
	mean := sum / float64(len(oeq))
	return Result{Task: "heureka-sc", Agent: agent, Seed: seed, Status: StatusSuccess, Score: &mean, AttestationID: agent + string(rune('0'+seed)), Heureka: run}
}

func TestHeurekaTableBesideAIRS(t *testing.T) {
	airs := []Result{
		{Task: "t1", Agent: "x", Seed: 0, Status: StatusSuccess, Score: fptr(0.5)},
		{Task: "t1", Agent: "y", Seed: 0, Status: StatusSuccess, Score: fptr(0.7)},
	}
	infos := []TaskInfo{{Name: "t1", Optimum: 1, SOTA: 0.9}, {Name: "heureka-sc", Optimum: 5, SOTA: 2.34}}
	base, err := ComputeLedger(airs, infos, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if base.Heureka != nil || bytes.Contains(base.Canonical(), []byte("heureka")) {
		t.Fatal("a ledger without HeurekaBench runs must keep its canonical bytes (no heureka key)")
	}
	good := [][3]int{{2, 0, 0}, {1, 0, 0}, {1, 0, 0}}
	// strong: every MCQ exact, OEQ 5,4,3 (mean 4). weak: q a {tp1 fn1}, q b {fp1 fn1}, q c unanswered {fn1}.
	weak := [][3]int{{1, 0, 1}, {0, 1, 1}, {0, 0, 1}}
	hr := []Result{
		heurekaResult("strong", 0, []float64{5, 4, 3}, good),
		heurekaResult("strong", 1, []float64{5, 4, 3}, good),
		heurekaResult("weak", 0, []float64{2, 1, 1}, weak),
		heurekaResult("weak", 1, []float64{2, 1, 1}, weak),
	}
	l, err := ComputeLedger(append(append([]Result{}, hr...), airs...), infos, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(l.Agents, base.Agents) || !reflect.DeepEqual(l.Tasks, base.Tasks) || l.InputsDigest != base.InputsDigest {
		t.Fatal("HeurekaBench runs changed the AIRS-Bench rows")
	}
	h := l.Heureka
	if h == nil || len(h.Agents) != 3 || !reflect.DeepEqual(h.Tasks, []string{"heureka-sc"}) {
		t.Fatalf("heureka table %+v", h)
	}
	rows := map[string]HeurekaAgent{}
	for _, a := range h.Agents {
		rows[a.Agent] = a
	}
	s, w := rows["strong"], rows["weak"]
	if *s.OEQ != 4 || *s.MCQAccuracy != 1 || *s.MCQRecall != 1 || *s.MCQPrecision != 1 || s.Questions != 6 || s.Runs != 2 {
		t.Fatalf("strong row %+v", s)
	}
	// weak: OEQ 4/3; accuracy 0; macro recall over answered (a, b): (1/2 + 0)/2 = 1/4;
	// macro precision (1 + 0)/2 = 1/2; micro recall 1/(1+3) = 1/4, micro precision 1/2.
	if *w.OEQ != round9(4.0/3) || *w.MCQAccuracy != 0 || *w.MCQRecall != 0.25 || *w.MCQPrecision != 0.5 || *w.MCQRecallMicro != 0.25 || *w.MCQPrecisionMicro != 0.5 {
		t.Fatalf("weak row %+v", w)
	}
	for _, a := range []HeurekaAgent{s, w} {
		if a.OEQCI[0] > *a.OEQ || a.OEQCI[1] < *a.OEQ || a.MCQRecallCI[0] > *a.MCQRecall || a.MCQRecallCI[1] < *a.MCQRecall {
			t.Fatalf("%s: interval does not hold the estimate: %+v", a.Agent, a)
		}
	}
	if w.OEQCI[0] == w.OEQCI[1] {
		t.Fatalf("weak's OEQ varies over questions (2,1,1), its interval must not be a point: %v", w.OEQCI)
	}
	if s.Elo <= w.Elo || h.Agents[len(h.Agents)-1].Agent != "weak" {
		t.Fatalf("Elo order %+v", h.Agents)
	}
	// Deterministic, order-free, and every verdict reaches the root.
	rev := append([]Result{}, airs...)
	for i := len(hr) - 1; i >= 0; i-- {
		rev = append(rev, hr[i])
	}
	l2, _ := ComputeLedger(rev, infos, Options{})
	if l2.Root() != l.Root() {
		t.Fatal("input order changed the root")
	}
	hr[3].Heureka.Questions[2].OEQ = 2
	l3, _ := ComputeLedger(append(append([]Result{}, hr...), airs...), infos, Options{})
	if l3.Root() == l.Root() {
		t.Fatal("changing one attested verdict did not change the root")
	}
	var out map[string]any
	if err := json.Unmarshal(l.Canonical(), &out); err != nil || out["heureka"] == nil {
		t.Fatalf("canonical JSON has no heureka table: %v", err)
	}
}

func TestHeurekaTableOutOfRangeQuestionIsInvalid(t *testing.T) {
	r := heurekaResult("a", 0, []float64{5, 4, 3}, [][3]int{{1, 0, 0}, {1, 0, 0}, {1, 0, 0}})
	r.Heureka.Questions[0].OEQ = 7
	l, err := ComputeLedger([]Result{r}, []TaskInfo{{Name: "heureka-sc", Optimum: 5, SOTA: 2}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range l.Heureka.Agents {
		if a.Agent == "a" && (a.ValidRuns != 0 || a.Runs != 1) {
			t.Fatalf("a run attesting an OEQ of 7 counted as valid: %+v", a)
		}
	}
}
func fptr(v float64) *float64 { return &v }

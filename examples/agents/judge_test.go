package agents

import (
	"testing"

	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

func TestJudgeKeywordsRubric(t *testing.T) {
	g := tasks.HeurekaGold{ID: "q", Facts: []tasks.HeurekaFact{
		{Fact: "ISG15 up", Keywords: []string{"isg15"}, Contradicts: []string{"isg15 falls"}},
		{Fact: "interferon", Keywords: []string{"interferon|ifn"}},
	}}
	for _, c := range []struct {
		answer string
		score  float64
		labels [2]string
	}{
		{"An IFN response: ISG15 rises.", 5, [2]string{scoring.FactPresent, scoring.FactPresent}},
		{"ISG15 rises.", 3, [2]string{scoring.FactPresent, scoring.FactMissing}},
		{"Nothing changes.", 1, [2]string{scoring.FactMissing, scoring.FactMissing}},
		{"Interferon is off; ISG15 falls.", 1, [2]string{scoring.FactIncorrect, scoring.FactPresent}},
	} {
		v := JudgeKeywords(g, c.answer)
		if v.Score != c.score || v.Facts[0].Label != c.labels[0] || v.Facts[1].Label != c.labels[1] {
			t.Errorf("%q: score %v labels %s %s, want %v %v", c.answer, v.Score, v.Facts[0].Label, v.Facts[1].Label, c.score, c.labels)
		}
	}
}

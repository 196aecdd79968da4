package tasks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	heurekaexample "github.com/evalmesh/evalmesh/examples/heureka"
	"github.com/evalmesh/evalmesh/tasks"
)

func writeItems(t *testing.T, items []tasks.HeurekaItem) string {
	t.Helper()
	var b strings.Builder
	for _, it := range items {
		line, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "sc-items.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func heurekaData(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "expression.csv"), heurekaexample.Expression(), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

var judgeOpts = tasks.HeurekaImportOptions{
	JudgeImage:   "sha256:" + strings.Repeat("ab", 32),
	JudgeCommand: []string{"/judge"},
	JudgeModel:   "sha256:" + strings.Repeat("cd", 32),
}

func TestImportHeurekaBundle(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bundle")
	o := judgeOpts
	o.DataDir = heurekaData(t)
	m, err := tasks.ImportHeureka(writeItems(t, heurekaexample.Items()), out, o)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "sc-items" || !m.IsHeureka() || m.Metric.Name != "OEQCorrectness" {
		t.Fatalf("meta %+v", m)
	}
	rep := tasks.Check(out, tasks.CheckOptions{})
	if !rep.OK {
		t.Fatalf("imported bundle fails task check: %v", rep.Problems)
	}
	b, err := tasks.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	set, err := tasks.LoadHeureka(b)
	if err != nil || len(set.Questions) != 10 || set.Gold["q01"].MCQ != "A,C" {
		t.Fatalf("set %+v err %v", set, err)
	}
	// The agent's side holds no gold: neither letters nor answer text.
	pub, _ := os.ReadFile(filepath.Join(out, "public", "questions.jsonl"))
	if strings.Contains(string(pub), "four-fold") || strings.Contains(string(pub), `"A,C"`) {
		t.Fatal("public/questions.jsonl leaks the gold")
	}
	if _, err := os.Stat(filepath.Join(out, "public", "data", "expression.csv")); err != nil {
		t.Fatal(err)
	}
	// Re-importing over a bundle is refused, and leaves it as it was.
	if _, err := tasks.ImportHeureka(writeItems(t, heurekaexample.Items()), out, o); err == nil {
		t.Fatal("import over an existing bundle succeeded")
	}
}

func TestHeurekaCheckRules(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(it *tasks.HeurekaItem)
		want string
	}{
		{"no open-ended form", func(it *tasks.HeurekaItem) { it.OEQ.Question = " " }, "the open-ended form (oeq) is empty"},
		{"no multiple-choice form", func(it *tasks.HeurekaItem) { it.MCQ.Question = "" }, "the multiple-choice question is empty"},
		{"no options", func(it *tasks.HeurekaItem) { it.MCQ.Options = nil }, "needs 2–4 options"},
		{"same options", func(it *tasks.HeurekaItem) { it.MCQ.Options["D"] = " isg15 " }, "options A and D say the same thing"},
		{"letter E", func(it *tasks.HeurekaItem) { it.MCQ.Options["E"] = "MKI67" }, `option "E"`},
		{"gold not an option", func(it *tasks.HeurekaItem) { delete(it.MCQ.Options, "C"); it.MCQ.Answer = "A, c" }, "gold letter C is not among its options"},
		{"no gold letters", func(it *tasks.HeurekaItem) { it.MCQ.Answer = "" }, "no gold letters"},
		{"bad gold letters", func(it *tasks.HeurekaItem) { it.MCQ.Answer = "A or C" }, "expected letters A–D"},
		{"no gold text", func(it *tasks.HeurekaItem) { it.OEQ.Answer = "" }, "the gold answer text is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			items := heurekaexample.Items()
			c.edit(&items[0])
			out := filepath.Join(t.TempDir(), "bundle")
			o := judgeOpts
			o.DataDir = heurekaData(t)
			_, err := tasks.ImportHeureka(writeItems(t, items), out, o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `"q01"`) {
				t.Fatalf("err %v, want %q naming q01", err, c.want)
			}
			if _, serr := os.Stat(out); serr == nil {
				t.Fatal("a refused import left a bundle behind")
			}
		})
	}
	items := heurekaexample.Items()
	items[1].ID = items[0].ID
	if probs := tasks.CheckHeurekaItems(items); len(probs) == 0 || !strings.Contains(strings.Join(probs, ";"), "appears twice") {
		t.Fatalf("duplicate id: %v", probs)
	}
}

func TestHeurekaCheckBundleEdits(t *testing.T) {
	dir, err := heurekaexample.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if rep := tasks.Check(dir, tasks.CheckOptions{}); !rep.OK {
		t.Fatalf("example bundle: %v", rep.Problems)
	}
	// A gold answer whose question is gone from public/ is caught by task check.
	qp := filepath.Join(dir, "public", "questions.jsonl")
	q, _ := os.ReadFile(qp)
	lines := strings.SplitAfter(string(q), "\n")
	if err := os.WriteFile(qp, []byte(strings.Join(lines[1:], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := tasks.Check(dir, tasks.CheckOptions{})
	if rep.OK || !strings.Contains(strings.Join(rep.Problems, ";"), `gold answer "q01" has no question`) {
		t.Fatalf("problems %v", rep.Problems)
	}
	// task.yaml: a HeurekaBench task without its judge model is refused field by field.
	yp := filepath.Join(dir, "task.yaml")
	y, _ := os.ReadFile(yp)
	bad := strings.Replace(string(y), "model: sha256:", "model: latest-", 1)
	if _, err := tasks.ParseMeta([]byte(bad)); err == nil || !strings.Contains(err.Error(), "heureka.judge.model") {
		t.Fatalf("bad judge model: %v", err)
	}
	if _, err := tasks.ParseMeta([]byte(strings.Replace(string(y), "benchmark: heureka", "benchmark: heurekka", 1))); err == nil || !strings.Contains(err.Error(), "benchmark") {
		t.Fatalf("unknown benchmark: %v", err)
	}
}

func FuzzParseHeurekaItems(f *testing.F) {
	line, _ := json.Marshal(heurekaexample.Items()[0])
	f.Add(line)
	f.Add([]byte(`{"id":"q","oeq":{},"mcq":{"options":{"A":"x"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		items, err := tasks.ParseHeurekaItems(data)
		if err != nil {
			return
		}
		_ = tasks.CheckHeurekaItems(items) // never panics
	})
}

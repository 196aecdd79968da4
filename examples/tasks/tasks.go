// Package exampletasks generates the example task bundles: arithmetic word problems scored
// by Accuracy, a regression scored by MAE, and a sentiment classification scored by
// Accuracy. The data is generated from fixed seeds (math/rand/v2 PCG, whose output is
// specified), so every machine writes byte-identical bundles and therefore the same bundle
// CIDs. Each bundle carries its gold submission under private/ (gold_submission.csv) so
// the metric can be checked against the optimum.
package exampletasks

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names lists the example tasks in the order Generate writes them.
var Names = []string{"arithmetic", "regression", "sentiment"}

// Generate writes every example bundle under dir (dir/<name>/) and returns their folders.
// Existing files are overwritten with the same bytes.
func Generate(dir string) ([]string, error) {
	var out []string
	for _, name := range Names {
		files, err := Files(name)
		if err != nil {
			return nil, err
		}
		root := filepath.Join(dir, name)
		for rel, data := range files {
			p := filepath.Join(root, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				return nil, err
			}
		}
		out = append(out, root)
	}
	return out, nil
}

// Files returns one bundle's files by slash-separated relative path.
func Files(name string) (map[string][]byte, error) {
	switch name {
	case "arithmetic":
		return arithmetic(), nil
	case "regression":
		return regression(), nil
	case "sentiment":
		return sentiment(), nil
	}
	return nil, fmt.Errorf("no example task %q (have %s)", name, strings.Join(Names, ", "))
}

func writeCSV(rows [][]string) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.WriteAll(rows)
	return b.Bytes()
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x65766c6d657368)) }

// ---- arithmetic word problems ------------------------------------------------------------

var (
	people = []string{"Ada", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jun"}
	things = []string{"apples", "marbles", "stickers", "pencils", "cookies", "stamps", "shells", "cards"}
)

// problem returns a question and its integer answer. Four shapes: addition, subtraction,
// multiplication and division, each worded two ways.
func problem(r *rand.Rand) (string, int) {
	p, t := people[r.IntN(len(people))], things[r.IntN(len(things))]
	switch r.IntN(4) {
	case 0:
		a, b := 2+r.IntN(60), 2+r.IntN(40)
		if r.IntN(2) == 0 {
			return fmt.Sprintf("%s has %d %s. %s buys %d more. How many %s does %s have now?", p, a, t, p, b, t, p), a + b
		}
		return fmt.Sprintf("%s collected %d %s on Monday and %d %s on Tuesday. How many %s did %s collect in total?", p, a, t, b, t, t, p), a + b
	case 1:
		b := 2 + r.IntN(30)
		a := b + 1 + r.IntN(50)
		if r.IntN(2) == 0 {
			return fmt.Sprintf("%s has %d %s and gives away %d of them. How many %s are left?", p, a, t, b, t), a - b
		}
		return fmt.Sprintf("There were %d %s in a box. %s took %d. How many %s remain in the box?", a, t, p, b, t), a - b
	case 2:
		a, b := 2+r.IntN(11), 2+r.IntN(11)
		if r.IntN(2) == 0 {
			return fmt.Sprintf("%s has %d bags with %d %s in each bag. How many %s does %s have?", p, a, b, t, t, p), a * b
		}
		return fmt.Sprintf("Each of %d friends gives %s %d %s. How many %s does %s receive?", a, p, b, t, t, p), a * b
	default:
		b, q := 2+r.IntN(8), 2+r.IntN(12)
		a := b * q
		if r.IntN(2) == 0 {
			return fmt.Sprintf("%s shares %d %s equally among %d friends. How many %s does each friend get?", p, a, t, b, t), q
		}
		return fmt.Sprintf("%s packs %d %s into boxes of %d. How many boxes does %s fill?", p, a, t, b, p), q
	}
}

func arithmetic() map[string][]byte {
	r := rng(1)
	train := [][]string{{"id", "question", "Answer"}}
	for i := 0; i < 200; i++ {
		q, a := problem(r)
		train = append(train, []string{fmt.Sprintf("tr%03d", i), q, strconv.Itoa(a)})
	}
	test := [][]string{{"id", "question"}}
	labels := [][]string{{"id", "Answer"}}
	for i := 0; i < 150; i++ {
		q, a := problem(r)
		id := fmt.Sprintf("te%03d", i)
		test = append(test, []string{id, q})
		labels = append(labels, []string{id, strconv.Itoa(a)})
	}
	return bundle(meta{
		name: "ArithmeticWordProblemsAccuracy", category: "Math",
		problem: "Solve grade-school arithmetic word problems (one operation each).",
		metric:  "Accuracy", lower: false, optimal: 1, sota: 0.98, worst: 0,
		header: "id,Answer", rows: 150, column: "Answer",
	}, `# Arithmetic word problems

Each row of `+"`public/test.csv`"+` (columns `+"`id,question`"+`) is a short word problem whose answer is
a whole number. `+"`public/train.csv`"+` has 200 solved examples (`+"`id,question,Answer`"+`).

Write `+"`submission.csv`"+` to your output folder with header `+"`id,Answer`"+` and one row per test
question, in test order. Scored by accuracy (exact integer match).
`, train, test, labels)
}

// ---- regression ---------------------------------------------------------------------------

func regression() map[string][]byte {
	r := rng(2)
	row := func() ([]float64, float64) {
		x := []float64{r.Float64()*10 - 5, r.Float64()*10 - 5, r.Float64() * 20}
		y := 3*x[0] - 2*x[1] + 0.5*x[2] + 10 + r.NormFloat64()
		return x, y
	}
	f := func(v float64) string { return strconv.FormatFloat(math.Round(v*1e4)/1e4, 'f', -1, 64) }
	train := [][]string{{"id", "x1", "x2", "x3", "y"}}
	for i := 0; i < 300; i++ {
		x, y := row()
		train = append(train, []string{fmt.Sprintf("tr%03d", i), f(x[0]), f(x[1]), f(x[2]), f(y)})
	}
	test := [][]string{{"id", "x1", "x2", "x3"}}
	labels := [][]string{{"id", "y"}}
	for i := 0; i < 100; i++ {
		x, y := row()
		id := fmt.Sprintf("te%03d", i)
		test = append(test, []string{id, f(x[0]), f(x[1]), f(x[2])})
		labels = append(labels, []string{id, f(y)})
	}
	return bundle(meta{
		name: "SyntheticRegressionMAE", category: "Tabular",
		problem: "Predict a continuous target from three numeric features.",
		metric:  "MAE", lower: true, optimal: 0, sota: 0.8, worst: 12,
		header: "id,y", rows: 100, column: "y",
	}, `# Synthetic regression

`+"`public/train.csv`"+` has 300 rows `+"`id,x1,x2,x3,y`"+`; `+"`public/test.csv`"+` has 100 rows `+"`id,x1,x2,x3`"+`.
Predict y for every test row.

Write `+"`submission.csv`"+` to your output folder with header `+"`id,y`"+`, one row per test row in test
order. Scored by mean absolute error (lower is better).
`, train, test, labels)
}

// ---- sentiment classification -------------------------------------------------------------

var (
	posWords   = []string{"great", "excellent", "lovely", "delicious", "friendly", "perfect", "wonderful", "fresh"}
	negWords   = []string{"awful", "terrible", "rude", "cold", "stale", "dirty", "slow", "bland"}
	neuWords   = []string{"okay", "average", "fine", "ordinary", "standard", "typical", "plain", "usual"}
	subjects   = []string{"the food", "the service", "the staff", "the room", "the coffee", "the pasta", "the view", "the price"}
	fillers    = []string{"we went on a Sunday", "it was busy", "we sat outside", "my friend ordered first", "we came back later", "the menu was long"}
	sentiment3 = []string{"negative", "neutral", "positive"}
)

func review(r *rand.Rand) (string, string) {
	label := sentiment3[r.IntN(3)]
	words := map[string][]string{"positive": posWords, "negative": negWords, "neutral": neuWords}[label]
	var parts []string
	for i := 0; i < 2+r.IntN(2); i++ {
		w := words[r.IntN(len(words))]
		if r.Float64() < 0.2 { // noise: a word from another class
			w = [][]string{posWords, negWords, neuWords}[r.IntN(3)][r.IntN(8)]
		}
		parts = append(parts, fmt.Sprintf("%s was %s", subjects[r.IntN(len(subjects))], w))
	}
	parts = append(parts, fillers[r.IntN(len(fillers))])
	r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	s := strings.Join(parts, ", ") + "."
	return strings.ToUpper(s[:1]) + s[1:], label
}

func sentiment() map[string][]byte {
	r := rng(3)
	train := [][]string{{"id", "text", "label"}}
	for i := 0; i < 300; i++ {
		t, l := review(r)
		train = append(train, []string{fmt.Sprintf("tr%03d", i), t, l})
	}
	test := [][]string{{"id", "text"}}
	labels := [][]string{{"id", "label"}}
	for i := 0; i < 150; i++ {
		t, l := review(r)
		id := fmt.Sprintf("te%03d", i)
		test = append(test, []string{id, t})
		labels = append(labels, []string{id, l})
	}
	return bundle(meta{
		name: "ReviewSentimentAccuracy", category: "Text Classification",
		problem: "Classify short restaurant reviews as negative, neutral or positive.",
		metric:  "Accuracy", lower: false, optimal: 1, sota: 0.95, worst: 0.33,
		header: "id,label", rows: 150, column: "label",
	}, `# Review sentiment

`+"`public/train.csv`"+` has 300 labelled reviews `+"`id,text,label`"+` (label: negative, neutral or
positive); `+"`public/test.csv`"+` has 150 reviews `+"`id,text`"+`.

Write `+"`submission.csv`"+` to your output folder with header `+"`id,label`"+`, one row per test review
in test order. Scored by accuracy.
`, train, test, labels)
}

// ---- bundle layout ------------------------------------------------------------------------

type meta struct {
	name, category, problem, metric string
	lower                           bool
	optimal, sota, worst            float64
	header                          string
	rows                            int
	column                          string
}

func bundle(m meta, prompt string, train, test, labels [][]string) map[string][]byte {
	yaml := fmt.Sprintf(`# Generated by evalmesh (examples/tasks); do not edit: regenerate instead.
name: %s
version: "1.0.0"
category: %s
research_problem: %s
dataset:
  id: evalmesh/examples/%s
  splits:
    train: train
    test: test
metric:
  name: %s
  lower_is_better: %t
  optimal_score: %g
scoring_column: %s
submission:
  file: submission.csv
  header: [%s]
  rows: %d
sota:
  score: %g
  paper: evalmesh example (generator's noise floor)
estimated_worst_score: %g
limits:
  wall_clock_seconds: 120
  gpus: 0
  memory_bytes: 536870912
  cpus: 1
  pids: 64
evaluator:
  metric: %s
  labels: private/labels.csv
`, m.name, m.category, m.problem, strings.ToLower(m.name), m.metric, m.lower, m.optimal, m.column,
		strings.ReplaceAll(m.header, ",", ", "), m.rows, m.sota, m.worst, m.metric)
	gold := append([][]string(nil), labels...)
	return map[string][]byte{
		"task.yaml":                   []byte(yaml),
		"prompt.md":                   []byte(prompt),
		"public/train.csv":            writeCSV(train),
		"public/test.csv":             writeCSV(test),
		"private/labels.csv":          writeCSV(labels),
		"private/gold_submission.csv": writeCSV(gold),
	}
}

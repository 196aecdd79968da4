// Package kit is what the example agents share: finding the task's files through the
// EVALMESH_* variables (or the docker mount points), recognising which example task it is
// from the test file's header, and writing the submission. It imports nothing of evalmesh,
// so the agents build as static binaries (CGO_ENABLED=0) for FROM scratch images.
package kit

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// Kind is which example task a folder holds.
type Kind int

const (
	Unknown Kind = iota
	Arithmetic
	Regression
	Sentiment
)

// Task is what an agent reads.
type Task struct {
	Kind   Kind
	Train  [][]string // header first
	Test   [][]string // header first
	Seed   int
	Output string
	// IDColumn names the submission's first column; "" means "id".
	IDColumn string
}

// Column returns the index of name in a header, or -1.
func Column(header []string, name string) int {
	for i, h := range header {
		if h == name {
			return i
		}
	}
	return -1
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func readCSV(path string) ([][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return csv.NewReader(bytes.NewReader(data)).ReadAll()
}

// Load reads the task from the agent's environment.
func Load() (*Task, error) {
	pub := env("EVALMESH_PUBLIC", "/public")
	t := &Task{Output: env("EVALMESH_OUTPUT", "/output")}
	t.Seed, _ = strconv.Atoi(os.Getenv("EVALMESH_SEED"))
	var err error
	if t.Train, err = readCSV(filepath.Join(pub, "train.csv")); err != nil {
		return nil, err
	}
	if t.Test, err = readCSV(filepath.Join(pub, "test.csv")); err != nil {
		return nil, err
	}
	if len(t.Test) == 0 || len(t.Train) == 0 {
		return nil, fmt.Errorf("empty train or test file")
	}
	switch h := t.Test[0]; {
	case Column(h, "question") >= 0:
		t.Kind = Arithmetic
	case Column(h, "text") >= 0:
		t.Kind = Sentiment
	case Column(h, "x1") >= 0:
		t.Kind = Regression
	}
	return t, nil
}

// AnswerColumn is the submission's scored column for the task.
func (t *Task) AnswerColumn() string {
	switch t.Kind {
	case Arithmetic:
		return "Answer"
	case Regression:
		return "y"
	}
	return "label"
}

// Write writes submission.csv: header id,<answer column>, one row per test row.
func (t *Task) Write(answers []string) error {
	id := t.IDColumn
	if id == "" {
		id = "id"
	}
	rows := [][]string{{id, t.AnswerColumn()}}
	for i, r := range t.Test[1:] {
		rows = append(rows, []string{r[0], answers[i]})
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.WriteAll(rows); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.Output, "submission.csv"), b.Bytes(), 0o644)
}

// Solver answers every test row.
type Solver func(t *Task) ([]string, error)

// Main runs an agent: load, solve, write; it logs to stderr and returns the exit status.
func Main(name string, solve Solver, stderr io.Writer) int {
	t, err := Load()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	if t.Kind == Unknown {
		fmt.Fprintf(stderr, "%s: I do not know this task (test header %v)\n", name, t.Test[0])
		return 3
	}
	fmt.Fprintf(stderr, "%s: task kind %d, %d train rows, %d test rows, seed %d\n", name, t.Kind, len(t.Train)-1, len(t.Test)-1, t.Seed)
	answers, err := solve(t)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if err := t.Write(answers); err != nil {
		fmt.Fprintf(stderr, "%s: write submission: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: wrote %d answers\n", name, len(answers))
	return 0
}

// Float formats a prediction.
func Float(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }

// Numbers extracts the integers in s, in order.
func Numbers(s string) []int {
	var out []int
	n, in := 0, false
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] >= '0' && s[i] <= '9' {
			n = n*10 + int(s[i]-'0')
			in = true
			continue
		}
		if in {
			out = append(out, n)
		}
		n, in = 0, false
	}
	return out
}

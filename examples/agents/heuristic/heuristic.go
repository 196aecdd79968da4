// Package heuristic is the middling example agent: it adds the numbers of a word problem
// (right for additions only), predicts the training mean of a regression target, and
// labels a review by a small built-in word list, guessing (by seed) when the list is silent.
package heuristic

import (
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/evalmesh/evalmesh/examples/agents/kit"
)

// Main runs the agent and returns its exit status.
func Main(stderr io.Writer) int { return kit.Main("heuristic", Solve, stderr) }

// Solve answers every test row.
func Solve(t *kit.Task) ([]string, error) {
	r := rand.New(rand.NewPCG(uint64(t.Seed), 7))
	out := make([]string, 0, len(t.Test)-1)
	switch t.Kind {
	case kit.Arithmetic:
		q := kit.Column(t.Test[0], "question")
		for _, row := range t.Test[1:] {
			sum := 0
			for _, n := range kit.Numbers(row[q]) {
				sum += n
			}
			out = append(out, strconv.Itoa(sum))
		}
	case kit.Regression:
		y := kit.Column(t.Train[0], "y")
		mean := 0.0
		for _, row := range t.Train[1:] {
			v, _ := strconv.ParseFloat(row[y], 64)
			mean += v
		}
		mean /= float64(len(t.Train) - 1)
		for range t.Test[1:] {
			out = append(out, kit.Float(mean))
		}
	case kit.Sentiment:
		good := []string{"great", "excellent", "lovely", "perfect"}
		bad := []string{"awful", "terrible", "rude", "dirty"}
		x := kit.Column(t.Test[0], "text")
		for _, row := range t.Test[1:] {
			s := 0
			for _, w := range good {
				s += strings.Count(row[x], w)
			}
			for _, w := range bad {
				s -= strings.Count(row[x], w)
			}
			switch {
			case s > 0:
				out = append(out, "positive")
			case s < 0:
				out = append(out, "negative")
			default:
				out = append(out, []string{"negative", "neutral", "positive"}[r.IntN(3)])
			}
		}
	}
	return out, nil
}

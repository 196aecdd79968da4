// Package constant is the weakest example agent: it ignores the data and answers the same
// thing everywhere (0, 0.0, "neutral").
package constant

import (
	"io"

	"github.com/evalmesh/evalmesh/examples/agents/kit"
)

// Main runs the agent and returns its exit status.
func Main(stderr io.Writer) int { return kit.Main("constant", solve, stderr) }

func solve(t *kit.Task) ([]string, error) {
	answer := map[kit.Kind]string{kit.Arithmetic: "0", kit.Regression: "0", kit.Sentiment: "neutral"}[t.Kind]
	out := make([]string, len(t.Test)-1)
	for i := range out {
		out[i] = answer
	}
	return out, nil
}

// Package flaky is the heuristic agent with an unreliable scaffold: on one seed in three it
// crashes before writing anything, and on another one in three it writes a submission
// with the wrong header. It shows what invalid runs do to the valid-submission rate.
package flaky

import (
	"fmt"
	"io"

	"github.com/evalmesh/evalmesh/examples/agents/heuristic"
	"github.com/evalmesh/evalmesh/examples/agents/kit"
)

// Main runs the agent and returns its exit status.
func Main(stderr io.Writer) int {
	return kit.Main("flaky", func(t *kit.Task) ([]string, error) {
		switch t.Seed % 3 {
		case 1:
			return nil, fmt.Errorf("scaffold crashed (seed %d)", t.Seed)
		case 2:
			t.IDColumn = "ID" // wrong header: the submission is invalid
		}
		return heuristic.Solve(t)
	}, stderr)
}

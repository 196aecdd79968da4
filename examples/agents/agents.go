// Package agents is the registry of the example agents linked into the evalmesh binary
// (`evalmesh agent NAME`, hidden), so the process executor runs them with no build step.
// Each agent also builds as a static binary (examples/agents/cmd/NAME) for a FROM scratch
// docker image. The registry also holds an example evaluator that follows the AIRS-Bench
// evaluate.py contract, for tasks scored outside the built-in metrics.
package agents

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/evalmesh/evalmesh/examples/agents/constant"
	"github.com/evalmesh/evalmesh/examples/agents/cosci"
	"github.com/evalmesh/evalmesh/examples/agents/flaky"
	"github.com/evalmesh/evalmesh/examples/agents/heuristic"
	"github.com/evalmesh/evalmesh/examples/agents/solver"
)

// Agent is one example agent.
type Agent struct {
	Name        string
	Description string
	Main        func(stderr io.Writer) int
}

var registry = map[string]Agent{
	"constant":  {"constant", "answers the same thing everywhere (weakest)", constant.Main},
	"heuristic": {"heuristic", "sums numbers, predicts the mean, counts a few sentiment words", heuristic.Main},
	"solver":    {"solver", "parses the operation, fits least squares, trains naive Bayes (strongest)", solver.Main},
	"flaky":     {"flaky", "the heuristic agent, but it crashes or writes a bad header on two seeds in three", flaky.Main},
	// HeurekaBench co-scientists (examples/heureka): they answer only that task.
	"cosci-thorough": {"cosci-thorough", "co-scientist: analyses per cell type and condition (HeurekaBench, strongest)", cosci.Thorough},
	"cosci-hasty":    {"cosci-hasty", "co-scientist: pools all cells, guesses the rest, skips the last questions (HeurekaBench)", cosci.Hasty},
}

// CoScientists lists the HeurekaBench example agents the demo runs, weakest first.
var CoScientists = []string{"cosci-hasty", "cosci-thorough"}

// Baselines lists the agents the demo runs, weakest first.
var Baselines = []string{"constant", "heuristic", "flaky", "solver"}

// Names lists every registered agent.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup finds an agent by name.
func Lookup(name string) (Agent, bool) {
	a, ok := registry[name]
	return a, ok
}

// Run runs the named agent (or "evaluator" with its arguments) and returns its exit status.
func Run(name string, args []string, stdout, stderr io.Writer) int {
	if name == "evaluator" {
		return Evaluate(args, stdout, stderr)
	}
	if name == "heureka-judge" {
		return Judge(args, stdout, stderr)
	}
	a, ok := registry[name]
	if !ok {
		fmt.Fprintf(stderr, "no example agent %q (have %s, evaluator)\n", name, strings.Join(Names(), ", "))
		return 2
	}
	return a.Main(stderr)
}

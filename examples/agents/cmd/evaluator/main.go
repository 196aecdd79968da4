// Command evaluator is the example AIRS-Bench-contract evaluator as a static binary:
//
//	CGO_ENABLED=0 go build -o evaluator ./examples/agents/cmd/evaluator
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents"
)

func main() { os.Exit(agents.Evaluate(os.Args[1:], os.Stdout, os.Stderr)) }

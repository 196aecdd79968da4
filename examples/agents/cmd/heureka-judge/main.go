// Command heureka-judge is the stand-in HeurekaBench judge (a test double for an LLM judge,
// see agents.Judge) as a static binary, for a FROM scratch evaluator image:
//
//	CGO_ENABLED=0 go build -o judge ./examples/agents/cmd/heureka-judge
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents"
)

func main() { os.Exit(agents.Judge(os.Args[1:], os.Stdout, os.Stderr)) }

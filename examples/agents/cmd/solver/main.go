// Command solver is the solver example agent as a static binary, for a FROM scratch image:
//
//	CGO_ENABLED=0 go build -o agent ./examples/agents/cmd/solver
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/solver"
)

func main() { os.Exit(solver.Main(os.Stderr)) }

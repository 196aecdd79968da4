// Command heuristic is the heuristic example agent as a static binary, for a FROM scratch image:
//
//	CGO_ENABLED=0 go build -o agent ./examples/agents/cmd/heuristic
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/heuristic"
)

func main() { os.Exit(heuristic.Main(os.Stderr)) }

// Command react is the ReAct example agent (package react) as a static binary, for a FROM
// scratch image next to the stand-in model (examples/agents/Dockerfile.react):
//
//	CGO_ENABLED=0 go build -o agent ./examples/agents/cmd/react
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/react"
)

func main() { os.Exit(react.Main(os.Stderr)) }

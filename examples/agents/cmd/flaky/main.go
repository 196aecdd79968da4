// Command flaky is the flaky example agent as a static binary, for a FROM scratch image:
//
//	CGO_ENABLED=0 go build -o agent ./examples/agents/cmd/flaky
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/flaky"
)

func main() { os.Exit(flaky.Main(os.Stderr)) }

// Command cosci-thorough is the thorough HeurekaBench example co-scientist as a static
// binary, for a FROM scratch image:
//
//	CGO_ENABLED=0 go build -o agent ./examples/agents/cmd/cosci-thorough
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/cosci"
)

func main() { os.Exit(cosci.Thorough(os.Stderr)) }

// Command cosci-hasty is the hasty HeurekaBench example co-scientist as a static binary,
// for a FROM scratch image:
//
//	CGO_ENABLED=0 go build -o agent ./examples/agents/cmd/cosci-hasty
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/cosci"
)

func main() { os.Exit(cosci.Hasty(os.Stderr)) }

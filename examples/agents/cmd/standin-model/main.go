// Command standin-model is the stand-in model server (a test double; see package standin) as a
// static binary for a FROM scratch image:
//
//	CGO_ENABLED=0 go build -o model ./examples/agents/cmd/standin-model
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/standin"
)

func main() { os.Exit(standin.Main(os.Args[1:], os.Stdout, os.Stderr)) }

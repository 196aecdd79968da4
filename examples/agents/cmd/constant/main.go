// Command constant is the constant example agent as a static binary, for a FROM scratch image:
//
//	CGO_ENABLED=0 go build -o agent ./examples/agents/cmd/constant
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/examples/agents/constant"
)

func main() { os.Exit(constant.Main(os.Stderr)) }

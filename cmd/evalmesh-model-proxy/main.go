// Command evalmesh-model-proxy is the recording proxy the runner puts between an agent and
// its model (package runner/modelproxy), as a static binary the runner mounts into a
// container beside the model:
//
//	CGO_ENABLED=0 go build -o evalmesh-model-proxy ./cmd/evalmesh-model-proxy
//
// A node finds it beside its evalmesh binary, or where runner.models.proxy says.
package main

import (
	"os"

	"github.com/evalmesh/evalmesh/runner/modelproxy"
)

func main() { os.Exit(modelproxy.Main(os.Args[1:], os.Stdout, os.Stderr)) }

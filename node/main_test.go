package node

import (
	"os"
	"testing"

	"github.com/evalmesh/evalmesh/examples/agents"
)

// The mesh tests' agents and judge run as this test binary (runner.Runner.SelfExe):
// `TEST agent NAME ...`.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "agent" {
		os.Exit(agents.Run(os.Args[2], os.Args[3:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

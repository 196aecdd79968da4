package slurm

import (
	"os"
	"testing"

	"github.com/evalmesh/evalmesh/runner/slurm/slurmtest"
)

// TestMain lets this test binary be the job command on the test cluster's compute node
// (`<test binary> slurm-job SPEC`, as `evalmesh slurm-job SPEC` in production), and stops
// the shared cluster after the tests.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "slurm-job" {
		os.Exit(RunJob(os.Args[2], os.Stderr))
	}
	if os.Getenv(nodeEnv) != "" {
		os.Exit(nodeMain())
	}
	code := m.Run()
	slurmtest.StopShared()
	os.Exit(code)
}

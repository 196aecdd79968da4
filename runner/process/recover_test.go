package process

import (
	"testing"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// The node process is SIGKILLed mid-run (a helper process started the task and persisted
// its handle); the restarted node re-attaches, or reports the task lost.
func TestHelperProcess(t *testing.T) {
	executortest.HelperProcess(func() runner.Executor { return New(Options{}) })
	t.Skip("only runs as the SIGKILL recovery helper")
}

func TestSIGKILLRecovery(t *testing.T) {
	executortest.SIGKILLRecovery(t, testEnv(t), "TestHelperProcess")
}

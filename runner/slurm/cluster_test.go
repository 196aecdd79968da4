package slurm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/runner/slurm/slurmtest"
)

// startSleeping starts the test agent sleeping for an hour and waits until its container
// runs on the node (its log says so).
func startSleeping(t *testing.T, env executortest.Env, wall time.Duration) (runner.Executor, *runner.Handle, state) {
	t.Helper()
	ex := env.New()
	cfg := env.Task(t, "sleep", "1h")
	cfg.Limits.WallClock = wall
	h := executortest.Start(t, ex, cfg)
	testutil.WaitFor(t, 60*time.Second, "the agent to sleep in its job", func() bool {
		return strings.Contains(readFile(cfg.LogPath), "sleeping")
	})
	s, err := decodeState(h)
	if err != nil {
		t.Fatal(err)
	}
	return ex, h, s
}

// A job that reaches Slurm's time limit (the backstop behind the node's own deadline; the
// limit is lowered to now, as Slurm counts whole minutes) is reported as timed out.
func TestJobPastTimeLimitTimesOut(t *testing.T) {
	t.Parallel()
	env, c := testEnv(t)
	ex, h, s := startSleeping(t, env, time.Hour)
	c.Run(t, "scontrol", "update", "JobId="+s.JobID, "TimeLimit=0")
	res := executortest.Wait(t, ex, h)
	if !res.TimedOut || res.Successful() {
		t.Fatalf("result = %+v, want timed out", res)
	}
	j, err := ex.(*Executor).cli.showJob(context.Background(), s.JobID)
	if err != nil || j.State != "TIMEOUT" {
		t.Errorf("Slurm's state = %+v, %v; want TIMEOUT", j, err)
	}
	if log := readFile(h.Config.LogPath); strings.Contains(log, "done sleeping") {
		t.Errorf("the agent outlived its job:\n%s", log)
	}
}

// An operator's scancel is not the agent's doing: Wait reports the task lost, saying why.
func TestCancelledBehindEvalmeshsBack(t *testing.T) {
	t.Parallel()
	env, c := testEnv(t)
	ex, h, _ := startSleeping(t, env, 0)
	cancelOutside(t, c, h)
	_, err := ex.Wait(context.Background(), h)
	if !errors.Is(err, runner.ErrTaskLost) || !strings.Contains(err.Error(), "cancelled outside evalmesh") {
		t.Fatalf("Wait after an outside scancel = %v, want ErrTaskLost saying it was cancelled outside evalmesh", err)
	}
	st, err := ex.Inspect(context.Background(), h)
	if err != nil || st.Running || st.Exit == nil || !strings.Contains(st.Exit.Err, "cancelled outside evalmesh") {
		t.Errorf("Inspect = %+v, %v", st, err)
	}
}

// The partition's GPUs (two fake GRES GPUs) are the runner's inventory; capacity counts the
// free ones, so a job of someone else's that holds one leaves one.
func TestPartitionGPUsAndCapacity(t *testing.T) {
	c := slurmtest.Shared(t)
	ex, err := New(testOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := ex.GPUSource().Inventory()
	if err != nil || inv.CPUOnly || len(inv.GPUs) != 2 || inv.GPUs[1].UUID != "slurm:localhost/gpu1" || inv.GPUs[0].Name != "fake" {
		t.Fatalf("inventory = %+v, %v", inv, err)
	}
	ctx := context.Background()
	if n, err := ex.Capacity(ctx, 0); err != nil || n != 2 {
		t.Fatalf("capacity of an idle partition = %d, %v; want 2", n, err)
	}
	id := strings.TrimSpace(c.Run(t, "sbatch", "--parsable", "--gpus=1", "--output=/dev/null", "--wrap", "sleep 600"))
	t.Cleanup(func() { c.Run(t, "scancel", id) })
	testutil.WaitFor(t, 30*time.Second, "another user's GPU job to hold a GPU", func() bool {
		n, err := ex.Capacity(ctx, 0)
		return err == nil && n == 1
	})
	if n, _ := ex.Capacity(ctx, 1); n != 2 {
		t.Errorf("capacity with one run of this node = %d, want 2", n)
	}
}

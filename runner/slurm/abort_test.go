package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/runner/slurm/slurmtest"
)

// An aborted run under the slurm executor leaves nothing running when Run returns: its job
// is no longer active in Slurm (scancel, then waited out of COMPLETING) and the agent's
// container, whose agent ignores SIGTERM and has two children that do, is gone.
func TestAbortLeavesNothingRunning(t *testing.T) {
	c := slurmtest.Shared(t)
	cli := executortest.DockerClient(t)
	img := imageID(t, cli, executortest.Image(t, cli))
	r := slurmRunner(t, t.TempDir(), testOptions(c))
	agent := &agentspec.Spec{Name: "stubborn", Version: "1", Image: img, Command: []string{"/agent", "term-children"}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, runner.Request{TaskDir: exampleTask(t, "arithmetic"), Agent: agent})
		done <- err
	}()
	var st *runner.RunState
	testutil.WaitFor(t, 2*time.Minute, "the agent's job to run and start its children", func() bool {
		runs, _ := runner.ListRuns(r.Home)
		if len(runs) != 1 || runs[0].Phase != runner.PhaseAgent {
			return false
		}
		st = runs[0]
		b, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, st.ID), "logs", "agent.log"))
		return strings.Count(string(b), "child pid") == 2
	})
	s, err := decodeState(st.AgentHandle)
	if err != nil {
		t.Fatal(err)
	}
	cancel(runner.ErrAborted)
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("Run did not return within 3 minutes of the abort")
	}
	if !errors.Is(err, runner.ErrAborted) {
		t.Fatalf("Run after the abort: %v, want ErrAborted", err)
	}
	ex := r.Executors[DriverName].(*Executor)
	if j, err := ex.cli.lookup(context.Background(), s.JobID); err != nil || j != nil && j.active() {
		t.Fatalf("job %s after the abort: %+v, %v; want it ended", s.JobID, j, err)
	}
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("name", docker.ContainerName(st.AgentHandle.Config.ID)))})
	if err != nil || len(cs) != 0 {
		t.Fatalf("agent containers after the abort: %+v, %v", cs, err)
	}
}

package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

var childPID = regexp.MustCompile(`child pid (\d+)`)

// abortMidRun starts a run of agent, waits until its agent has started its two
// SIGTERM-ignoring children (their PIDs in the agent's log), aborts it (ErrAborted, as the
// mesh does when the slot finished elsewhere) and returns the run's ID and the children's
// PIDs once Run has returned. It asserts Run reports the abort and the run is failed, so
// Recover will not re-attach to it.
func abortMidRun(t *testing.T, r *runner.Runner, task string, agent *agentspec.Spec) (string, []int) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(bg)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, runner.Request{TaskDir: task, Agent: agent})
		done <- err
	}()
	var id string
	var pids []int
	testutil.WaitFor(t, 90*time.Second, "the agent to start its two children", func() bool {
		runs, _ := runner.ListRuns(r.Home)
		if len(runs) != 1 || runs[0].Phase != runner.PhaseAgent {
			return false
		}
		id = runs[0].ID
		b, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, id), "logs", "agent.log"))
		pids = pids[:0]
		for _, m := range childPID.FindAllSubmatch(b, -1) {
			n, _ := strconv.Atoi(string(m[1]))
			pids = append(pids, n)
		}
		return len(pids) == 2
	})
	cancel(runner.ErrAborted)
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("Run did not return within 3 minutes of the abort")
	}
	if !errors.Is(err, runner.ErrAborted) {
		t.Fatalf("Run after the abort: %v, want ErrAborted", err)
	}
	if st, _ := runner.LoadState(r.Home, id); st.Phase != runner.PhaseFailed {
		t.Fatalf("aborted run is in phase %s, want failed", st.Phase)
	}
	if rec, _ := r.Recover(bg); len(rec) != 0 {
		t.Fatalf("Recover picked up the aborted run: %+v", rec)
	}
	return id, pids
}

// processAlive reports whether pid names a live process (not a zombie).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st := regexp.MustCompile(`\) (\S)`).FindSubmatch(b)
	return st != nil && st[1][0] != 'Z' && st[1][0] != 'X'
}

// An aborted run under the process executor leaves no process: not the agent, not its
// child that ignores SIGTERM, not the one that left the agent's process group.
func TestAbortLeavesNothingRunningProcess(t *testing.T) {
	r := processRunner(t, newHome(t), nil)
	agent := &agentspec.Spec{Name: "stubborn", Version: "1", Command: []string{executortest.Binary(t), "term-children"}}
	_, pids := abortMidRun(t, r, exampleTask(t, "arithmetic"), agent)
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("child %d of the aborted agent still runs", pid)
		}
	}
}

// An aborted run under the docker executor leaves no container: neither the agent's nor
// its model's.
func TestAbortLeavesNothingRunningDocker(t *testing.T) {
	r, ex, img := podRunner(t)
	agent := &agentspec.Spec{Name: "stubborn", Version: "1", Image: img, Command: []string{"/testagent", "term-children"}, Model: standinModel(img)}
	id, _ := abortMidRun(t, r, exampleTask(t, "arithmetic"), agent)
	if left := runContainers(t, ex, id); len(left) != 0 {
		t.Fatalf("containers left after the abort: %+v", left)
	}
}

package docker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// The node process is SIGKILLed mid-run (a helper process started the task and persisted
// its handle); the restarted node re-attaches, or reports the task lost.
func TestHelperProcess(t *testing.T) {
	executortest.HelperProcess(func() runner.Executor {
		ex, err := New(Options{StopGrace: time.Second})
		if err != nil {
			panic(err)
		}
		return ex
	})
	t.Skip("only runs as the SIGKILL recovery helper")
}

func TestSIGKILLRecovery(t *testing.T) {
	env, _ := testEnv(t)
	executortest.SIGKILLRecovery(t, env, "TestHelperProcess")
}

func TestExitResult(t *testing.T) {
	deadline := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	before, after := "2026-01-01T11:59:59Z", "2026-01-01T12:00:01Z"
	for _, tc := range []struct {
		name string
		st   container.State
		want runner.ExitResult
	}{
		{"clean", container.State{Status: "exited", FinishedAt: before}, runner.ExitResult{}},
		{"failed", container.State{Status: "exited", ExitCode: 1, FinishedAt: before}, runner.ExitResult{ExitCode: 1}},
		{"oom", container.State{Status: "exited", ExitCode: 137, OOMKilled: true, FinishedAt: after}, runner.ExitResult{ExitCode: 137, Signal: 9, OOMKilled: true}},
		// Stopped at the deadline by a node that then died before reporting.
		{"killed at deadline", container.State{Status: "exited", ExitCode: 143, FinishedAt: after}, runner.ExitResult{ExitCode: 143, Signal: 15, TimedOut: true}},
		{"clean exit after deadline", container.State{Status: "exited", FinishedAt: after}, runner.ExitResult{}},
		{"never started", container.State{Status: "created", FinishedAt: "0001-01-01T00:00:00Z"}, runner.ExitResult{ExitCode: -1, Err: "container was created but never started"}},
		{"engine error", container.State{Status: "exited", ExitCode: 127, Error: "exec: no such file", FinishedAt: before}, runner.ExitResult{ExitCode: 127, Err: "exec: no such file"}},
	} {
		got := exitResult(&tc.st, deadline)
		got.Finished = time.Time{}
		if *got != tc.want {
			t.Errorf("%s: exitResult = %+v, want %+v", tc.name, *got, tc.want)
		}
	}
}

// An inspect that lost podman 4.3's race with the container's exit is asked again; any other
// error is not, and a race that does not clear gives up after exitRaceTries.
func TestInspectRetriesTheExitRace(t *testing.T) {
	race := errors.New("Error response from daemon: read /proc/14124/cgroup: no such process")
	for _, tc := range []struct {
		name      string
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{"race then the answer", []error{race, race, nil}, 3, false},
		{"another error is final", []error{errors.New("connection refused"), nil}, 1, true},
		{"a race that does not clear", []error{race, race, race, race, race}, exitRaceTries, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			v, err := retryExitRace(context.Background(), func() (int, error) {
				err := tc.errs[calls]
				calls++
				if err != nil {
					return 0, err
				}
				return 7, nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr || (err == nil && v != 7) {
				t.Fatalf("calls %d (want %d), value %d, err %v (want error: %v)", calls, tc.wantCalls, v, err, tc.wantErr)
			}
		})
	}
}

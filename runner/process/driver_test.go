package process

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

func testEnv(t *testing.T) executortest.Env {
	return executortest.Env{
		New:   func() runner.Executor { return New(Options{StopGrace: 0}) },
		Agent: executortest.Binary(t),
		Remove: func(t *testing.T, h *runner.Handle) {
			s, err := decodeState(h)
			if err != nil {
				t.Fatal(err)
			}
			// The whole group dies by SIGKILL: the supervisor records nothing.
			if err := syscall.Kill(-s.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			executortest.WaitFor(t, 10e9, "the task to die", func() bool { return !alive(s) })
		},
	}
}

func TestConformance(t *testing.T) {
	executortest.Run(t, testEnv(t))
}

// A supervisor that died without recording a status cannot say how the agent ended: after a
// restart, Wait says so instead of inventing an exit code.
func TestStatusUnknownAfterRestart(t *testing.T) {
	env := testEnv(t)
	ex := New(Options{})
	h := executortest.Start(t, ex, env.Task(t, "sleep", "1h"))
	after := New(Options{PollInterval: 10e6})
	watching := make(chan struct{})
	after.attached = func() { close(watching) }
	if err := after.Recover(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type out struct {
		res *runner.ExitResult
		err error
	}
	done := make(chan out, 1)
	go func() { r, err := after.Wait(ctx, h); done <- out{r, err} }()
	<-watching
	s, _ := decodeState(h)
	if err := syscall.Kill(-s.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.res.Err != ErrStatusUnknown {
		t.Fatalf("Wait = %+v, %v; want Err %q", o.res, o.err, ErrStatusUnknown)
	}
}

func TestCgroupLimits(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.procs"); err != nil {
		t.Skip("skipping: no cgroup v1 memory hierarchy here")
	}
	env := testEnv(t)
	ex := New(Options{})
	cfg := env.Task(t, "alloc", "1024")
	cfg.Limits.MemoryBytes = 64 << 20
	h := executortest.Start(t, ex, cfg)
	s, _ := decodeState(h)
	if len(s.Cgroups) == 0 {
		t.Skip("skipping: cgroup hierarchy not writable here")
	}
	res := executortest.Wait(t, ex, h)
	if !res.OOMKilled || res.Successful() {
		t.Fatalf("result = %+v, want OOM-killed\n%s", res, executortest.Log(t, h))
	}
	if strings.Contains(executortest.Log(t, h), "allocated all") {
		t.Error("agent allocated 1 GiB under a 64 MiB limit")
	}
}

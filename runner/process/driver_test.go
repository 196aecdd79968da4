package process

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"

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
			testutil.WaitFor(t, 10e9, "the task to die", func() bool { return !alive(s) })
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

// With a writable pids cgroup, a fork bomb stops at the limit (without one it would not, so
// the test skips rather than let the agent fill the machine's process table).
func TestCgroupPidsLimit(t *testing.T) {
	if _, err := os.Stat("/sys/fs/cgroup/pids/cgroup.procs"); err != nil {
		t.Skip("skipping: no cgroup v1 pids hierarchy here")
	}
	env := testEnv(t)
	ex := New(Options{})
	cfg := env.Task(t, "forkbomb")
	cfg.Limits = runner.Limits{PIDs: 32, WallClock: time.Minute}
	h := executortest.Start(t, ex, cfg)
	s, _ := decodeState(h)
	if len(s.Cgroups) == 0 {
		t.Skip("skipping: cgroup hierarchy not writable here")
	}
	res := executortest.Wait(t, ex, h)
	log := executortest.Log(t, h)
	if res.Successful() || res.TimedOut {
		t.Fatalf("result = %+v, want stopped by the pids limit\n%s", res, log)
	}
	if m := regexp.MustCompile(`forkbomb: started (\d+), then`).FindStringSubmatch(log); m != nil {
		if n, _ := strconv.Atoi(m[1]); n >= 32 {
			t.Fatalf("started %d processes under a limit of 32", n)
		}
	} else if !strings.Contains(log, "failed to create new OS thread") {
		t.Fatalf("fork bomb did not hit the pids limit:\n%s", log)
	}
}

// Without cgroups the memory limit falls back to RLIMIT_DATA: a Go agent still starts under a
// small limit (RLIMIT_AS would kill it at startup) and cannot allocate past it.
func TestRlimitMemoryFallback(t *testing.T) {
	env := testEnv(t)
	ex := New(Options{NoCgroups: true})
	cfg := env.Task(t, "exit", "0")
	cfg.Limits.MemoryBytes = 64 << 20
	h := executortest.Start(t, ex, cfg)
	if res := executortest.Wait(t, ex, h); !res.Successful() {
		t.Fatalf("a small agent under a 64 MiB limit = %+v\n%s", res, executortest.Log(t, h))
	}
	cfg = env.Task(t, "alloc", "1024")
	cfg.Limits.MemoryBytes = 64 << 20
	h = executortest.Start(t, ex, cfg)
	res := executortest.Wait(t, ex, h)
	if res.Successful() || strings.Contains(executortest.Log(t, h), "allocated all") {
		t.Fatalf("agent allocated 1 GiB under a 64 MiB RLIMIT_DATA: %+v", res)
	}
}

// A task without a network sees only lo where the node can give it a namespace (root); with
// Network it sees the host's interfaces. The agent only lists interfaces, it sends nothing.
func TestNetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root; the process executor then shares the host network (documented)")
	}
	env := testEnv(t)
	ex := New(Options{})
	h := executortest.Start(t, ex, env.Task(t, "netifs"))
	res := executortest.Wait(t, ex, h)
	s, _ := decodeState(h)
	if !s.NetworkIsolated {
		t.Skip("skipping: this node cannot create network namespaces")
	}
	if log := executortest.Log(t, h); !res.Successful() || !strings.Contains(log, "interfaces: lo\n") {
		t.Fatalf("isolated task: %+v\n%s", res, log)
	}
	cfg := env.Task(t, "netifs")
	cfg.Network = true
	h = executortest.Start(t, ex, cfg)
	executortest.Wait(t, ex, h)
	if NetworkIsolated(h) {
		t.Error("a task with Network was isolated")
	}
	if log := executortest.Log(t, h); strings.Contains(log, "interfaces: lo\n") {
		t.Errorf("a task with Network saw only lo:\n%s", log)
	}
}

func TestStartRejectsMissingAgent(t *testing.T) {
	env := testEnv(t)
	cfg := env.Task(t)
	cfg.Command = []string{"/nonexistent/agent"}
	if _, err := New(Options{}).Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Fatalf("Start with a missing agent = %v, want a clear error", err)
	}
}

// An agent task runs in a sandbox laid out like the container (public/, task/, workspace/,
// output/ and nothing else beside public/), as nobody on a root node; what it leaves in
// output/ comes back to the run's output folder, without the links and FIFOs it made.
func TestAgentSandboxUIDAndOutput(t *testing.T) {
	env := testEnv(t)
	cfg := env.Task(t)
	cfg.Command = []string{"/bin/sh", "-c", `id -u; ls "$EVALMESH_PUBLIC/.."; cat "$EVALMESH_PUBLIC/train.csv"
echo 1,42 > "$EVALMESH_OUTPUT/submission.csv"; mkdir "$EVALMESH_OUTPUT/sub"; echo y > "$EVALMESH_OUTPUT/sub/f"
ln -s /etc/passwd "$EVALMESH_OUTPUT/evil"; mkfifo "$EVALMESH_OUTPUT/fifo"`}
	ex := New(Options{SandboxDir: t.TempDir()})
	if err := os.Chmod(ex.opts.SandboxDir, 0o711); err != nil {
		t.Fatal(err)
	}
	for p := ex.opts.SandboxDir; p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o711) // the agent's uid must reach its sandbox
	}
	h := executortest.Start(t, ex, cfg)
	res := executortest.Wait(t, ex, h)
	log := executortest.Log(t, h)
	if !res.Successful() {
		t.Fatalf("result %+v\n%s", res, log)
	}
	root := os.Geteuid() == 0
	wantUID := strconv.Itoa(os.Geteuid())
	if root {
		wantUID = strconv.Itoa(DefaultUID)
	}
	if lines := strings.Split(log, "\n"); lines[0] != wantUID || strings.Join(lines[1:5], " ") != "output public task workspace" || lines[5] != "x,y" {
		t.Fatalf("agent's view (want uid %s, then only its own folders):\n%s", wantUID, log)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.OutputDir, "submission.csv")); err != nil || string(b) != "1,42\n" {
		t.Fatalf("submission on host: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.OutputDir, "sub", "f")); err != nil || string(b) != "y\n" {
		t.Fatalf("sub/f on host: %q %v", b, err)
	}
	for _, n := range []string{"evil", "fifo"} {
		if _, err := os.Lstat(filepath.Join(cfg.OutputDir, n)); err == nil {
			t.Fatalf("the agent's %s was copied out of its sandbox", n)
		}
	}
	c := ex.Containment(h)
	if c.Isolation != attest.IsolationProcess || c.SeparateUID != root || c.Limits != map[bool]string{true: "cgroup1", false: "rlimit"}[root] {
		t.Fatalf("containment %+v", c)
	}
}

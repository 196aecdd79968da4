package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"

	cerrdefs "github.com/containerd/errdefs"

	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// syncBuffer is a bytes.Buffer safe to read while the command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// killedRun starts `evalmesh run ARGS` as its own process, waits until its agent task is
// recorded, SIGKILLs it, and returns the run's ID.
func killedRun(t *testing.T, h string, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"run", "--home", h, "--self-signed"}, args...)...)
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_CLI=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	testutil.WaitFor(t, 60*time.Second, "the killed node's agent task to be recorded", func() bool {
		runs, _ := runner.ListRuns(home.Home{Dir: h})
		if len(runs) == 1 && runs[0].Phase == runner.PhaseAgent {
			id = runs[0].ID
			return true
		}
		return false
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("evalmesh run ended before it was killed: %s", stderr.String())
	}
	return id
}

// killedGatedRun makes a node home in dir with the example tasks and leaves in it a run of
// the arithmetic task killed in its agent phase, whose agent (process executor) goes on
// running while the hold file exists: removing hold, or dir, lets it end.
func killedGatedRun(t *testing.T, dir string) (h, task, hold, id string) {
	t.Helper()
	h = filepath.Join(dir, "home")
	if _, e, code := runE2(t, "init", "--home", h); code != 0 {
		t.Fatal(e)
	}
	if _, err := exampletasks.Generate(filepath.Join(dir, "tasks")); err != nil {
		t.Fatal(err)
	}
	task = filepath.Join(dir, "tasks", "arithmetic")
	hold = filepath.Join(openToAgents(t, dir), "hold") // the agent (uid nobody on root) sees it
	os.WriteFile(hold, nil, 0o644)
	gated := filepath.Join(dir, "gated.yaml")
	os.WriteFile(gated, []byte("name: gated\nversion: \"1\"\ncommand: [/bin/sh, -c, 'while [ -e "+hold+" ]; do sleep 0.05; done']\n"), 0o644)
	return h, task, hold, killedRun(t, h, "--task", task, "--agent", gated, "--executor", "process")
}

func runPhase(t *testing.T, h, id string) runner.Phase {
	t.Helper()
	st, err := runner.LoadState(home.Home{Dir: h}, id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Phase
}

func attestations(t *testing.T, h string) int {
	t.Helper()
	ents, _ := os.ReadDir(home.Home{Dir: h}.AttestationsDir())
	return len(ents)
}

// A new `evalmesh run` recovers a killed one alongside its own run: it does not wait for the
// re-attached agent before starting, and it attests both, each once.
func TestRunRecoversAlongsideTheNewRun(t *testing.T) {
	dir := t.TempDir()
	h, task, hold, old := killedGatedRun(t, dir)
	solver := filepath.Join(dir, "solver.yaml")
	os.WriteFile(solver, []byte("name: solver\nversion: \"1.0.0\"\ncommand: [evalmesh, agent, solver]\n"), 0o644)

	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"run", "--home", h, "--task", task, "--agent", solver, "--executor", "process", "--self-signed"}, &stdout, &stderr)
	}()
	// The new run is attested, and its result printed, while the recovered agent still
	// waits at its gate.
	testutil.WaitFor(t, 60*time.Second, "the new run's result while the recovered agent still runs", func() bool {
		return strings.Contains(stdout.String(), "score       Accuracy = 1")
	})
	if n := attestations(t, h); n != 1 {
		t.Fatalf("%d attestations while the recovered agent runs, want 1", n)
	}
	if p := runPhase(t, h, old); p != runner.PhaseAgent {
		t.Fatalf("recovered run in phase %s before its agent ended", p)
	}
	testutil.WaitFor(t, 10*time.Second, "the note that the command waits for the recovered run", func() bool {
		return strings.Contains(stderr.String(), "waiting for the recovered run(s) to end")
	})
	os.Remove(hold)
	res := struct {
		out, errs string
		code      int
	}{code: <-done}
	res.out, res.errs = stdout.String(), stderr.String()
	if res.code != 0 {
		t.Fatalf("run: %d\n%s\n%s", res.code, res.out, res.errs)
	}
	if !strings.Contains(res.errs, "recovered run "+old+": attestation bafkrei") {
		t.Fatalf("stderr does not report the recovered run:\n%s", res.errs)
	}
	if p := runPhase(t, h, old); p != runner.PhaseDone {
		t.Fatalf("recovered run in phase %s", p)
	}
	if n := attestations(t, h); n != 2 {
		t.Fatalf("%d attestations, want 2 (one per run)", n)
	}
	// Nothing is left to recover.
	if out, e, code := runE2(t, "run", "--home", h, "--recover"); code != 0 || e != "" || !strings.Contains(out, "no unfinished runs") {
		t.Fatalf("second recovery: %d %q %q", code, out, e)
	}
}

// A docker run killed mid-run and recovered by `evalmesh run --recover --executor process`
// (a lab that usually runs the process executor) is re-attached through the engine, not
// failed while its container runs on.
func TestRunRecoverDockerRunFromProcessExecutor(t *testing.T) {
	cli := executortest.DockerClient(t)
	insp, err := cli.ImageInspect(context.Background(), executortest.Image(t, cli))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	if _, e, code := runE2(t, "init", "--home", h); code != 0 {
		t.Fatal(e)
	}
	if _, err := exampletasks.Generate(filepath.Join(dir, "tasks")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "sleeper.yaml")
	os.WriteFile(spec, []byte("name: sleeper\nversion: \"1\"\nimage: "+insp.ID+"\ncommand: [/agent, sleep, 3s]\n"), 0o644)
	id := killedRun(t, h, "--task", filepath.Join(dir, "tasks", "arithmetic"), "--agent", spec, "--executor", "docker")
	name := docker.ContainerName(id + "-agent")
	if c, err := cli.ContainerInspect(context.Background(), name); err != nil || !c.State.Running {
		t.Fatalf("agent container after SIGKILL: %v", err)
	}

	out, e, code := runE2(t, "run", "--home", h, "--recover", "--executor", "process")
	if code != 0 || !strings.Contains(e, "recovered run "+id+": attestation bafkrei") {
		t.Fatalf("run --recover: %d\n%s\n%s", code, out, e)
	}
	if p := runPhase(t, h, id); p != runner.PhaseDone {
		t.Fatalf("phase %s", p)
	}
	if _, err := cli.ContainerInspect(context.Background(), name); !cerrdefs.IsNotFound(err) {
		t.Fatalf("agent container still there after recovery: %v", err)
	}
	if n := attestations(t, h); n != 1 {
		t.Fatalf("%d attestations", n)
	}
	if _, e, code := runE2(t, "run", "--home", h, "--recover", "--task", "x"); code == 0 || !strings.Contains(e, "starts no new run") {
		t.Fatalf("--recover with --task: %d %s", code, e)
	}
}

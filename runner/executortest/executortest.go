// Package executortest is the conformance suite every runner.Executor passes: the same
// behaviours (exit status, logs, folders, wall clock, stop, inspect, recovery after a
// restart, recovery after the node was SIGKILLed) checked against each implementation with
// the test agent of ./agent (hostile modes included).
package executortest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"

	"github.com/evalmesh/evalmesh/runner"
)

// Env describes one executor under test.
type Env struct {
	// New returns a fresh executor; a second instance stands for the node after a restart.
	New func() runner.Executor
	// Image is the agent image (docker) or "".
	Image string
	// Agent is the agent executable as the task sees it ("/agent" in the image, or a host path).
	Agent string
	// Remove makes a task vanish behind the executor's back (container removed, process
	// group killed), for the lost-task cases.
	Remove func(t *testing.T, h *runner.Handle)
}

var seq atomic.Int64

// Task returns a config for one run of the test agent with fresh folders under t.TempDir.
func (e Env) Task(t *testing.T, args ...string) runner.TaskConfig {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"public", "workspace", "output"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "public", "train.csv"), []byte("x,y\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("Solve the task.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("test-%d-%d-%s", os.Getpid(), seq.Add(1), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	return runner.TaskConfig{
		ID:           id,
		Image:        e.Image,
		Command:      append([]string{e.Agent}, args...),
		PublicDir:    filepath.Join(dir, "public"),
		WorkspaceDir: filepath.Join(dir, "workspace"),
		OutputDir:    filepath.Join(dir, "output"),
		PromptPath:   filepath.Join(dir, "prompt.md"),
		LogPath:      filepath.Join(dir, "logs", "agent.log"),
		Limits:       runner.Limits{MemoryBytes: 256 << 20, PIDs: 64, NanoCPUs: 1e9},
	}
}

// Start starts cfg and destroys the task when the test ends.
func Start(t *testing.T, ex runner.Executor, cfg runner.TaskConfig) *runner.Handle {
	t.Helper()
	h, err := ex.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := ex.Destroy(context.Background(), h); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return h
}

// Wait waits with a generous bound, failing the test instead of hanging.
func Wait(t *testing.T, ex runner.Executor, h *runner.Handle) *runner.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := ex.Wait(ctx, h)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

// Log returns the task's log file.
func Log(t *testing.T, h *runner.Handle) string {
	t.Helper()
	b, err := os.ReadFile(h.Config.LogPath)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return string(b)
}

// Run runs the conformance suite.
func Run(t *testing.T, env Env) {
	t.Run("ExitZero", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		cfg := env.Task(t, "exit", "0")
		h := Start(t, ex, cfg)
		if h.Driver != ex.Name() || h.Config.ID != cfg.ID {
			t.Errorf("handle = %+v, want driver %s and ID %s", h, ex.Name(), cfg.ID)
		}
		res := Wait(t, ex, h)
		if !res.Successful() {
			t.Fatalf("result = %+v, want success", res)
		}
		if res.Finished.IsZero() {
			t.Error("result has no finish time")
		}
		log := Log(t, h)
		for _, want := range []string{"hello stdout", "hello stderr"} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
		b, err := os.ReadFile(filepath.Join(cfg.OutputDir, "submission.csv"))
		if err != nil || string(b) != "id,answer\n1,42\n" {
			t.Errorf("submission on host = %q, %v", b, err)
		}
	})
	t.Run("ExitNonzeroAndIdempotentWait", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		h := Start(t, ex, env.Task(t, "exit", "3"))
		res := Wait(t, ex, h)
		if res.ExitCode != 3 || res.Successful() || res.TimedOut || res.OOMKilled {
			t.Fatalf("result = %+v, want exit code 3", res)
		}
		again := Wait(t, ex, h)
		if again.ExitCode != res.ExitCode || again.Signal != res.Signal || again.TimedOut != res.TimedOut || again.Err != res.Err {
			t.Errorf("second Wait = %+v, first %+v", again, res)
		}
		st, err := ex.Inspect(context.Background(), h)
		if err != nil || st.Running || st.Exit == nil || st.Exit.ExitCode != 3 {
			t.Errorf("Inspect after exit = %+v, %v", st, err)
		}
	})
	t.Run("FoldersAndEnv", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		cfg := env.Task(t, "env")
		cfg.Env = map[string]string{"TEST_GREETING": "hi"}
		h := Start(t, ex, cfg)
		if res := Wait(t, ex, h); !res.Successful() {
			t.Fatalf("result = %+v\n%s", res, Log(t, h))
		}
		log := Log(t, h)
		for _, want := range []string{"TEST_GREETING=hi", "public: train.csv", "prompt: Solve the task.", runner.EnvOutput + "=", runner.EnvWorkspace + "="} {
			if !strings.Contains(log, want) {
				t.Errorf("log lacks %q:\n%s", want, log)
			}
		}
	})
	t.Run("WallClock", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		cfg := env.Task(t, "sleep", "1h")
		cfg.Limits.WallClock = time.Second
		h := Start(t, ex, cfg)
		if h.Deadline.Sub(h.Started) != time.Second {
			t.Errorf("deadline %v after start, want 1s", h.Deadline.Sub(h.Started))
		}
		res := Wait(t, ex, h)
		if !res.TimedOut || res.Successful() {
			t.Fatalf("result = %+v, want timed out", res)
		}
	})
	t.Run("StopAndInspect", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		h := Start(t, ex, env.Task(t, "sleep", "1h"))
		testutil.WaitFor(t, 30*time.Second, "the agent to start sleeping", func() bool {
			b, _ := os.ReadFile(h.Config.LogPath)
			if len(b) > 0 {
				return true
			}
			// docker: the log file is written by Wait; look at Inspect instead.
			st, err := ex.Inspect(context.Background(), h)
			return err == nil && st.Running && ex.Name() == "docker"
		})
		st, err := ex.Inspect(context.Background(), h)
		if err != nil || !st.Running || st.Exit != nil {
			t.Fatalf("Inspect while sleeping = %+v, %v", st, err)
		}
		if err := ex.Stop(context.Background(), h, time.Second); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		res := Wait(t, ex, h)
		// The test agent has no SIGTERM handler, so it dies of the signal.
		if res.Signal == 0 || res.TimedOut || res.Successful() {
			t.Fatalf("result after Stop = %+v, want killed by a signal, not timed out", res)
		}
		if log := Log(t, h); strings.Contains(log, "done sleeping") {
			t.Errorf("agent finished its sleep despite Stop:\n%s", log)
		}
	})
	t.Run("RecoverRunningAfterRestart", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		h := Start(t, ex, env.Task(t, "sleep", "2s"))
		saved := roundTrip(t, h)
		after := env.New() // the node after a restart
		if err := after.Recover(context.Background(), saved); err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if err := after.Recover(context.Background(), saved); err != nil {
			t.Fatalf("second Recover: %v", err)
		}
		res := Wait(t, after, saved)
		if !res.Successful() {
			t.Fatalf("result = %+v, want success", res)
		}
		if log := Log(t, saved); !strings.Contains(log, "sleeping") || !strings.Contains(log, "done sleeping") {
			t.Errorf("log incomplete after recovery:\n%s", log)
		}
	})
	t.Run("DeadlineSurvivesRestart", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		cfg := env.Task(t, "sleep", "1h")
		cfg.Limits.WallClock = 2 * time.Second
		h := Start(t, ex, cfg)
		saved := roundTrip(t, h)
		after := env.New()
		if err := after.Recover(context.Background(), saved); err != nil {
			t.Fatalf("Recover: %v", err)
		}
		res := Wait(t, after, saved)
		if !res.TimedOut {
			t.Fatalf("result = %+v, want timed out at the saved deadline", res)
		}
	})
	t.Run("LostAfterDestroy", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		h := Start(t, ex, env.Task(t, "exit", "0"))
		Wait(t, ex, h)
		if err := ex.Destroy(context.Background(), h); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
		after := env.New()
		if err := after.Recover(context.Background(), h); !errors.Is(err, runner.ErrTaskLost) {
			t.Fatalf("Recover after Destroy = %v, want ErrTaskLost", err)
		}
		if _, err := after.Wait(context.Background(), h); !errors.Is(err, runner.ErrTaskLost) {
			t.Fatalf("Wait after Destroy = %v, want ErrTaskLost", err)
		}
	})
	t.Run("WrongDriverHandle", func(t *testing.T) {
		t.Parallel()
		ex := env.New()
		h := &runner.Handle{Driver: "other", DriverState: json.RawMessage(`{}`)}
		if err := ex.Recover(context.Background(), h); err == nil || errors.Is(err, runner.ErrTaskLost) {
			t.Fatalf("Recover(other driver's handle) = %v, want a clear error", err)
		}
	})
}

// roundTrip persists and reloads a handle the way a node does across a restart.
func roundTrip(t *testing.T, h *runner.Handle) *runner.Handle {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out runner.Handle
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

const helperEnv = "EVALMESH_EXECUTORTEST_HELPER"

// HelperProcess is the body of the TestHelperProcess function a driver's tests define: run
// as a re-executed test binary, it starts the task whose config is in the file named by the
// helper variable, persists the handle next to it, and waits on the task until killed.
// Outside the helper it returns at once.
func HelperProcess(newExec func() runner.Executor) {
	cfgPath := os.Getenv(helperEnv)
	if cfgPath == "" {
		return
	}
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var cfg runner.TaskConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ex := newExec()
	h, err := ex.Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper start:", err)
		os.Exit(2)
	}
	hb, _ := json.Marshal(h)
	tmp := cfgPath + ".handle.tmp"
	if err := os.WriteFile(tmp, hb, 0o644); err != nil {
		os.Exit(2)
	}
	if err := os.Rename(tmp, cfgPath+".handle"); err != nil {
		os.Exit(2)
	}
	_, _ = ex.Wait(context.Background(), h) // killed long before the agent ends
	os.Exit(0)
}

// startInHelper starts cfg from a helper process (the test binary re-executed with
// -test.run=^testName$), waits for it to persist the handle, SIGKILLs it, and returns the
// saved handle.
func startInHelper(t *testing.T, testName string, cfg runner.TaskConfig) *runner.Handle {
	t.Helper()
	cfgPath := filepath.Join(t.TempDir(), "task.json")
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+testName+"$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+cfgPath)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var hb []byte
	testutil.WaitFor(t, 60*time.Second, "the helper to persist the handle", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("helper exited early: %v\n%s", err, out)
		default:
		}
		var err error
		hb, err = os.ReadFile(cfgPath + ".handle")
		return err == nil
	})
	// The node dies without any chance to clean up.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatal("helper exited cleanly; it should have been killed")
	}
	var h runner.Handle
	if err := json.Unmarshal(hb, &h); err != nil {
		t.Fatalf("saved handle: %v", err)
	}
	return &h
}

// SIGKILLRecovery checks recovery after the node process is SIGKILLed mid-run: the restarted
// node re-attaches to the still running task and waits it out with a complete log; a task
// that vanished meanwhile is reported lost. testName is the test function that calls
// HelperProcess.
func SIGKILLRecovery(t *testing.T, env Env, testName string) {
	t.Run("ReattachAndFinish", func(t *testing.T) {
		cfg := env.Task(t, "sleep", "3s")
		h := startInHelper(t, testName, cfg)
		after := env.New()
		t.Cleanup(func() { _ = after.Destroy(context.Background(), h) })
		if err := after.Recover(context.Background(), h); err != nil {
			t.Fatalf("Recover after SIGKILL: %v", err)
		}
		st, err := after.Inspect(context.Background(), h)
		if err != nil || !st.Running {
			t.Fatalf("Inspect after recovery = %+v, %v; want still running", st, err)
		}
		res := Wait(t, after, h)
		if !res.Successful() {
			t.Fatalf("result = %+v, want success", res)
		}
		if log := Log(t, h); !strings.Contains(log, "sleeping 3s") || !strings.Contains(log, "done sleeping") {
			t.Errorf("log incomplete after recovery:\n%s", log)
		}
		if again := Wait(t, after, h); again.ExitCode != res.ExitCode || again.Err != res.Err {
			t.Errorf("second Wait = %+v, first %+v", again, res)
		}
	})
	t.Run("VanishedIsLost", func(t *testing.T) {
		cfg := env.Task(t, "sleep", "1h")
		h := startInHelper(t, testName, cfg)
		env.Remove(t, h)
		after := env.New()
		t.Cleanup(func() { _ = after.Destroy(context.Background(), h) })
		if err := after.Recover(context.Background(), h); !errors.Is(err, runner.ErrTaskLost) {
			t.Fatalf("Recover of a vanished task = %v, want ErrTaskLost", err)
		}
	})
}

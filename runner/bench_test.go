package runner_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/runner/process"
)

// BenchmarkRunFirstInstruction measures the time from Runner.Run to the agent's first
// instruction with the process executor (bundle CID known, as on a node that fetched it):
// the agent is /bin/sh writing the nanosecond clock as its first command. Bound (issue 6):
// 100 ms. Run: go test -run '^$' -bench RunFirstInstruction -benchtime 10x ./runner
func BenchmarkRunFirstInstruction(b *testing.B) {
	h := home.Home{Dir: filepath.Join(b.TempDir(), "home")}
	if _, err := h.Init(); err != nil {
		b.Fatal(err)
	}
	r := benchRunner(b, h)
	task := exampleTaskB(b, "arithmetic")
	cid, err := runner.BundleCID(bg, task)
	if err != nil {
		b.Fatal(err)
	}
	agent := &agentspec.Spec{Name: "marker", Version: "1", Command: []string{"/bin/sh", "-c", `date +%s%N > "$EVALMESH_OUTPUT/marker"`}}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		o, err := r.Run(bg, runner.Request{TaskDir: task, TaskCID: cid, Agent: agent, Seed: i})
		if err != nil {
			b.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(runner.RunDir(h, o.RunID), "output", "marker"))
		if err != nil {
			b.Fatal(err)
		}
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		total += time.Unix(0, ns).Sub(t0)
	}
	mean := total / time.Duration(b.N)
	b.ReportMetric(float64(mean.Microseconds())/1000, "ms-to-first-instruction")
	b.ReportMetric(mean.Seconds()/0.1, "ratio-to-100ms-bound")
}

// BenchmarkRunFirstInstructionDocker is the same with the docker executor and a FROM scratch
// agent image already loaded: Runner.Run to the agent's first instruction, container create
// and start included. Bound (issue 6): 2 s.
// Run: go test -run '^$' -bench RunFirstInstructionDocker -benchtime 5x ./runner
func BenchmarkRunFirstInstructionDocker(b *testing.B) {
	cli := executortest.DockerClient(b)
	ex, err := docker.New(docker.Options{Client: cli})
	if err != nil {
		b.Skipf("skipping: docker executor: %v", err)
	}
	insp, err := cli.ImageInspect(bg, executortest.Image(b, cli))
	if err != nil {
		b.Fatal(err)
	}
	h := home.Home{Dir: filepath.Join(b.TempDir(), "home")}
	if _, err := h.Init(); err != nil {
		b.Fatal(err)
	}
	r := benchRunner(b, h)
	r.Executors, r.Executor = map[string]runner.Executor{"docker": ex}, "docker"
	task := exampleTaskB(b, "arithmetic")
	cid, err := runner.BundleCID(bg, task)
	if err != nil {
		b.Fatal(err)
	}
	agent := &agentspec.Spec{Name: "marker", Version: "1", Image: insp.ID, Command: []string{"/agent", "marker"}}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		o, err := r.Run(bg, runner.Request{TaskDir: task, TaskCID: cid, Agent: agent, Seed: i})
		if err != nil {
			b.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(runner.RunDir(h, o.RunID), "output", "marker"))
		if err != nil {
			b.Fatalf("no first-instruction marker: %v (%s)", err, o.InvalidReason)
		}
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		total += time.Unix(0, ns).Sub(t0)
	}
	mean := total / time.Duration(b.N)
	b.ReportMetric(float64(mean.Microseconds())/1000, "ms-to-first-instruction")
	b.ReportMetric(mean.Seconds()/2, "ratio-to-2s-bound")
}

// BenchmarkRunnerCPUWhileAgentRuns measures the runner's own CPU (this process: user +
// system, children excluded) while a 10 s agent runs, as a share of one core, with the
// default 2 s poll (GPU telemetry and the executor's Inspect). Bound: 1 %.
// Run: go test -run '^$' -bench RunnerCPU -benchtime 1x ./runner
func BenchmarkRunnerCPUWhileAgentRuns(b *testing.B) {
	b.Run("process", func(b *testing.B) {
		agent := &agentspec.Spec{Name: "sleeper", Version: "1", Command: []string{"/bin/sleep", "10"}}
		benchRunnerCPU(b, nil, agent)
	})
	b.Run("docker", func(b *testing.B) {
		cli := executortest.DockerClient(b)
		ex, err := docker.New(docker.Options{Client: cli})
		if err != nil {
			b.Skipf("skipping: docker executor: %v", err)
		}
		insp, err := cli.ImageInspect(bg, executortest.Image(b, cli))
		if err != nil {
			b.Fatal(err)
		}
		agent := &agentspec.Spec{Name: "sleeper", Version: "1", Image: insp.ID, Command: []string{"/agent", "sleep", "10s"}}
		benchRunnerCPU(b, ex, agent)
	})
}

func benchRunnerCPU(b *testing.B, ex runner.Executor, agent *agentspec.Spec) {
	h := home.Home{Dir: filepath.Join(b.TempDir(), "home")}
	if _, err := h.Init(); err != nil {
		b.Fatal(err)
	}
	r := benchRunner(b, h)
	if ex != nil {
		r.Executors, r.Executor = map[string]runner.Executor{ex.Name(): ex}, ex.Name()
	}
	r.PollInterval = 0 // the default a node uses
	task := exampleTaskB(b, "arithmetic")
	cid, _ := runner.BundleCID(bg, task)
	var share float64
	for i := 0; i < b.N; i++ {
		var before, after syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &before)
		t0 := time.Now()
		if _, err := r.Run(bg, runner.Request{TaskDir: task, TaskCID: cid, Agent: agent, Seed: i}); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(t0)
		syscall.Getrusage(syscall.RUSAGE_SELF, &after)
		cpu := time.Duration(after.Utime.Nano()-before.Utime.Nano()) + time.Duration(after.Stime.Nano()-before.Stime.Nano())
		share += cpu.Seconds() / wall.Seconds()
	}
	share /= float64(b.N)
	b.ReportMetric(share*100, "%-of-one-core")
	b.ReportMetric(share/0.01, "ratio-to-1%-bound")
}

func benchRunner(b *testing.B, h home.Home) *runner.Runner {
	key, err := h.Identity()
	if err != nil {
		b.Fatal(err)
	}
	ex := process.New(process.Options{})
	return &runner.Runner{Home: h, Executors: map[string]runner.Executor{ex.Name(): ex}, Executor: ex.Name(), Key: key, SelfSigned: true}
}

func exampleTaskB(b *testing.B, name string) string {
	dir := b.TempDir()
	if _, err := exampletasks.Generate(dir); err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, name)
}

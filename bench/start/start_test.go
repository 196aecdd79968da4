// Package start benchmarks the executors: the time from Start to the agent's first
// instruction (image already loaded), and the runner's own CPU use while an agent runs.
//
//	go test -run '^$' -bench . -benchtime 5x ./bench/start/
//
// Bounds (issue 6): first instruction under 2 s (docker) and 100 ms (process); under 1 % of
// one core while waiting. Each benchmark reports its figure and the ratio to its bound.
package start

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/runner/process"
)

type target struct {
	name  string
	ex    runner.Executor
	image string
	agent string
	bound time.Duration
}

func targets(b *testing.B) []target {
	ts := []target{
		{name: "process", ex: process.New(process.Options{}), agent: executortest.Binary(b), bound: 100 * time.Millisecond},
		{name: "process-rlimits", ex: process.New(process.Options{NoCgroups: true}), agent: executortest.Binary(b), bound: 100 * time.Millisecond},
	}
	cli := executortest.DockerClient(b)
	img := executortest.Image(b, cli)
	dx, err := docker.New(docker.Options{Client: cli, StopGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return append(ts, target{name: "docker", ex: dx, image: img, agent: "/agent", bound: 2 * time.Second})
}

func task(b *testing.B, tg target, n int, args ...string) runner.TaskConfig {
	dir := b.TempDir()
	return runner.TaskConfig{
		ID:           "bench-" + tg.name + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(n) + "-" + strings.ReplaceAll(b.Name(), "/", "-"),
		Image:        tg.image,
		Command:      append([]string{tg.agent}, args...),
		Env:          map[string]string{"EVALMESH_MARKER": "1"},
		WorkspaceDir: filepath.Join(dir, "ws"),
		OutputDir:    filepath.Join(dir, "out"),
		LogPath:      filepath.Join(dir, "agent.log"),
		Limits:       runner.Limits{MemoryBytes: 256 << 20, PIDs: 64},
	}
}

// readMarker polls for the agent's first-instruction timestamp (the time is in the file, so
// the polling period does not enter the measurement).
func readMarker(b *testing.B, out string) time.Time {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := os.ReadFile(filepath.Join(out, "marker")); err == nil && len(s) > 0 {
			ns, err := strconv.ParseInt(string(s), 10, 64)
			if err == nil {
				return time.Unix(0, ns)
			}
		}
		time.Sleep(time.Millisecond)
	}
	b.Fatal("the agent never wrote its first-instruction marker")
	return time.Time{}
}

// BenchmarkFirstInstruction/bare is the peer: the agent started with a plain fork/exec and
// no executor, in the same run and on the same (possibly busy) machine, so the executors'
// own overhead is their figure minus this one.
func BenchmarkFirstInstruction(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		agent := executortest.Binary(b)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			out := b.TempDir()
			cmd := exec.Command(agent, "exit", "0")
			cmd.Env = []string{"EVALMESH_MARKER=1", "EVALMESH_OUTPUT=" + out}
			t0 := time.Now()
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			total += readMarker(b, out).Sub(t0)
			b.StopTimer()
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(total/time.Duration(b.N))/1e6, "ms/first-instr")
	})
	for _, tg := range targets(b) {
		b.Run(tg.name, func(b *testing.B) {
			var total time.Duration
			worst := time.Duration(0)
			var all []time.Duration
			for i := 0; i < b.N; i++ {
				cfg := task(b, tg, i, "exit", "0")
				t0 := time.Now()
				h, err := tg.ex.Start(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				d := readMarker(b, cfg.OutputDir).Sub(t0)
				total += d
				worst = max(worst, d)
				all = append(all, d)
				b.StopTimer()
				if res, err := tg.ex.Wait(context.Background(), h); err != nil || !res.Successful() {
					b.Fatalf("Wait = %+v, %v", res, err)
				}
				if err := tg.ex.Destroy(context.Background(), h); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			mean := total / time.Duration(b.N)
			b.ReportMetric(float64(mean)/1e6, "ms/first-instr")
			b.ReportMetric(float64(worst)/1e6, "ms-worst")
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2])/1e6, "ms-median")
			b.ReportMetric(float64(mean)/float64(tg.bound), "ratio-to-bound")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWaitCPU measures this process's CPU time during the Wait on a 10 s agent (each
// iteration is one such run), directly and — for the process executor — after a "restart",
// when Wait has to poll a process that is no longer its child.
func BenchmarkWaitCPU(b *testing.B) {
	const run = 10 * time.Second
	for _, tg := range targets(b) {
		modes := []string{"attached"}
		if tg.name == "process-rlimits" {
			continue // same Wait as "process"
		}
		if tg.name == "process" {
			modes = append(modes, "recovered")
		}
		for _, mode := range modes {
			b.Run(tg.name+"/"+mode, func(b *testing.B) {
				var cpu, wall time.Duration
				for i := 0; i < b.N; i++ {
					cfg := task(b, tg, i, "sleep", run.String())
					h, err := tg.ex.Start(context.Background(), cfg)
					if err != nil {
						b.Fatal(err)
					}
					waiter := tg.ex
					if mode == "recovered" {
						waiter = process.New(process.Options{})
						if err := waiter.Recover(context.Background(), h); err != nil {
							b.Fatal(err)
						}
					}
					c0, w0 := cpuTime(), time.Now()
					res, err := waiter.Wait(context.Background(), h)
					cpu += cpuTime() - c0
					wall += time.Since(w0)
					if err != nil || !res.Successful() {
						b.Fatalf("Wait = %+v, %v", res, err)
					}
					_ = tg.ex.Destroy(context.Background(), h)
				}
				pct := 100 * float64(cpu) / float64(wall)
				b.ReportMetric(pct, "%core")
				b.ReportMetric(pct/1.0, "ratio-to-bound")
				b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/run")
			})
		}
	}
}

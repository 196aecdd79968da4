package slurm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/runner/slurm/slurmtest"
)

// testOptions are the options of an executor on the shared test cluster, with this test
// binary as the job command.
func testOptions(c *slurmtest.Cluster) Options {
	return Options{
		Partition:    slurmtest.Partition,
		SlurmConf:    c.Conf,
		JobCommand:   []string{os.Args[0], "slurm-job"},
		StopGrace:    time.Second,
		PollInterval: 100 * time.Millisecond,
	}
}

// testEnv skips the test when Slurm is not installed or no Docker engine answers.
func testEnv(t *testing.T) (executortest.Env, *slurmtest.Cluster) {
	c := slurmtest.Shared(t)
	cli := executortest.DockerClient(t)
	img := executortest.Image(t, cli)
	return executortest.Env{
		New: func() runner.Executor {
			ex, err := New(testOptions(c))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return ex
		},
		Image: img,
		Agent: "/agent",
		// Vanishing behind evalmesh's back: an operator cancels the job.
		Remove: func(t *testing.T, h *runner.Handle) { cancelOutside(t, c, h) },
	}, c
}

// cancelOutside cancels a task's job with scancel, as an operator would, and waits until
// Slurm reports it ended.
func cancelOutside(t *testing.T, c *slurmtest.Cluster, h *runner.Handle) {
	t.Helper()
	s, err := decodeState(h)
	if err != nil {
		t.Fatal(err)
	}
	c.Run(t, "scancel", s.JobID)
	testutil.WaitFor(t, 30*time.Second, "job "+s.JobID+" to end after scancel", func() bool {
		out, _ := c.Command("scontrol", "show", "job", "-o", s.JobID).Output()
		j, err := parseJob(out)
		return err == nil && !j.active()
	})
}

func TestConformance(t *testing.T) {
	env, _ := testEnv(t)
	executortest.Run(t, env)
}

// The same suite with the compute node's containers on podman (container_runtime: podman).
func TestPodmanConformance(t *testing.T) {
	c := slurmtest.Shared(t)
	cli := executortest.PodmanClient(t)
	if executortest.PodmanSocket() != "/run/podman/podman.sock" || os.Geteuid() != 0 {
		t.Skip("skipping: the job finds rootful podman's socket only as root at /run/podman/podman.sock")
	}
	img := executortest.Image(t, cli)
	newExec := func() runner.Executor {
		o := testOptions(c)
		o.ContainerRuntime = "podman"
		ex, err := New(o)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return ex
	}
	executortest.Run(t, executortest.Env{New: newExec, Image: img, Agent: "/agent",
		Remove: func(t *testing.T, h *runner.Handle) { cancelOutside(t, c, h) }})
	// The run's containment names the engine the job ran on.
	ex := newExec().(*Executor)
	env := executortest.Env{New: newExec, Image: img, Agent: "/agent"}
	h := executortest.Start(t, ex, env.Task(t, "exit", "0"))
	executortest.Wait(t, ex, h)
	if got := ex.Containment(h).Engine; !strings.HasPrefix(got, "podman ") {
		t.Fatalf("containment engine %q, want podman", got)
	}
}

// The node process is SIGKILLed while its job runs; the restarted node re-attaches, or
// reports the job lost when it was cancelled meanwhile.
func TestHelperProcess(t *testing.T) {
	executortest.HelperProcess(func() runner.Executor {
		// SLURM_CONF is inherited from the test process (slurmtest.Shared sets it).
		ex, err := New(testOptions(&slurmtest.Cluster{Conf: os.Getenv("SLURM_CONF")}))
		if err != nil {
			panic(err)
		}
		return ex
	})
	t.Skip("only runs as the SIGKILL recovery helper")
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{
		{ContainerRuntime: "singularity"},
		{ExtraSbatch: []string{"--time=9999"}},
		{ExtraSbatch: []string{"-t5"}},
	} {
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "slurm executor") {
			t.Errorf("New(%+v) = %v, want a clear error", o, err)
		}
	}
	_ = context.Background
}

func TestSIGKILLRecovery(t *testing.T) {
	env, _ := testEnv(t)
	executortest.SIGKILLRecovery(t, env, "TestHelperProcess")
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

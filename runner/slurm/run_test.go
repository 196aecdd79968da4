package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/agentspec"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/runner/slurm/slurmtest"
	"github.com/evalmesh/evalmesh/tasks"
)

// Runs end to end through the runner: the agent's job, scoring apart from it (the built-in
// metric on this node, or the task's evaluator in a job of its own), the attestation.

var (
	examplesOnce sync.Once
	examplesDir  string
	examplesErr  error
)

func exampleTask(t *testing.T, name string) string {
	t.Helper()
	examplesOnce.Do(func() {
		if examplesDir, examplesErr = os.MkdirTemp("", "evalmesh-slurm-examples-"); examplesErr == nil {
			_, examplesErr = exampletasks.Generate(examplesDir)
		}
	})
	if examplesErr != nil {
		t.Fatal(examplesErr)
	}
	return filepath.Join(examplesDir, name)
}

// slurmRunner is a runner of a fresh home whose only executor is slurm with o.
func slurmRunner(t *testing.T, dir string, o Options) *runner.Runner {
	t.Helper()
	h := home.Home{Dir: dir}
	if _, err := os.Stat(h.ConfigPath()); err != nil {
		if _, err := h.Init(); err != nil {
			t.Fatal(err)
		}
	}
	key, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return &runner.Runner{Home: h, Executors: map[string]runner.Executor{DriverName: ex}, Executor: DriverName,
		Key: key, SelfSigned: true, PollInterval: 100 * time.Millisecond}
}

func checkSlurmPredicate(t *testing.T, p *runner.Outcome) {
	t.Helper()
	e := p.Predicate.Executor
	if e == nil || e.Name != DriverName || e.Partition != slurmtest.Partition || e.Node != slurmtest.Node || e.Isolation != "container" {
		t.Errorf("attested executor = %+v, want slurm, partition %s, node %s, container", e, slurmtest.Partition, slurmtest.Node)
	}
}

func TestRunScoredEndToEnd(t *testing.T) {
	c := slurmtest.Shared(t)
	cli := executortest.DockerClient(t)
	img := imageID(t, cli, executortest.ExampleImage(t, cli))
	solver := &agentspec.Spec{Name: "solver", Version: "1.0.0", Image: img, Command: []string{"/agent"}}
	t.Run("BuiltinMetric", func(t *testing.T) {
		t.Parallel()
		r := slurmRunner(t, t.TempDir(), testOptions(c))
		o, err := r.Run(context.Background(), runner.Request{TaskDir: exampleTask(t, "arithmetic"), Agent: solver})
		if err != nil {
			t.Fatal(err)
		}
		if !o.Valid || o.Score == nil || *o.Score != 1 || o.Predicate.Exit.Code != 0 {
			t.Fatalf("run: valid %v score %v reason %q exit %+v", o.Valid, o.Score, o.InvalidReason, o.Predicate.Exit)
		}
		checkSlurmPredicate(t, o)
	})
	t.Run("EvaluatorInItsOwnJob", func(t *testing.T) {
		t.Parallel()
		task := filepath.Join(t.TempDir(), "regression")
		if err := tasks.CopyTree(exampleTask(t, "regression"), task); err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(task, "task.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(string(y), "evaluator:")
		y = []byte(string(y)[:i] + "evaluator:\n  image: " + img + "\n  command: [\"/evaluator\", \"--metric\", \"MAE\"]\n")
		if err := os.WriteFile(filepath.Join(task, "task.yaml"), y, 0o644); err != nil {
			t.Fatal(err)
		}
		r := slurmRunner(t, t.TempDir(), testOptions(c))
		o, err := r.Run(context.Background(), runner.Request{TaskDir: task, Agent: solver, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !o.Valid || o.Score == nil || !strings.HasPrefix(o.Predicate.Evaluator, img+" /evaluator") {
			ev, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "logs", "evaluator.log"))
			t.Fatalf("run: valid %v score %v reason %q evaluator %q\n%s", o.Valid, o.Score, o.InvalidReason, o.Predicate.Evaluator, ev)
		}
		checkSlurmPredicate(t, o)
	})
}

const nodeEnv = "EVALMESH_SLURM_TEST_NODE"

// nodeRequest is what the node process of the kill tests runs.
type nodeRequest struct {
	Home, Task, Conf string
	Extra            []string
	Agent            agentspec.Spec
}

// nodeMain is the node process of the kill tests: it starts one run through Slurm and
// waits for it; the test SIGKILLs it.
func nodeMain() int {
	var req nodeRequest
	if err := json.Unmarshal([]byte(os.Getenv(nodeEnv)), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o := testOptions(&slurmtest.Cluster{Conf: req.Conf})
	o.ExtraSbatch = req.Extra
	ex, err := New(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	h := home.Home{Dir: req.Home}
	key, _ := h.Identity()
	r := &runner.Runner{Home: h, Executors: map[string]runner.Executor{DriverName: ex}, Executor: DriverName, Key: key, SelfSigned: true, PollInterval: 100 * time.Millisecond}
	if _, err := r.Run(context.Background(), runner.Request{TaskDir: req.Task, Agent: &req.Agent}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// killNodeWhile starts a node process on a fresh home, waits until its run's job is in
// jobState, SIGKILLs the node, and returns the runner the test recovers with and the job.
func killNodeWhile(t *testing.T, c *slurmtest.Cluster, jobState string, extra []string, agent agentspec.Spec, task string) (*runner.Runner, string) {
	t.Helper()
	dir := t.TempDir()
	r := slurmRunner(t, dir, testOptions(c)) // initialises the home; the recovering node
	req, _ := json.Marshal(nodeRequest{Home: dir, Task: task, Conf: c.Conf, Extra: extra, Agent: agent})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(req))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var jobID string
	testutil.WaitFor(t, 60*time.Second, "the node's job to be "+jobState, func() bool {
		runs, _ := runner.ListRuns(r.Home)
		if len(runs) != 1 || runs[0].Phase != runner.PhaseAgent {
			return false
		}
		s, err := decodeState(runs[0].AgentHandle)
		if err != nil {
			return false
		}
		jobID = s.JobID
		out, _ := c.Command("scontrol", "show", "job", "-o", jobID).Output()
		j, err := parseJob(out)
		return err == nil && j.State == jobState
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("node process ended before it was killed; stderr:\n%s", stderr.String())
	}
	return r, jobID
}

// recoverOnce recovers the home's one run and checks it was attested exactly once.
func recoverOnce(t *testing.T, r *runner.Runner) *runner.Outcome {
	t.Helper()
	rec, err := r.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || rec[0].Err != nil {
		t.Fatalf("recovered %+v", rec)
	}
	ents, _ := os.ReadDir(r.Home.AttestationsDir())
	if len(ents) != 1 {
		t.Fatalf("%d attestations, want 1", len(ents))
	}
	if again, _ := r.Recover(context.Background()); len(again) != 0 {
		t.Fatalf("recovered twice: %+v", again)
	}
	checkSlurmPredicate(t, rec[0].Outcome)
	return rec[0].Outcome
}

// evalmesh killed while its job waits in the queue, and while it runs: the restarted node
// re-attaches to the job by its ID and attests the run once.
func TestNodeKilledThenRecovered(t *testing.T) {
	c := slurmtest.Shared(t)
	cli := executortest.DockerClient(t)
	t.Run("WhileQueued", func(t *testing.T) {
		t.Parallel()
		solver := agentspec.Spec{Name: "solver", Version: "1.0.0", Image: imageID(t, cli, executortest.ExampleImage(t, cli)), Command: []string{"/agent"}}
		// The job may not start for an hour: it stays queued until the test lets it go.
		r, job := killNodeWhile(t, c, "PENDING", []string{"--begin=now+3600"}, solver, exampleTask(t, "arithmetic"))
		c.Run(t, "scontrol", "update", "JobId="+job, "StartTime=now")
		o := recoverOnce(t, r)
		if !o.Valid || o.Score == nil || *o.Score != 1 {
			t.Fatalf("recovered run: valid %v score %v reason %q", o.Valid, o.Score, o.InvalidReason)
		}
	})
	t.Run("WhileRunning", func(t *testing.T) {
		t.Parallel()
		sleeper := agentspec.Spec{Name: "sleeper", Version: "1", Image: imageID(t, cli, executortest.Image(t, cli)), Command: []string{"/agent", "sleep", "3s"}}
		r, _ := killNodeWhile(t, c, "RUNNING", nil, sleeper, exampleTask(t, "arithmetic"))
		o := recoverOnce(t, r)
		if o.Predicate.Exit.Code != 0 || o.Predicate.Exit.Reason != "" {
			t.Fatalf("re-attached agent ended %+v, want a clean exit (it was not lost)", o.Predicate.Exit)
		}
	})
}

// imageID is the sha256 image ID agent specs name.
func imageID(t *testing.T, cli *client.Client, ref string) string {
	t.Helper()
	insp, err := cli.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return insp.ID
}

package runner_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// podImage builds (once per engine: the tag is the content hash) a FROM scratch image
// holding the ReAct example agent at /agent, the stand-in model server (a test double) at
// /model and the executor test agent at /testagent, and returns its image ID.
func podImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	test, err := os.ReadFile(executortest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	return executortest.GoImage(t, cli, "evalmesh-example-pod", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/react"}, {Name: "model", Package: "./examples/agents/cmd/standin-model"}},
		map[string][]byte{"testagent": test})
}

// standinModel is the model part of a spec serving the stand-in on port 8000.
func standinModel(img string, extra ...string) *agentspec.Model {
	return &agentspec.Model{
		Name: "standin", Image: img, Port: 8000, ReadyPath: "/health",
		Command: append([]string{"/model", "serve", "--addr", "127.0.0.1:8000", "--model", "standin"}, extra...),
		Probe:   []string{"/model", "probe"}, ReadyTimeoutSeconds: 30,
	}
}

func podRunner(t *testing.T) (*runner.Runner, *docker.Executor, string) {
	t.Helper()
	r, cli := dockerRunner(t)
	img := podImage(t, cli)
	r.Models = runner.ModelPolicy{Images: []string{img}}
	return r, r.Executors["docker"].(*docker.Executor), img
}

// runContainers lists the engine's evalmesh containers of one run.
func runContainers(t *testing.T, ex *docker.Executor, runID string) []docker.Container {
	t.Helper()
	cs, err := ex.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	var out []docker.Container
	for _, c := range cs {
		if strings.HasPrefix(c.TaskID, runID) {
			out = append(out, c)
		}
	}
	return out
}

// weightsFolder makes a small weight folder, lists it in r's policy as "tiny" and returns
// its digest.
func weightsFolder(t *testing.T, r *runner.Runner) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "weights.bin"), []byte("not really weights\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := runner.WeightsDigest(bg, dir)
	if err != nil {
		t.Fatal(err)
	}
	r.Models.Weights = map[string]string{"tiny": dir}
	return d
}

func TestModelPodReActAgentScores(t *testing.T) {
	r, ex, img := podRunner(t)
	m := standinModel(img)
	digest := weightsFolder(t, r)
	m.Weights = []agentspec.WeightRef{{Name: "tiny", Digest: digest}}
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	dir := runner.RunDir(r.Home, o.RunID)
	log, _ := os.ReadFile(filepath.Join(dir, "logs", "agent.log"))
	if !o.Valid || o.Score == nil {
		t.Fatalf("valid %v score %v reason %q; agent log:\n%s", o.Valid, o.Score, o.InvalidReason, log)
	}
	// The agent talked to the model over loopback: its log holds the stand-in's two turns.
	if !strings.Contains(string(log), "Action: list_files[/public]") || !strings.Contains(string(log), "Final Answer:") {
		t.Fatalf("agent log lacks the model's turns:\n%s", log)
	}
	if pm := o.Predicate.Model; pm == nil || pm.Image != img || pm.Name != "standin" || pm.GPUCount != 0 || pm.ReadySeconds <= 0 ||
		len(pm.Weights) != 1 || pm.Weights[0].Digest != digest {
		t.Fatalf("attested model %+v", pm)
	}
	if ml, err := os.ReadFile(filepath.Join(dir, "logs", "model.log")); err != nil || !strings.Contains(string(ml), "test double") {
		t.Fatalf("model log %q, %v", ml, err)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after the run: %+v", left)
	}
}

// checkLoopbackOnly asserts a netcheck listing shows loopback and nothing else: one
// interface, lo, with 127.0.0.1 and ::1, no IPv4 route, and IPv6 routes only on lo.
func checkLoopbackOnly(t *testing.T, who, out string) {
	t.Helper()
	ifaces := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "iface":
			ifaces++
			if f[1] != "lo" {
				t.Fatalf("%s sees interface %s:\n%s", who, f[1], out)
			}
			for _, a := range f[2:] {
				if a != "127.0.0.1/8" && a != "::1/128" {
					t.Fatalf("%s has address %s:\n%s", who, a, out)
				}
			}
		case f[0] == "route4":
			t.Fatalf("%s has an IPv4 route: %s", who, line)
		case f[0] == "route6":
			if f[len(f)-1] != "lo" {
				t.Fatalf("%s has an IPv6 route off loopback: %s", who, line)
			}
		}
	}
	if ifaces != 1 {
		t.Fatalf("%s: %d interfaces listed:\n%s", who, ifaces, out)
	}
}

// The pod through runner.StartPod: the model has no network, the agent shares its loopback
// and reaches the model there, and neither sees any other address (listed from inside;
// nothing is sent anywhere but 127.0.0.1).
func TestModelPodLoopbackOnly(t *testing.T) {
	r, ex, img := podRunner(t)
	_ = r
	env := executortest.Env{Image: img, Agent: "/model"}
	model := env.Task(t, "serve", "--addr", "127.0.0.1:8000")
	model.PublicDir, model.WorkspaceDir, model.OutputDir, model.PromptPath = "", "", "", ""
	task := env.Task(t, "serve", "--addr", "127.0.0.1:9000") // an agent that waits
	pod, err := runner.StartPod(bg, ex, model, runner.Readiness{Probe: []string{"/model", "probe", "http://127.0.0.1:8000/health"}, Timeout: 30 * time.Second}, task)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		runner.StopModel(bg, ex, pod.Task)
		runner.StopModel(bg, ex, pod.Model)
	})
	code, out, err := ex.Exec(bg, pod.Task, []string{"/model", "probe", "http://127.0.0.1:8000/v1/models"})
	if err != nil || code != 0 {
		t.Fatalf("the agent cannot reach its model on loopback: %d %s %v", code, out, err)
	}
	for who, h := range map[string]*runner.Handle{"agent": pod.Task, "model": pod.Model} {
		code, out, err := ex.Exec(bg, h, []string{"/model", "netcheck"})
		if err != nil || code != 0 {
			t.Fatalf("%s netcheck: %d %s %v", who, code, out, err)
		}
		checkLoopbackOnly(t, who, string(out))
	}
	cli := ex.Client()
	mi, err := cli.ContainerInspect(bg, docker.ContainerName(model.ID))
	if err != nil {
		t.Fatal(err)
	}
	ai, err := cli.ContainerInspect(bg, docker.ContainerName(task.ID))
	if err != nil {
		t.Fatal(err)
	}
	if mi.HostConfig.NetworkMode != "none" || string(ai.HostConfig.NetworkMode) != "container:"+mi.ID {
		t.Fatalf("network modes: model %q, agent %q (model container %s)", mi.HostConfig.NetworkMode, ai.HostConfig.NetworkMode, mi.ID)
	}
}

func TestModelNeverReadyFailsTheRun(t *testing.T) {
	r, ex, img := podRunner(t)
	m := standinModel(img, "--never-ready")
	m.ReadyTimeoutSeconds = 2
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	_, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err == nil || !errors.Is(err, runner.ErrModelNotReady) || !strings.Contains(err.Error(), "did not become ready within 2s") {
		t.Fatalf("err %v, want the model's readiness failure", err)
	}
	runs, _ := runner.ListRuns(r.Home)
	if len(runs) != 1 || runs[0].Phase != runner.PhaseFailed || !strings.Contains(runs[0].Error, "did not become ready") {
		t.Fatalf("runs %+v", runs)
	}
	if left := runContainers(t, ex, runs[0].ID); len(left) != 0 {
		t.Fatalf("containers left: %+v", left)
	}
}

func TestModelGoesDownWithAgentAtWallClock(t *testing.T) {
	r, ex, img := podRunner(t)
	task := copyTask(t, "sentiment", func(y string) string {
		return strings.Replace(y, "wall_clock_seconds: 120", "wall_clock_seconds: 20", 1)
	})
	agent := &agentspec.Spec{Name: "hang", Version: "1", Image: img, Command: []string{"/testagent", "sleep", "1h"}, Model: standinModel(img)}
	o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Predicate.Exit.TimedOut {
		t.Fatalf("exit %+v, want killed at the wall clock", o.Predicate.Exit)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after the agent's wall clock: %+v", left)
	}
}

func TestModelPolicyRefusesUnlistedImage(t *testing.T) {
	r, _, img := podRunner(t)
	r.Models = runner.ModelPolicy{}
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: standinModel(img)}
	_, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err == nil || !strings.Contains(err.Error(), "runner.models.images") {
		t.Fatalf("err %v", err)
	}
}

// SIGKILL of the node while agent and model run; the next process re-attaches to both,
// finishes the run, and removes both containers.
func TestModelPodSIGKILLRecovery(t *testing.T) {
	r, ex, img := podRunner(t)
	agent := agentspec.Spec{Name: "sleeper", Version: "1", Image: img, Command: []string{"/testagent", "sleep", "6s"}, Model: standinModel(img)}
	o := sigkillRecovery(t, r, agent)
	if o.Predicate.Model == nil || o.Predicate.Model.Image != img {
		t.Fatalf("recovered run attests model %+v", o.Predicate.Model)
	}
	if left := runContainers(t, ex, o.RunID); len(left) != 0 {
		t.Fatalf("containers left after recovery: %+v", left)
	}
}

// SIGKILL while the model is still loading: recovery removes the model (and fails the run,
// whose agent never started).
func TestModelPodSIGKILLWhileLoading(t *testing.T) {
	r, ex, img := podRunner(t)
	m := standinModel(img, "--never-ready")
	m.ReadyTimeoutSeconds = 600
	agent := agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	req, _ := json.Marshal(map[string]any{"Home": r.Home.Dir, "Task": exampleTask(t, "arithmetic"), "Executor": "docker", "Agent": agent, "Models": r.Models})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_NODE="+string(req))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	testutil.WaitFor(t, 60*time.Second, "the node to record its model task", func() bool {
		runs, _ := runner.ListRuns(r.Home)
		if len(runs) == 1 && runs[0].ModelHandle != nil {
			id = runs[0].ID
			return true
		}
		return false
	})
	cmd.Process.Kill()
	cmd.Wait()
	if c := runContainers(t, ex, id); len(c) != 1 || !c[0].Running {
		t.Fatalf("after SIGKILL the model should still run: %+v", c)
	}
	rec, err := r.Recover(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || rec[0].Err == nil {
		t.Fatalf("recovered %+v, want the run failed", rec)
	}
	if left := runContainers(t, ex, id); len(left) != 0 {
		t.Fatalf("containers left after recovery: %+v", left)
	}
}

func TestModelWeightsDigestMismatchFailsTheRun(t *testing.T) {
	r, _, img := podRunner(t)
	weightsFolder(t, r)
	m := standinModel(img)
	m.Weights = []agentspec.WeightRef{{Name: "tiny", Digest: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"}}
	agent := &agentspec.Spec{Name: "react", Version: "1", Image: img, Command: []string{"/agent"}, Model: m}
	_, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: agent})
	if err == nil || !strings.Contains(err.Error(), "the spec records bafkreigh2ak") {
		t.Fatalf("err %v, want the digest mismatch", err)
	}
}

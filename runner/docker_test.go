package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// exampleImage builds (once per engine: the tag is the content hash) a FROM scratch image
// holding the static solver agent at /agent and the example evaluator at /evaluator, and
// returns its image ID.
func exampleImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	return executortest.GoImage(t, cli, "evalmesh-example-solver", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/solver"}, {Name: "evaluator", Package: "./examples/agents/cmd/evaluator"}}, nil)
}

func dockerRunner(t *testing.T) (*runner.Runner, *client.Client) {
	t.Helper()
	cli := executortest.DockerClient(t)
	ex, err := docker.New(docker.Options{Client: cli})
	if err != nil {
		t.Skipf("skipping: docker executor: %v", err)
	}
	h := newHome(t)
	r := processRunner(t, h, ex)
	return r, cli
}

func TestRunDockerEndToEnd(t *testing.T) {
	r, cli := dockerRunner(t)
	img := exampleImage(t, cli)
	solver := &agentspec.Spec{Name: "solver", Version: "1.0.0", Image: img, Command: []string{"/agent"}}

	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "arithmetic"), Agent: solver})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Valid || *o.Score != 1 || o.Predicate.Exit.Code != 0 {
		t.Fatalf("docker run: valid %v score %v reason %q exit %+v", o.Valid, o.Score, o.InvalidReason, o.Predicate.Exit)
	}
	// The same submission scored by the evaluator image (which alone mounts private/) gives
	// the same score as the built-in metric.
	task := copyTask(t, "regression", func(y string) string {
		i := strings.Index(y, "evaluator:")
		return y[:i] + "evaluator:\n  image: " + img + "\n  command: [\"/evaluator\", \"--metric\", \"MAE\"]\n"
	})
	viaEval, err := r.Run(bg, runner.Request{TaskDir: task, Agent: solver, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "regression"), Agent: solver, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !viaEval.Valid || !builtin.Valid || *viaEval.Score != *builtin.Score {
		ev, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, viaEval.RunID), "logs", "evaluator.log"))
		t.Fatalf("evaluator container %v %v (%s: %s), built-in %v %v", viaEval.Valid, viaEval.Score, viaEval.InvalidReason, ev, builtin.Valid, builtin.Score)
	}
	if !strings.HasPrefix(viaEval.Predicate.Evaluator, img+" /evaluator") {
		t.Fatalf("evaluator identity %q", viaEval.Predicate.Evaluator)
	}
}

// A hostile agent hunts for the labels: no /private, and no file it can read holds them.
func TestRunDockerAgentNeverSeesPrivate(t *testing.T) {
	r, cli := dockerRunner(t)
	img := executortest.Image(t, cli)
	insp, err := cli.ImageInspect(bg, img)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := os.ReadFile(filepath.Join(exampleTask(t, "sentiment"), "private", "labels.csv"))
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.Split(string(labels), "\n")[1] // "te000,<label>": only private/ has it
	hunter := &agentspec.Spec{Name: "hunter", Version: "1", Image: insp.ID, Command: []string{"/agent", "private", secret}}
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: hunter})
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "logs", "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "private-dir: absent") || !strings.Contains(string(log), "secret-found: no") {
		t.Fatalf("the agent saw private data:\n%s", log)
	}
	if o.Valid || !strings.Contains(o.InvalidReason, "no submission") {
		t.Fatalf("valid %v reason %q", o.Valid, o.InvalidReason)
	}
}

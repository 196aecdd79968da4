package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/agentspec"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// A task scored by its evaluator image (the evaluate.py contract), replication 1, over the
// network: lab-a runs the slot in Docker and scores it with the image; lab-b fetches the
// submission by CID and runs the same image in its own engine against its own copy of the
// bundle (Mesh.rescore → runner.RescoreSubmission → RescoreEvaluator). The re-score agrees
// and the run counts on both nodes.
func TestEvaluatorImageNetworkRescoreAgrees(t *testing.T) {
	cli := executortest.DockerClient(t)
	img := executortest.GoImage(t, cli, "evalmesh-example-solver", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/solver"}, {Name: "evaluator", Package: "./examples/agents/cmd/evaluator"}}, nil)
	examples := t.TempDir()
	if _, err := exampletasks.Generate(examples); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(examples, "arithmetic")
	y, err := os.ReadFile(filepath.Join(task, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(y), "evaluator:")
	y = []byte(string(y)[:i] + "evaluator:\n  image: " + img + "\n  command: [\"/evaluator\", \"--metric\", \"Accuracy\"]\n")
	if err := os.WriteFile(filepath.Join(task, "task.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	solver := &agentspec.Spec{Name: "solver", Version: "1.0.0", Image: img, Command: []string{"/agent"}}
	labs, campaign := rescoreNetwork(t, task, solver, func() (map[string]runner.Executor, string) {
		d, err := docker.New(docker.Options{Client: cli})
		if err != nil {
			t.Fatalf("docker executor: %v", err)
		}
		return map[string]runner.Executor{"docker": d}, "docker"
	})
	run, ledgers := settled(t, labs, campaign)
	rs := run.Rescores[0]
	if rs.Lab == run.Lab || rs.PeerID == run.PeerID {
		t.Fatalf("run by %s re-scored by its own lab %s", run.Lab, rs.Lab)
	}
	if !run.Valid || !rs.Valid || run.Score == nil || rs.Score == nil || *rs.Score != *run.Score {
		runs, _ := runner.ListRuns(labs[0].m.opts.Runner.Home)
		for _, st := range runs {
			d := runner.RunDir(labs[0].m.opts.Runner.Home, st.ID)
			a, _ := os.ReadFile(filepath.Join(d, "statement.json"))
			l, _ := os.ReadFile(filepath.Join(d, "logs", "agent.log"))
			t.Logf("lab-a run %s: %+v\n%s\n%s", st.ID, st, a, l)
		}
		t.Fatalf("run valid %v score %v, re-score valid %v score %v: want the same valid accuracy", run.Valid, run.Score, rs.Valid, rs.Score)
	}
	for i, ml := range ledgers {
		if rep := ml.Report; rep.Counted != 1 || rep.Disagreements != 0 || len(rep.Excluded) != 0 {
			t.Errorf("%s: ledger report %+v; want the run counted, confirmed, nothing disputed", labs[i].name, rep)
		}
	}
}

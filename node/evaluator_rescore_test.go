package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// evaluatorImageTask writes the example tasks under a test folder and returns the
// arithmetic one, scored by the example evaluator image img (the evaluate.py contract)
// instead of its built-in metric, and the image.
func evaluatorImageTask(t *testing.T) (task, img string, cli *client.Client) {
	t.Helper()
	cli = executortest.DockerClient(t)
	img = executortest.GoImage(t, cli, "evalmesh-example-solver", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/solver"}, {Name: "evaluator", Package: "./examples/agents/cmd/evaluator"}}, nil)
	examples := t.TempDir()
	if _, err := exampletasks.Generate(examples); err != nil {
		t.Fatal(err)
	}
	task = filepath.Join(examples, "arithmetic")
	y, err := os.ReadFile(filepath.Join(task, "task.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(y), "evaluator:")
	y = []byte(string(y)[:i] + "evaluator:\n  image: " + img + "\n  command: [\"/evaluator\", \"--metric\", \"Accuracy\"]\n")
	if err := os.WriteFile(filepath.Join(task, "task.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	return task, img, cli
}

// lyingEvaluator is a dishonest lab's docker executor: its evaluator tasks run, then their
// output is replaced by a score of its choosing — what a lab that patched its own node signs
// with its own valid keys (here, sinking the agent it was given to run).
type lyingEvaluator struct {
	*docker.Executor
	result string
}

func (e lyingEvaluator) Wait(ctx context.Context, h *runner.Handle) (*runner.ExitResult, error) {
	exit, err := e.Executor.Wait(ctx, h)
	if err == nil && strings.Contains(h.Config.ID, "-eval") {
		err = os.WriteFile(h.Config.LogPath, []byte(runner.EvaluationMarker+"\n"+e.result+"\n"), 0o644)
	}
	return exit, err
}

// evaluatorNetwork runs the slot of the solver on the evaluator-image task over two labs'
// meshes (docker executors; lab-a's is lie when not nil) and waits for lab-b's re-score.
func evaluatorNetwork(t *testing.T, lie string) ([]heurekaLab, RunReport, []*MeshLedger) {
	t.Helper()
	task, img, cli := evaluatorImageTask(t)
	solver := &agentspec.Spec{Name: "solver", Version: "1.0.0", Image: img, Command: []string{"/agent"}}
	labs, campaign := rescoreNetwork(t, task, solver, func(lab int) (map[string]runner.Executor, string) {
		d, err := docker.New(docker.Options{Client: cli})
		if err != nil {
			t.Fatalf("docker executor: %v", err)
		}
		if lab == 0 && lie != "" {
			return map[string]runner.Executor{"docker": lyingEvaluator{d, lie}}, "docker"
		}
		return map[string]runner.Executor{"docker": d}, "docker"
	})
	run, ledgers := settled(t, labs, campaign)
	if rs := run.Rescores[0]; rs.Lab == run.Lab || rs.PeerID == run.PeerID {
		t.Fatalf("run by %s re-scored by its own lab %s", run.Lab, rs.Lab)
	}
	return labs, run, ledgers
}

// A task scored by its evaluator image, replication 1, over the network: lab-a runs the
// slot in Docker and scores it with the image; lab-b fetches the submission by CID and runs
// the same image in its own engine against its own copy of the bundle (Mesh.rescore →
// runner.RescoreSubmission → RescoreEvaluator). The re-score agrees and the run counts on
// both nodes.
func TestEvaluatorImageNetworkRescoreAgrees(t *testing.T) {
	labs, run, ledgers := evaluatorNetwork(t, "")
	rs := run.Rescores[0]
	if !run.Valid || !rs.Valid || run.Score == nil || rs.Score == nil || *rs.Score != *run.Score {
		t.Fatalf("run valid %v score %v, re-score valid %v score %v: want the same valid accuracy", run.Valid, run.Score, rs.Valid, rs.Score)
	}
	for i, ml := range ledgers {
		if rep := ml.Report; rep.Counted != 1 || rep.Disagreements != 0 || len(rep.Excluded) != 0 {
			t.Errorf("%s: ledger report %+v; want the run counted, confirmed, nothing disputed", labs[i].name, rep)
		}
	}
}

// A dishonest lab signs, with its own valid keys, a wrong score for an evaluator-image task
// (its node's evaluator output replaced: 0.25 for the solver's perfect submission). The
// honest lab's re-score runs the pinned image and gets 1: a disagreement on record, and the
// run is excluded as disputed on both nodes — the wrong score never reaches the leaderboard.
func TestEvaluatorImageNetworkRescoreCatchesAWrongScore(t *testing.T) {
	labs, run, ledgers := evaluatorNetwork(t, `{"Accuracy": 0.25}`)
	rs := run.Rescores[0]
	if !run.Valid || run.Score == nil || *run.Score != 0.25 || !rs.Valid || rs.Score == nil || *rs.Score != 1 {
		t.Fatalf("run valid %v score %v, re-score valid %v score %v: want the lie 0.25 and the re-score 1", run.Valid, run.Score, rs.Valid, rs.Score)
	}
	for i, ml := range ledgers {
		rep := ml.Report
		if rep.Disagreements != 1 || rep.Counted != 0 || len(rep.Excluded) != 1 {
			t.Fatalf("%s: ledger report %+v; want 1 disagreement, the run excluded", labs[i].name, rep)
		}
		if ex := rep.Excluded[0]; ex.ID != run.AttestationID || ex.Reason != attest.ExcludeDisputed || !strings.Contains(ex.Detail, rs.AttestationID) {
			t.Errorf("%s: excluded %+v; want run %s disputed by re-score %s", labs[i].name, ex, run.AttestationID, rs.AttestationID)
		}
	}
}

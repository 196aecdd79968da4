package runner_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	heurekaexample "github.com/evalmesh/evalmesh/examples/heureka"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/scoring"
)

// heurekaImage builds (once per engine: the tag is the content hash) a FROM scratch image
// holding the thorough example co-scientist at /agent and the stand-in HeurekaBench judge
// (a test double for an LLM judge) at /judge, and returns its image ID.
func heurekaImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	return executortest.GoImage(t, cli, "evalmesh-example-heureka", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/cosci-thorough"}, {Name: "judge", Package: "./examples/agents/cmd/heureka-judge"}}, nil)
}

// The HeurekaBench judge under the docker executor: the agent and the judge each in a
// container of a locally built image; the judge writes its verdict file in its workspace,
// the runner parses it, and the run attestation pins the judge by that image's digest and
// carries the verdicts as a subject. Another lab's docker runner re-judges the submission
// in a fresh container and agrees.
func TestHeurekaJudgeInDocker(t *testing.T) {
	r, cli := dockerRunner(t) // skips when no Docker engine answers
	img := heurekaImage(t, cli)
	task, err := heurekaexample.GenerateWithJudge(t.TempDir(), img, "/judge")
	if err != nil {
		t.Fatal(err)
	}
	agent := &agentspec.Spec{Name: "cosci-thorough", Version: "1.0.0", Image: img, Command: []string{"/agent"}}
	o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Valid || o.Score == nil || o.Metric != scoring.OEQMetric {
		ev, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "logs", "evaluator.log"))
		t.Fatalf("docker HeurekaBench run: valid %v score %v reason %q; judge log:\n%s", o.Valid, o.Score, o.InvalidReason, ev)
	}
	if o.Predicate.Executor == nil || o.Predicate.Executor.Isolation != attest.IsolationContainer {
		t.Fatalf("executor %+v: want the run attested as containerised", o.Predicate.Executor)
	}
	hp := o.Predicate.Heureka
	if hp == nil || hp.Judge.Image != img || len(hp.Judge.Command) != 1 || hp.Judge.Command[0] != "/judge" || hp.Judge.Model != heurekaexample.JudgeModel {
		t.Fatalf("judge attested as %+v; want image %s, command /judge, model %s", hp, img, heurekaexample.JudgeModel)
	}
	// The verdict file the judge container wrote is the attested subject the score is the
	// mean of, parsed by the scorer.
	env, err := attest.Verify(o.Envelope, trustSelf(t, r.Home), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for _, s := range env.Statement.Subject {
		if s.Annotations[attest.AnnotationRole] == attest.RoleVerdicts && s.Digest["sha256"] == hp.Verdicts {
			if data, err = os.ReadFile(filepath.Join(runner.ObjectsDir(r.Home), s.Annotations[attest.AnnotationCID].(string))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if data == nil {
		t.Fatalf("no verdicts subject matching %s", hp.Verdicts)
	}
	v, err := scoring.ParseJudgeVerdicts(data)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, q := range v.Questions {
		sum += q.Score
	}
	if len(v.Questions) != 10 || sum/10 != *o.Score || *o.Score < 4 {
		t.Fatalf("%d verdicts with mean %v, run score %v: want 10 whose mean is the thorough agent's score", len(v.Questions), sum/10, *o.Score)
	}

	// Another node re-runs the judge container on the submission (the daemon's entry point):
	// a deterministic judge agrees exactly.
	r2, _ := dockerRunner(t)
	var sub []byte
	var name, subCID string
	for _, s := range env.Statement.Subject {
		if s.Annotations[attest.AnnotationRole] == attest.RoleSubmission {
			name, subCID = s.Name, s.Annotations[attest.AnnotationCID].(string)
			if sub, err = os.ReadFile(filepath.Join(runner.ObjectsDir(r.Home), subCID)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rs, err := r2.RescoreSubmission(bg, o.AttestationID, env.Run, sub, name, subCID, task)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Predicate.Score == nil || *rs.Predicate.Score != *o.Score || !rs.Predicate.Valid {
		t.Fatalf("docker re-judge %+v; want the run's OEQ %v", rs.Predicate, *o.Score)
	}
}

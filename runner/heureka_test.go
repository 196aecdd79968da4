package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/attest"
	heurekaexample "github.com/evalmesh/evalmesh/examples/heureka"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/scoring"
)

// heurekaTask writes the example HeurekaBench bundle with its judge command given extra
// flags (the stand-in judge's sampling and fault modes).
func heurekaTask(t *testing.T, judgeFlags ...string) string {
	t.Helper()
	dir, err := heurekaexample.GenerateWithJudge(t.TempDir(), "", append(slices.Clone(heurekaexample.JudgeCommand), judgeFlags...)...)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestHeurekaRunAttestsJudgeAndVerdicts(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	task := heurekaTask(t)
	o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("cosci-thorough"), Seed: 0})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Valid || o.Score == nil {
		t.Fatalf("run invalid: %s", o.InvalidReason)
	}
	if o.Metric != scoring.OEQMetric || *o.Score < 4 || *o.Score > 5 {
		t.Fatalf("metric %s score %v: want OEQCorrectness in 4..5 for the thorough agent", o.Metric, *o.Score)
	}
	hp := o.Predicate.Heureka
	if hp == nil {
		t.Fatal("run predicate has no heureka part")
	}
	if hp.Judge.Image != heurekaexample.JudgeImage || hp.Judge.Model != heurekaexample.JudgeModel ||
		hp.Judge.PromptSHA256 != attest.PromptDigest(hp.Judge.Prompt) || !strings.Contains(hp.Judge.Prompt, "atomic facts") {
		t.Fatalf("judge not attested as pinned: %+v", hp.Judge)
	}
	if len(hp.Questions) != 10 {
		t.Fatalf("%d questions attested, want 10", len(hp.Questions))
	}
	// The verdict file is a subject, stored by CID, and its sha256 is the predicate's.
	env, err := attest.Verify(o.Envelope, trustSelf(t, h), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var verdicts *attest.Subject
	for i, s := range env.Statement.Subject {
		if s.Annotations[attest.AnnotationRole] == attest.RoleVerdicts {
			verdicts = &env.Statement.Subject[i]
		}
	}
	if verdicts == nil || verdicts.Digest["sha256"] != hp.Verdicts {
		t.Fatalf("no verdicts subject matching the predicate's %s: %+v", hp.Verdicts, env.Statement.Subject)
	}
	data, err := os.ReadFile(filepath.Join(runner.ObjectsDir(h), verdicts.Annotations[attest.AnnotationCID].(string)))
	if err != nil {
		t.Fatal(err)
	}
	v, err := scoring.ParseJudgeVerdicts(data)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, q := range v.Questions {
		sum += q.Score
		if len(q.Facts) == 0 {
			t.Fatalf("question %s has no facts", q.ID)
		}
	}
	if got := sum / float64(len(v.Questions)); got != *o.Score {
		t.Fatalf("score %v is not the mean %v of the attested verdicts", *o.Score, got)
	}
}

func TestHeurekaBadJudgeMakesRunInvalid(t *testing.T) {
	for _, c := range []struct{ fault, want string }{
		{"--fault=out-of-range", `question "q01": score 6 is outside the rubric's 1–5`},
		{"--fault=omit", `no verdict for question(s) q10`},
		{"--fault=malformed", "judge verdicts: not a JSON object"},
	} {
		t.Run(c.fault, func(t *testing.T) {
			h := newHome(t)
			r := processRunner(t, h, nil)
			o, err := r.Run(bg, runner.Request{TaskDir: heurekaTask(t, c.fault), Agent: exampleAgent("cosci-thorough")})
			if err != nil {
				t.Fatal(err)
			}
			if o.Valid || !strings.Contains(o.InvalidReason, c.want) {
				t.Fatalf("valid %v reason %q, want invalid with %q", o.Valid, o.InvalidReason, c.want)
			}
			if o.Predicate.Heureka == nil || o.Predicate.Heureka.Judge.Model == "" {
				t.Fatal("an invalid HeurekaBench run still names its judge")
			}
		})
	}
}

// rescoreOutcome has a second lab's node re-run the judge on the run's submission and
// reconciles the two attestations as the ledger does.
func rescoreOutcome(t *testing.T, task string, o *runner.Outcome, runHome string) attest.Outcome {
	t.Helper()
	other := newHome(t)
	r2 := processRunner(t, other, nil)
	var sub []byte
	var name, cid string
	env, err := attest.Verify(o.Envelope, trustSelf(t, mustHome(runHome)), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range env.Statement.Subject {
		if s.Annotations[attest.AnnotationRole] == attest.RoleSubmission {
			name, cid = s.Name, s.Annotations[attest.AnnotationCID].(string)
			sub, err = os.ReadFile(filepath.Join(runner.ObjectsDir(mustHome(runHome)), cid))
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The daemon's entry point: it must pick the judge for a HeurekaBench run.
	rs, err := r2.RescoreSubmission(bg, o.AttestationID, env.Run, sub, name, cid, task)
	if err != nil {
		t.Fatal(err)
	}
	trust := trustSelf(t, mustHome(runHome))
	raw, _ := mustKey(t, other).GetPublic().Raw()
	if _, err := trust.AddNode("other", raw); err != nil {
		t.Fatal(err)
	}
	var vs []*attest.Verified
	for _, e := range [][]byte{o.Envelope, rs.Envelope} {
		v, err := attest.Verify(e, trust, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return attest.Reconcile(vs, attest.Agree)
}

func TestHeurekaRescoreDeterministicJudgeAgrees(t *testing.T) {
	h := newHome(t)
	task := heurekaTask(t)
	o, err := processRunner(t, h, nil).Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("cosci-hasty"), Seed: 1})
	if err != nil || !o.Valid {
		t.Fatalf("run: %v %s", err, o.InvalidReason)
	}
	out := rescoreOutcome(t, task, o, h.Dir)
	if len(out.Disagreements) != 0 {
		t.Fatalf("a deterministic judge disagreed with itself: %+v", out.Disagreements)
	}
	if len(out.Rescores[o.AttestationID]) != 1 {
		t.Fatalf("re-score not recorded against the run: %+v", out.Rescores)
	}
}

func TestHeurekaRescoreSamplingJudgeDisagrees(t *testing.T) {
	// Each judge call draws its own nonce, as a sampling LLM draws its own tokens; the
	// nonces are fixed here so that the two calls' samples are known to differ.
	nonces := []string{"lab-a-run", "lab-b-rescore"}
	old := runner.JudgeNonce
	runner.JudgeNonce = func() string { n := nonces[0]; nonces = nonces[1:]; return n }
	t.Cleanup(func() { runner.JudgeNonce = old })

	h := newHome(t)
	task := heurekaTask(t, "--sampling")
	o, err := processRunner(t, h, nil).Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("cosci-thorough")})
	if err != nil || !o.Valid {
		t.Fatalf("run: %v %s", err, o.InvalidReason)
	}
	out := rescoreOutcome(t, task, o, h.Dir)
	if len(out.Disagreements) != 1 {
		t.Fatalf("want the sampling judge's re-score reported as 1 disagreement, got %+v", out.Disagreements)
	}
	d := out.Disagreements[0]
	if d.Run != o.AttestationID || d.RunScore == nil || d.RescoreScore == nil || *d.RunScore == *d.RescoreScore {
		t.Fatalf("disagreement %+v: want two different OEQ scores for run %s", d, o.AttestationID)
	}
	raw, _ := json.Marshal(d)
	t.Logf("disagreement: %s", raw)
}

func mustHome(dir string) home.Home { return home.Home{Dir: dir} }

func mustKey(t *testing.T, h home.Home) crypto.PrivKey {
	t.Helper()
	k, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

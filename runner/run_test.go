package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
)

func TestRunProcessEndToEnd(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	var phases []runner.Phase
	var mu sync.Mutex
	r.Progress = func(p runner.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	}
	tests := []struct {
		task, agent string
		seed        int
		check       func(float64) bool
	}{
		{"arithmetic", "solver", 0, func(s float64) bool { return s == 1 }},
		{"arithmetic", "constant", 0, func(s float64) bool { return s == 0 }},
		{"regression", "solver", 3, func(s float64) bool { return s > 0.5 && s < 1.2 }},
		{"regression", "heuristic", 0, func(s float64) bool { return s > 3 }},
		{"sentiment", "solver", 1, func(s float64) bool { return s > 0.75 }},
		{"sentiment", "constant", 0, func(s float64) bool { return s > 0.2 && s < 0.5 }},
	}
	trust := trustSelf(t, h)
	for _, tt := range tests {
		t.Run(tt.task+"/"+tt.agent, func(t *testing.T) {
			o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, tt.task), Agent: exampleAgent(tt.agent), Seed: tt.seed})
			if err != nil {
				t.Fatal(err)
			}
			if !o.Valid || o.Score == nil || !tt.check(*o.Score) {
				t.Fatalf("valid %v score %v (%s)", o.Valid, o.Score, o.InvalidReason)
			}
			v, err := attest.Verify(o.Envelope, trust, time.Now())
			if err != nil {
				t.Fatalf("own attestation does not verify: %v", err)
			}
			if v.ID != o.AttestationID {
				t.Fatalf("ID %s, verified as %s", o.AttestationID, v.ID)
			}
			stored, err := os.ReadFile(filepath.Join(h.AttestationsDir(), o.AttestationID+".json"))
			if err != nil || string(stored) != string(o.Envelope) {
				t.Fatalf("attestation not stored under its ID: %v", err)
			}
			p := o.Predicate
			if p.Slot.Campaign != runner.LocalCampaign || p.Slot.Seed != tt.seed || p.Slot.Agent != exampleAgent(tt.agent).CID() {
				t.Fatalf("slot %+v", p.Slot)
			}
			if p.Evaluator != "builtin:"+p.Metric || p.Exit.Code != 0 || p.Exit.Reason != "" || p.Hardware.GPUCount != 0 {
				t.Fatalf("predicate %+v", p)
			}
			// The submission and the logs are stored under their CIDs.
			st, err := attest.ParseStatement(v.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Subject) != 2 || st.SubmissionDigest() == "" {
				t.Fatalf("subjects %+v", st.Subject)
			}
			for _, s := range st.Subject {
				c := s.Annotations[attest.AnnotationCID].(string)
				data, err := os.ReadFile(filepath.Join(runner.ObjectsDir(h), c))
				if err != nil || agentspec.RawCID(data) != c {
					t.Fatalf("object %s (%s): %v", c, s.Name, err)
				}
			}
			rs, err := runner.LoadState(h, o.RunID)
			if err != nil || rs.Phase != runner.PhaseDone || rs.AttestationID != o.AttestationID {
				t.Fatalf("state %+v %v", rs, err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	got := make([]string, len(phases))
	for i, p := range phases {
		got[i] = string(p)
	}
	if !strings.HasPrefix(strings.Join(got, ","), "agent,evaluating,signing,done") {
		t.Errorf("progress phases %v", got)
	}
}

func TestRunInvalidOutcomes(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	tests := []struct {
		name   string
		task   string
		agent  *agentspec.Spec
		seed   int
		reason string
		exit   int
	}{
		{"agent crashes", "sentiment", exampleAgent("flaky"), 1, "no submission: the agent left no submission.csv in its output folder (agent exited with status 1)", 1},
		{"wrong header", "sentiment", exampleAgent("flaky"), 2, `submission header column "id": missing column`, 0},
		{"unknown agent", "arithmetic", exampleAgent("nobody"), 0, "exited with status 2", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, tt.task), Agent: tt.agent, Seed: tt.seed})
			if err != nil {
				t.Fatal(err)
			}
			if o.Valid || o.Score != nil || !strings.Contains(o.InvalidReason, tt.reason) {
				t.Fatalf("valid %v score %v reason %q, want %q", o.Valid, o.Score, o.InvalidReason, tt.reason)
			}
			if o.Predicate.Exit.Code != tt.exit {
				t.Fatalf("exit %+v, want code %d", o.Predicate.Exit, tt.exit)
			}
		})
	}
}

func TestRunTimeoutIsAttested(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	task := copyTask(t, "arithmetic", func(y string) string {
		return strings.Replace(y, "wall_clock_seconds: 120", "wall_clock_seconds: 1", 1)
	})
	sleeper := &agentspec.Spec{Name: "sleeper", Version: "1", Command: []string{"/bin/sleep", "30"}}
	start := time.Now()
	o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: sleeper})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Predicate.Exit.TimedOut || o.Valid || !strings.Contains(o.InvalidReason, "wall-clock limit") {
		t.Fatalf("exit %+v valid %v reason %q", o.Predicate.Exit, o.Valid, o.InvalidReason)
	}
	if time.Since(start) > 25*time.Second {
		t.Fatal("the agent was not stopped at its limit")
	}
}

// orderExecutor records the calls the runner makes, to check the agent's task is destroyed
// before the evaluator (the only task that sees private/) starts.
type orderExecutor struct {
	runner.Executor
	mu    sync.Mutex
	calls []string
	cfgs  []runner.TaskConfig
}

func (o *orderExecutor) log(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, s)
}

func (o *orderExecutor) Start(ctx context.Context, cfg runner.TaskConfig) (*runner.Handle, error) {
	o.log("start " + cfg.ID[strings.LastIndex(cfg.ID, "-")+1:])
	o.mu.Lock()
	o.cfgs = append(o.cfgs, cfg)
	o.mu.Unlock()
	return o.Executor.Start(ctx, cfg)
}

func (o *orderExecutor) Destroy(ctx context.Context, h *runner.Handle) error {
	o.log("destroy " + h.Config.ID[strings.LastIndex(h.Config.ID, "-")+1:])
	return o.Executor.Destroy(ctx, h)
}

func TestEvaluatorTask(t *testing.T) {
	withEvaluator := func(cmd string) string {
		task := copyTask(t, "sentiment", func(y string) string {
			i := strings.Index(y, "evaluator:")
			return y[:i] + "evaluator:\n  image: sha256:" + strings.Repeat("0", 64) + "\n  command: " + cmd + "\n"
		})
		return task
	}
	tests := []struct {
		name   string
		cmd    string
		valid  bool
		reason string
	}{
		{"example evaluator", `["evalmesh", "agent", "evaluator", "--metric", "Accuracy"]`, true, ""},
		{"no marker", `["/bin/sh", "-c", "echo Accuracy 0.99"]`, false, "printed no --- EVALUATION RESULT --- line"},
		{"non-zero exit after a result", `["/bin/sh", "-c", "echo '--- EVALUATION RESULT ---'; echo '{\"Accuracy\": 1}'; exit 3"]`, false, "evaluator exited with status 3"},
		{"marker then garbage", `["/bin/sh", "-c", "echo '--- EVALUATION RESULT ---'; echo 'great'"]`, false, "not a JSON object"},
		{"floods its output", `["/bin/sh", "-c", "head -c 20000000 /dev/zero; echo; echo '--- EVALUATION RESULT ---'; echo '{\"Accuracy\": 1}'"]`, false, "byte limit"},
	}
	h := newHome(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oe := &orderExecutor{Executor: processRunner(t, h, nil).Executors["process"]}
			r := processRunner(t, h, oe)
			task := withEvaluator(tt.cmd)
			o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: exampleAgent("solver"), Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if o.Valid != tt.valid || !strings.Contains(o.InvalidReason, tt.reason) {
				t.Fatalf("valid %v reason %q, want %v %q", o.Valid, o.InvalidReason, tt.valid, tt.reason)
			}
			if got := strings.Join(oe.calls, ","); got != "start agent,destroy agent,start eval0,destroy eval0" {
				t.Fatalf("executor calls %s: the agent must be gone before the evaluator starts", got)
			}
			private := filepath.Join(task, "private")
			agentCfg, evalCfg := oe.cfgs[0], oe.cfgs[1]
			if len(agentCfg.ExtraMounts) != 0 || strings.Contains(mustJSON(agentCfg), private) {
				t.Fatalf("the agent's task config mentions private/: %s", mustJSON(agentCfg))
			}
			if evalCfg.Env[runner.EnvPrivate] != private || evalCfg.Network {
				t.Fatalf("evaluator config %s", mustJSON(evalCfg))
			}
			if evalCfg.Env[runner.EnvSeed] != "" || evalCfg.OutputDir != "" {
				t.Fatalf("the evaluator got the agent's environment or output folder: %s", mustJSON(evalCfg))
			}
			if tt.valid {
				// The same submission scored by the built-in metric gives the same score.
				b := processRunner(t, h, nil)
				o2, err := b.Run(bg, runner.Request{TaskDir: exampleTask(t, "sentiment"), Agent: exampleAgent("solver"), Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				if *o2.Score != *o.Score {
					t.Fatalf("evaluator task scored %v, built-in %v", *o.Score, *o2.Score)
				}
				if !strings.HasSuffix(o.Predicate.Evaluator, " evalmesh agent evaluator --metric Accuracy") {
					t.Fatalf("evaluator identity %q", o.Predicate.Evaluator)
				}
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/internal/taskset"
	"github.com/evalmesh/evalmesh/scoring"
)

// scoreFixtures is the in-repository copy of the 20 AIRS-Bench metadata files
// (tasks/testdata/NOTICE.md), so these tests run in any clone, not only in /work/main.
const scoreFixtures = "../../tasks/testdata/airs-bench"

// scoreAIRSResults writes a results file for every fixture task: agents of graded skill, a few
// seeds each, some failed runs, scores between the task's estimated worst and its SOTA
// (the best agent beats SOTA on a few tasks, as in the paper).
func scoreAIRSResults(t *testing.T, infos []scoring.TaskInfo, seed uint64) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	var lines []string
	agents := []string{"greedy-gpt-oss-120b", "greedy-o3-mini", "react-llama", "oneshot-qwen"}
	for _, ti := range infos {
		worst := 0.0
		if ti.EstimatedWorst != nil {
			worst = *ti.EstimatedWorst
		}
		if ti.LowerIsBetter && worst > 100*ti.SOTA {
			worst = 100 * ti.SOTA // keep lower-is-better scores in a sane range
		}
		for ai, a := range agents {
			for s := 0; s < 3; s++ {
				if rng.IntN(5) == 0 {
					lines = append(lines, fmt.Sprintf(`{"task":%q,"agent":%q,"seed":%d,"status":"FAILED","score":null}`, ti.Name, a, s))
					continue
				}
				frac := 1.1 - 0.3*float64(ai) - 0.2*rng.Float64() // fraction of the way from worst to SOTA
				v := worst + frac*(ti.SOTA-worst)
				// No better than the optimum: score refuses what no metric can reach.
				if ti.LowerIsBetter {
					v = max(v, ti.Optimum)
				} else {
					v = min(v, ti.Optimum)
				}
				lines = append(lines, fmt.Sprintf(`{"task":%q,"agent":%q,"seed":%d,"status":"SUCCESS","score":%v}`, ti.Name, a, s, v))
			}
		}
	}
	return lines
}

func scoreWriteLines(t *testing.T, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func scoreRunCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestScoreAIRSFixtures(t *testing.T) {
	if _, err := os.Stat(scoreFixtures); err != nil {
		t.Skipf("AIRS-Bench fixtures not available: %v", err)
	}
	infos, err := taskset.Infos(scoreFixtures)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 20 {
		t.Fatalf("loaded %d tasks, want 20", len(infos))
	}
	lines := scoreAIRSResults(t, infos, 1)
	res := scoreWriteLines(t, lines)

	out, stderr, code := scoreRunCLI(t, "score", "--results", res, "--tasks", scoreFixtures, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var led struct {
		Root   string `json:"ledger_root"`
		Agents []struct {
			Agent  string      `json:"agent"`
			Elo    float64     `json:"elo"`
			EloMLE float64     `json:"elo_mle"`
			EloCI  [2]float64  `json:"elo_ci"`
			Rank   int         `json:"rank"`
			NS     *float64    `json:"normalized_score"`
			NSCI   *[2]float64 `json:"normalized_score_ci"`
			VSR    *float64    `json:"valid_submission_rate"`
		} `json:"agents"`
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(out), &led); err != nil {
		t.Fatalf("--json output is not the ledger: %v\n%s", err, out)
	}
	if len(led.Root) != 64 || len(led.Agents) != 5 || len(led.Tasks) != 20 {
		t.Fatalf("root %q, %d agents, %d tasks", led.Root, len(led.Agents), len(led.Tasks))
	}
	for _, a := range led.Agents {
		if (a.Agent == scoring.SOTAPlayer) != (a.NS == nil) || (a.NS == nil) != (a.VSR == nil) || (a.NS == nil) != (a.NSCI == nil) {
			t.Errorf("%s: normalized fields present wrongly: %+v", a.Agent, a)
		}
	}
	// Skill order survives: the best agent leads the agents, the weakest trails.
	if led.Agents[len(led.Agents)-1].Agent != "oneshot-qwen" {
		t.Errorf("weakest agent not last: %+v", led.Agents)
	}

	// Same results in another order: same root. The table shows it too.
	rng := rand.New(rand.NewPCG(2, 2))
	rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	out2, _, code := scoreRunCLI(t, "score", "--results", scoreWriteLines(t, lines), "--tasks", scoreFixtures)
	if code != 0 || !strings.Contains(out2, "ledger root "+led.Root) || !strings.Contains(out2, "greedy-gpt-oss-120b") {
		t.Fatalf("shuffled table (exit %d) lacks root %s:\n%s", code, led.Root, out2)
	}

	// --bootstrap-rounds reaches the policy (and so the root).
	out4, _, code := scoreRunCLI(t, "score", "--results", res, "--tasks", scoreFixtures, "--bootstrap-rounds", "10", "--json")
	if code != 0 || !strings.Contains(out4, `"bootstrap_rounds": 10`) || strings.Contains(out4, led.Root) {
		t.Fatalf("--bootstrap-rounds 10: exit %d\n%s", code, out4)
	}

	// --elo-bootstrap reaches the policy (and so the root); the default, named, changes
	// nothing; an unknown policy is refused.
	out5, _, code := scoreRunCLI(t, "score", "--results", res, "--tasks", scoreFixtures, "--elo-bootstrap", "tasks-linearised", "--json")
	if code != 0 || !strings.Contains(out5, `"elo_bootstrap": "tasks-linearised"`) || strings.Contains(out5, led.Root) {
		t.Fatalf("--elo-bootstrap tasks-linearised: exit %d\n%s", code, out5)
	}
	out6, _, code := scoreRunCLI(t, "score", "--results", res, "--tasks", scoreFixtures, "--elo-bootstrap", "games", "--json")
	if code != 0 || !strings.Contains(out6, led.Root) {
		t.Fatalf("--elo-bootstrap games: exit %d, not the default root %s", code, led.Root)
	}
	if _, e, code := scoreRunCLI(t, "score", "--results", res, "--tasks", scoreFixtures, "--elo-bootstrap", "tasks"); code == 0 || !strings.Contains(e, `unknown Elo bootstrap "tasks"`) {
		t.Fatalf("--elo-bootstrap tasks: exit %d, %s", code, e)
	}

	// The estimated worst anchor gives another ledger.
	out3, _, code := scoreRunCLI(t, "score", "--results", res, "--tasks", scoreFixtures, "--worst", "estimated", "--json")
	if code != 0 || strings.Contains(out3, led.Root) {
		t.Fatalf("--worst estimated: exit %d, same root", code)
	}
}

func TestScoreErrorsNameTheLine(t *testing.T) {
	if _, err := os.Stat(scoreFixtures); err != nil {
		t.Skipf("AIRS-Bench fixtures not available: %v", err)
	}
	good := `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":0,"status":"SUCCESS","score":0.5}`
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{good, `{"task":"NoSuchTask","agent":"a","seed":1,"status":"SUCCESS","score":0.5}`}, `results line 2: unknown task "NoSuchTask"`},
		{[]string{good, "", `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":1,"status":"SUCCESS","score":"x"}`}, `results line 3: "score"`},
		{[]string{good, `{"task":`}, "results line 2:"},
		{[]string{good, `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":-1,"status":"SUCCESS","score":0.5}`}, `results line 2: "seed" -1 is negative`},
		{[]string{good, `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":1,"status":"SUCCESS","score":0.5,"score":0.9}`}, `results line 2: key "score" appears twice`},
		{[]string{good, `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":1,"status":"SUCCESS","score":0.5,"Score":0.9}`}, `results line 2: keys "score" and "Score"`},
		{[]string{good, `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":1,"status":"SUCCESS","score":1.5}`}, `results line 2: score 1.5 of agent "a" seed 1 is outside task "MathQuestionAnsweringSVAMPAccuracy"'s range`},
		{[]string{good, `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":1,"status":"SUCCESS","score":-0.5}`}, `results line 2: score -0.5`},
		{[]string{}, "no results"},
		{[]string{good, `{"task":"MathQuestionAnsweringSVAMPAccuracy","agent":"a","seed":1,"status":"FAILED","score":null}`, good}, `results lines 1 and 3 are both task "MathQuestionAnsweringSVAMPAccuracy" agent "a" seed 0`},
	} {
		_, stderr, code := scoreRunCLI(t, "score", "--results", scoreWriteLines(t, c.lines), "--tasks", scoreFixtures)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("lines %q: exit %d stderr %q, want it to contain %q", c.lines, code, stderr, c.want)
		}
	}
	_, stderr, code := scoreRunCLI(t, "score", "--results", scoreWriteLines(t, []string{good}), "--tasks", t.TempDir())
	if code == 0 || !strings.Contains(stderr, "no task folder") {
		t.Errorf("empty tasks dir: exit %d %q", code, stderr)
	}
	_, stderr, code = scoreRunCLI(t, "score", "--tasks", scoreFixtures)
	if code == 0 || !strings.Contains(stderr, "--results") {
		t.Errorf("missing --results: exit %d %q", code, stderr)
	}
	_, stderr, code = scoreRunCLI(t, "score", "--results", scoreWriteLines(t, []string{good}), "--tasks", scoreFixtures, "--worst", "median")
	if code == 0 || !strings.Contains(stderr, `unknown worst anchor "median"`) {
		t.Errorf("bad --worst: exit %d %q", code, stderr)
	}
}

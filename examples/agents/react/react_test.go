package react

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/evalmesh/evalmesh/examples/agents/standin"
	"github.com/evalmesh/evalmesh/tasks"
)

// The ReAct agent on every imported AIRS-Bench fixture (public/train/ and public/test/
// folders of non-CSV data, as prepare.py leaves them), against the stand-in model (a test
// double) on 127.0.0.1: it writes the submission file task.yaml names, with its header and
// row count.
func TestReActOnEveryImportedAIRSBundle(t *testing.T) {
	srv := httptest.NewServer(standin.Handler("standin", func() bool { return true }))
	defer srv.Close()
	fixtures, _ := filepath.Glob("../../../tasks/testdata/airs-bench/*")
	if len(fixtures) == 0 {
		t.Fatal("no AIRS-Bench fixtures")
	}
	for _, fx := range fixtures {
		name := filepath.Base(fx)
		t.Run(name, func(t *testing.T) {
			bundle, m := importFixture(t, fx)
			out := agentEnv(t, bundle, srv.URL)
			var log bytes.Buffer
			if code := Main(&log); code != 0 {
				t.Fatalf("agent exit %d:\n%s", code, log.String())
			}
			b, err := os.ReadFile(filepath.Join(out, m.Submission.File))
			if err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(recs[0], ",") != strings.Join(m.Submission.Header, ",") || (m.Submission.Rows > 0 && len(recs)-1 != m.Submission.Rows) {
				t.Fatalf("submission header %v rows %d, task.yaml %v rows %d", recs[0], len(recs)-1, m.Submission.Header, m.Submission.Rows)
			}
			if !strings.Contains(log.String(), "list_files[/public]") {
				t.Fatalf("no ReAct turn in the log:\n%s", log.String())
			}
		})
	}
}

// importFixture imports the AIRS-Bench fixture fx as a bundle (non-CSV data, as prepare.py
// leaves it).
func importFixture(t *testing.T, fx string) (string, *tasks.Meta) {
	t.Helper()
	name := filepath.Base(fx)
	src := t.TempDir()
	meta, _ := os.ReadFile(filepath.Join(fx, "metadata.yaml"))
	os.WriteFile(filepath.Join(src, "metadata.yaml"), meta, 0o644)
	os.WriteFile(filepath.Join(src, "project_description.md"), []byte("# "+name+"\n"), 0o644)
	data := t.TempDir()
	for _, d := range []string{"train", "test"} {
		os.MkdirAll(filepath.Join(data, d), 0o755)
		os.WriteFile(filepath.Join(data, d, "data-00000-of-00001.arrow"), []byte("arrow"), 0o644)
		os.WriteFile(filepath.Join(data, d, "dataset_info.json"), []byte("{}"), 0o644)
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	m, err := tasks.ImportAIRS(src, bundle, tasks.ImportOptions{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	return bundle, m
}

// agentEnv sets the runner's environment for the agent on bundle, its model at base; it
// returns the output folder.
func agentEnv(t *testing.T, bundle, base string) string {
	out := t.TempDir()
	t.Setenv("EVALMESH_PUBLIC", filepath.Join(bundle, "public"))
	t.Setenv("EVALMESH_PROMPT", filepath.Join(bundle, "prompt.md"))
	t.Setenv("EVALMESH_TASK_META", filepath.Join(bundle, "task.yaml"))
	t.Setenv("EVALMESH_OUTPUT", out)
	t.Setenv("OPENAI_BASE_URL", base+"/v1")
	t.Setenv("OPENAI_MODEL", "standin")
	return out
}

// The transcript-shape tolerances (docs/scoring.md "Transcripts in audits") measured on
// what can be run here: the ReAct agent against the stand-in model, every imported AIRS-Bench
// fixture, seeds 0–4, counting the calls and the usage each reply reports, as the runner's
// recorder does. Across seeds of one task the shape does not move at all (the agent samples
// at temperature 0 and the stand-in answers a conversation alike): what attest.ExactShape
// assumes of a deterministic agent (measured: 2 calls, 117 prompt and 32 completion tokens
// on every fixture and seed; the log lists them). A stochastic agent's spread cannot be
// measured with a stand-in: its tolerance (attest.DefaultShapeTolerance) is judgement.
func TestStandinTranscriptShapeAcrossSeeds(t *testing.T) {
	var mu sync.Mutex
	var calls, prompt, completion int
	inner := standin.Handler("standin", func() bool { return true })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		var body struct {
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if r.URL.Path == "/v1/chat/completions" && json.Unmarshal(rec.Body.Bytes(), &body) == nil {
			mu.Lock()
			calls, prompt, completion = calls+1, prompt+body.Usage.PromptTokens, completion+body.Usage.CompletionTokens
			mu.Unlock()
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	fixtures, _ := filepath.Glob("../../../tasks/testdata/airs-bench/*")
	type shape struct{ calls, prompt, completion int }
	for _, fx := range fixtures {
		bundle, _ := importFixture(t, fx)
		var seen []shape
		for seed := 0; seed < 5; seed++ {
			agentEnv(t, bundle, srv.URL)
			t.Setenv("EVALMESH_SEED", strconv.Itoa(seed))
			calls, prompt, completion = 0, 0, 0
			var log bytes.Buffer
			if code := Main(&log); code != 0 {
				t.Fatalf("%s seed %d: agent exit %d:\n%s", filepath.Base(fx), seed, code, log.String())
			}
			seen = append(seen, shape{calls, prompt, completion})
		}
		for _, s := range seen[1:] {
			if s != seen[0] {
				t.Errorf("%s: transcript shapes across seeds %v: the stand-in stack is not reproducible", filepath.Base(fx), seen)
				break
			}
		}
		t.Logf("%-50s calls %d  prompt tokens %4d  completion tokens %3d  (seeds 0-4 identical)", filepath.Base(fx), seen[0].calls, seen[0].prompt, seen[0].completion)
	}
}

// The stand-in answers the same conversation with the same bytes.
func TestStandinDeterministic(t *testing.T) {
	msgs := []standin.Message{{Role: "user", Content: "Submission header: id,label\n"}, {Role: "assistant", Content: "x"}}
	if a, b := standin.Reply(msgs), standin.Reply(msgs); a != b || !strings.Contains(a, `Final Answer: {"id":"0","label":"0"}`) {
		t.Fatalf("replies %q %q", a, b)
	}
}

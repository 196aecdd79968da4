package react

import (
	"bytes"
	"encoding/csv"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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
			out := t.TempDir()
			t.Setenv("EVALMESH_PUBLIC", filepath.Join(bundle, "public"))
			t.Setenv("EVALMESH_PROMPT", filepath.Join(bundle, "prompt.md"))
			t.Setenv("EVALMESH_TASK_META", filepath.Join(bundle, "task.yaml"))
			t.Setenv("EVALMESH_OUTPUT", out)
			t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
			t.Setenv("OPENAI_MODEL", "standin")
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

// The stand-in answers the same conversation with the same bytes.
func TestStandinDeterministic(t *testing.T) {
	msgs := []standin.Message{{Role: "user", Content: "Submission header: id,label\n"}, {Role: "assistant", Content: "x"}}
	if a, b := standin.Reply(msgs), standin.Reply(msgs); a != b || !strings.Contains(a, `Final Answer: {"id":"0","label":"0"}`) {
		t.Fatalf("replies %q %q", a, b)
	}
}

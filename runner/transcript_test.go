package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner/modelproxy"
)

// FuzzBuildTranscript: whatever a recorder's folder holds (its call lines, a body, its
// unrecorded count), the runner builds a transcript the strict decoder accepts, or an error;
// it never panics and never signs totals that are not the sums of the calls.
func FuzzBuildTranscript(f *testing.F) {
	f.Add([]byte(`{"seq":1,"method":"POST","path":"/v1/chat/completions","status":200,"duration_ms":3,"request":{"file":"1.req","bytes":5,"stored_bytes":5},"response":{"file":"1.resp","bytes":9,"stored_bytes":4,"truncated":true},"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}
{"seq":1}
not json
{"seq":3,"status":-4,"duration_ms":-1,"request":{"file":"../../x","bytes":-2},"usage":{"prompt_tokens":-1}}
`), []byte("hello"), []byte("2\n"))
	f.Add([]byte(`{"seq":2,"status":1000,"request":{"file":"1.req","bytes":1}}`), []byte(""), []byte("-5"))
	f.Fuzz(func(t *testing.T, calls, body, unrecorded []byte) {
		h := home.Home{Dir: t.TempDir()}
		st := &RunState{ID: "r", Agent: agentspec.Spec{Model: &agentspec.Model{Name: "m", Port: 8000}}}
		dir := transcriptDir(RunDir(h, st.ID))
		if err := os.MkdirAll(filepath.Join(dir, modelproxy.BodiesDir), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{modelproxy.CallsFile: calls, modelproxy.UnrecordedFile: unrecorded,
			filepath.Join(modelproxy.BodiesDir, "1.req"): body, filepath.Join(modelproxy.BodiesDir, "1.resp"): body} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := &Runner{Home: h}
		tr, err := r.buildTranscript(st)
		if err != nil {
			return
		}
		doc, err := tr.Encode()
		if err != nil {
			t.Fatalf("built transcript does not validate: %v", err)
		}
		if _, err := attest.ParseTranscript(doc); err != nil {
			t.Fatalf("built transcript refused by the decoder: %v", err)
		}
	})
}

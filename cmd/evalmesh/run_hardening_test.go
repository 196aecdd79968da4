package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
)

// `run --help`'s example works as printed: the single-node demo makes the home (with a lab certificate
// and the example tasks) and run signs in it without --self-signed. Today's example ran
// `evalmesh init` first, which the demo refuses.
func TestRunHelpExampleWorks(t *testing.T) {
	help, _, code := runE2(t, "run", "--help")
	if code != 0 {
		t.Fatal("run --help failed")
	}
	for _, want := range []string{"evalmesh demo --home /tmp/lab --nodes 1 --seeds 1\n", "evalmesh run --home /tmp/lab --task /tmp/lab/examples/tasks/arithmetic"} {
		if !strings.Contains(help, want) {
			t.Fatalf("run --help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "evalmesh init --home /tmp/lab") {
		t.Fatal("run --help still inits the home the demo then refuses")
	}
	lab := filepath.Join(t.TempDir(), "lab") // stands for /tmp/lab
	if _, e, code := runE2(t, "demo", "--home", lab, "--nodes", "1", "--seeds", "1", "--agents", "solver", "--tasks", "arithmetic"); code != 0 {
		t.Fatalf("demo: %s", e)
	}
	spec := filepath.Join(t.TempDir(), "solver.yaml")
	os.WriteFile(spec, []byte("name: solver\nversion: \"1.0.0\"\ncommand: [\"evalmesh\", \"agent\", \"solver\"]\n"), 0o644)
	out, e, code := runE2(t, "run", "--home", lab, "--task", filepath.Join(lab, "examples", "tasks", "arithmetic"),
		"--agent", spec, "--seed", "0", "--executor", "process")
	if code != 0 || !strings.Contains(out, "score       Accuracy = 1") {
		t.Fatalf("the example's run (%d):\n%s%s", code, out, e)
	}
	// The demo ran seed 0 already: this is the slot's second attempt, and says so.
	if !strings.Contains(out, "attempt     2") {
		t.Fatalf("a re-run of the demo's slot is not attempt 2:\n%s", out)
	}
}

// Without a certificate, run refuses before the agent starts and says what to do; an
// invalid run prints the end of the agent's log.
func TestRunUncertifiedAndInvalidLogTail(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	if _, e, code := runE2(t, "init", "--home", h); code != 0 {
		t.Fatalf("init: %s", e)
	}
	if _, err := exampletasks.Generate(filepath.Join(dir, "tasks")); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(dir, "tasks", "arithmetic")
	crash := filepath.Join(dir, "crash.yaml")
	os.WriteFile(crash, []byte("name: crash\nversion: \"1\"\ncommand: [/bin/sh, -c, 'echo loading model; echo CUDA out of memory >&2; exit 3']\n"), 0o644)
	_, e, code := runE2(t, "run", "--home", h, "--task", task, "--agent", crash, "--executor", "process")
	if code == 0 || !strings.Contains(e, "no node certificate") || !strings.Contains(e, "--self-signed") || !strings.Contains(e, "lab certify") {
		t.Fatalf("uncertified run: exit %d, stderr %q", code, e)
	}
	if ents, _ := os.ReadDir(filepath.Join(h, "runs")); len(ents) != 0 {
		t.Fatalf("the refused run started: %d run folder(s)", len(ents))
	}
	out, e, code := runE2(t, "run", "--home", h, "--task", task, "--agent", crash, "--executor", "process", "--self-signed")
	if code != 0 {
		t.Fatalf("run: %d %s", code, e)
	}
	if !strings.Contains(out, "score       invalid:") || !strings.Contains(out, "| loading model") || !strings.Contains(out, "| CUDA out of memory") {
		t.Fatalf("an invalid run does not show the agent's log:\n%s", out)
	}
	out, _, _ = runE2(t, "run", "--home", h, "--task", task, "--agent", crash, "--executor", "process", "--self-signed", "--json")
	var res runOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Valid || !strings.Contains(res.AgentLogTail, "CUDA out of memory") || res.Attempt != 2 {
		t.Fatalf("JSON of the second invalid run: %+v", res)
	}
}

// version names the module and says whether it knows the VCS revision (a test binary has
// none; `make build` stamps it).
func TestVersionCommand(t *testing.T) {
	out, _, code := runE2(t, "version")
	if code != 0 || !strings.HasPrefix(out, "evalmesh ") || !strings.Contains(out, "revision") || !strings.Contains(out, "github.com/evalmesh/evalmesh") {
		t.Fatalf("version: %q", out)
	}
	out, _, _ = runE2(t, "version", "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || v["module"] != "github.com/evalmesh/evalmesh" || v["version"] == "" {
		t.Fatalf("version --json: %s (%v)", out, err)
	}
	if _, ok := v["revision"]; !ok {
		t.Fatalf("version --json has no revision: %s", out)
	}
}

// openToAgents lets every uid search dir and the folders above it up to the temp folder
// (t.TempDir's are closed to others), so an agent the process executor runs as nobody can
// reach a file the test puts there. It returns dir.
func openToAgents(t *testing.T, dir string) string {
	t.Helper()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

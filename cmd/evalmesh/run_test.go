package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// TestMain lets this test binary stand in for evalmesh when the process executor runs the
// example agents as `<os.Executable()> agent NAME`.
func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && os.Args[1] == "agent" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv("EVALMESH_TEST_CLI") == "1" { // a whole evalmesh process, for SIGKILL tests
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func runE2(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	if _, e, code := runE2(t, "init", "--home", h); code != 0 {
		t.Fatalf("init: %s", e)
	}
	if _, err := exampletasks.Generate(filepath.Join(dir, "tasks")); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "solver.yaml")
	os.WriteFile(spec, []byte("name: solver\nversion: \"1.0.0\"\ncommand: [evalmesh, agent, solver]\n"), 0o644)
	task := filepath.Join(dir, "tasks", "arithmetic")

	out, e, code := runE2(t, "run", "--home", h, "--task", task, "--agent", spec, "--executor", "process", "--json", "--self-signed")
	if code != 0 {
		t.Fatalf("run: %d %s", code, e)
	}
	var res runOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !res.Valid || res.Score == nil || *res.Score != 1 || !strings.HasPrefix(res.AttestationID, "bafkrei") {
		t.Fatalf("run output %+v", res)
	}
	if _, err := os.Stat(res.Attestation); err != nil {
		t.Fatalf("attestation file: %v", err)
	}

	out, _, code = runE2(t, "run", "--home", h, "--task", task, "--agent", spec, "--seed", "2", "--executor", "process", "--self-signed")
	if code != 0 || !strings.Contains(out, "attestation bafkrei") || !strings.Contains(out, "score       Accuracy = 1") {
		t.Fatalf("text output (%d):\n%s", code, out)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: solver\nversion: \"1\"\ncommand: [x]\nimgae: y\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no task", []string{"run", "--home", h, "--agent", spec}, "run needs --task BUNDLE_DIR and --agent AGENT.yaml"},
		{"typo in spec", []string{"run", "--home", h, "--task", task, "--agent", bad, "--executor", "process"}, "field imgae not found"},
		{"not a bundle", []string{"run", "--home", h, "--task", dir, "--agent", spec, "--executor", "process"}, "task.yaml"},
		{"unknown executor", []string{"run", "--home", h, "--task", task, "--agent", spec, "--executor", "vm"}, `executor "vm" is not available`},
		{"docker without image", []string{"run", "--home", h, "--task", task, "--agent", spec, "--executor", "docker"}, "docker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e, code := runE2(t, tt.args...)
			if code == 0 || !strings.Contains(e, tt.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, e, tt.want)
			}
		})
	}
}

func TestGPUsCommand(t *testing.T) {
	out, e, code := runE2(t, "gpus", "--json")
	if code != 0 || e != "" {
		t.Fatalf("gpus: exit %d, stderr %q (the JSON alone says CPU-only)", code, e)
	}
	var inv struct {
		CPUOnly bool `json:"cpu_only"`
		GPUs    []struct {
			UUID string `json:"uuid"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if inv.CPUOnly != (len(inv.GPUs) == 0) {
		t.Fatalf("inventory %s", out)
	}
	text, errs, _ := runE2(t, "gpus")
	if inv.CPUOnly && (strings.Count(text+errs, "CPU-only") != 1 || errs != "") {
		t.Fatalf("CPU-only must be said once, on stdout:\nstdout: %s\nstderr: %s", text, errs)
	}
}

func TestDemoCommand(t *testing.T) {
	h := filepath.Join(t.TempDir(), "home")
	out, e, code := runE2(t, "demo", "--nodes", "1", "--home", h, "--seeds", "1", "--json")
	if code != 0 {
		t.Fatalf("demo: %s", e)
	}
	var res struct {
		Runs     []json.RawMessage `json:"runs"`
		Verified int               `json:"verified"`
		Ledger   struct {
			Agents []struct {
				Agent string `json:"agent"`
			} `json:"agents"`
		} `json:"ledger"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// 3 tasks × 4 baselines and the HeurekaBench task × 2 co-scientists; 4 baselines + sota.
	if len(res.Runs) != 14 || res.Verified != 14 || len(res.Ledger.Agents) != 5 {
		t.Fatalf("demo: %d runs, %d verified, %d leaderboard rows", len(res.Runs), res.Verified, len(res.Ledger.Agents))
	}
	// Again in text on the same home, restricted: a table with the solver in it.
	out, _, code = runE2(t, "demo", "--nodes", "1", "--home", h, "--seeds", "1", "--agents", "solver,constant")
	// The ledger covers both demos' attestations: the second demo repeats 6 slots of the
	// first with the same submissions, so 6 are excluded as duplicates (and runs no
	// co-scientist: --agents names none).
	if code != 0 || !strings.Contains(out, "solver") || !strings.Contains(out, "6 runs (5 valid) signed by node") ||
		!strings.Contains(out, "20 attestations verified under lab lab:") || !strings.Contains(out, "14 counted, 0 refused, 6 excluded") {
		t.Fatalf("demo text (%d):\n%s", code, out)
	}
	if _, e, code := runE2(t, "demo", "--nodes", "1", "--home", h, "--agents", "nobody"); code == 0 || !strings.Contains(e, `no example agent "nobody"`) {
		t.Fatalf("unknown agent: %d %s", code, e)
	}
}

func TestAgentCommandHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "help"} {
		out, e, code := runE2(t, "agent", arg)
		if code != 0 || !strings.Contains(out, "Example agent spec for the process executor") {
			t.Fatalf("agent %s: exit %d\nstdout: %s\nstderr: %s", arg, code, out, e)
		}
	}
}

func TestAgentCommandUnknown(t *testing.T) {
	_, e, code := runE2(t, "agent", "nobody")
	if code != 2 || !strings.Contains(e, `no example agent "nobody"`) {
		t.Fatalf("exit %d: %s", code, e)
	}
}

// An agent spec may name a `docker save` tar instead of an image already in the engine.
func TestRunCommandDockerImageTar(t *testing.T) {
	cli := executortest.DockerClient(t)
	ref := executortest.Image(t, cli)
	dir := t.TempDir()
	rc, err := cli.ImageSave(context.Background(), []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(dir, "agent.tar")
	f, _ := os.Create(tarPath)
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rc.Close()
	spec := filepath.Join(dir, "agent.yaml")
	os.WriteFile(spec, []byte("name: tarred\nversion: \"1\"\nimage_tar: agent.tar\ncommand: [\"/agent\", \"exit\", \"0\"]\n"), 0o644)
	h := filepath.Join(dir, "home")
	runE2(t, "init", "--home", h)
	exampletasks.Generate(filepath.Join(dir, "tasks"))
	out, e, code := runE2(t, "run", "--home", h, "--task", filepath.Join(dir, "tasks", "arithmetic"), "--agent", spec, "--executor", "docker", "--json", "--self-signed")
	if code != 0 {
		t.Fatalf("run: %s", e)
	}
	var res runOutput
	json.Unmarshal([]byte(out), &res)
	// The test agent's submission has the wrong header: attested, and invalid.
	if res.AttestationID == "" || res.Valid || !strings.Contains(res.InvalidReason, "header") {
		t.Fatalf("run output %s", out)
	}
}

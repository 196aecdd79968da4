package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/tasks"
)

type nameOnly struct{ Executor }

func (n nameOnly) Name() string { return "docker" }

// The agent's task config names public/ and the run's own folders, and nothing under
// private/: not as a mount, not in the environment, not as the prompt.
func TestAgentTaskNeverNamesPrivate(t *testing.T) {
	dir := t.TempDir()
	if _, err := exampletasks.Generate(dir); err != nil {
		t.Fatal(err)
	}
	b, err := tasks.Open(filepath.Join(dir, "sentiment"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{AllowNetwork: true}
	st := &RunState{ID: "r1", Seed: 3, Agent: agentspec.Spec{Name: "a", Version: "1", Command: []string{"/agent"}, Network: "none",
		Env: map[string]string{"X": "y"}}, GPUs: []string{"GPU-1"}}
	cfg, err := r.agentTask(st, b, nameOnly{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(cfg)
	if strings.Contains(string(raw), "private") || len(cfg.ExtraMounts) != 0 {
		t.Fatalf("agent task config mentions private/: %s", raw)
	}
	if cfg.PublicDir != b.PublicDir() || cfg.Network || cfg.Env[EnvSeed] != "3" || cfg.GPUs[0] != "GPU-1" {
		t.Fatalf("config %s", raw)
	}
	if cfg.Limits.WallClock != 120*time.Second || cfg.Limits.PIDs != 64 || cfg.Limits.NanoCPUs != 1e9 || cfg.Limits.MemoryBytes != 512<<20 {
		t.Fatalf("limits %+v", cfg.Limits)
	}
	// Network needs both the spec and the lab's policy.
	st.Agent.Network = "bridge"
	if cfg, _ = r.agentTask(st, b, nameOnly{}); !cfg.Network {
		t.Fatal("spec and policy allow a network, none given")
	}
	r.AllowNetwork = false
	if cfg, _ = r.agentTask(st, b, nameOnly{}); cfg.Network {
		t.Fatal("lab policy forbids a network, one given")
	}
}

func TestReadSubmissionRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "labels.csv")
	os.WriteFile(secret, []byte("id,label\n"), 0o644)
	os.Symlink(secret, filepath.Join(dir, "submission.csv"))
	if data, why := readSubmission(dir, "submission.csv"); data != nil || !strings.Contains(why, "is a symbolic link") {
		t.Fatalf("symlinked submission read: %q %q", data, why)
	}
	if _, why := readSubmission(dir, "../x"); !strings.Contains(why, "no usable submission file") {
		t.Fatalf("path in submission name: %q", why)
	}
}

func TestBundleCIDIsStable(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	exampletasks.Generate(a)
	exampletasks.Generate(b)
	for _, n := range exampletasks.Names {
		ca, err := BundleCID(context.Background(), filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		cb, _ := BundleCID(context.Background(), filepath.Join(b, n))
		if ca != cb || !strings.HasPrefix(ca, "bafybei") {
			t.Fatalf("%s: %s vs %s", n, ca, cb)
		}
	}
}

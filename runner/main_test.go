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
	"github.com/evalmesh/evalmesh/examples/agents"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/process"
)

// TestMain lets the process executor run this test binary as the agent: the runner resolves
// a spec's "evalmesh" to SelfExe, which the tests set to os.Args[0].
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "agent" {
		if os.Args[2] == "sleepy" {
			// Sleeps until a file named by the test appears, then solves: lets a test
			// kill the runner while the agent still runs.
			gate := os.Getenv("GATE")
			for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(gate); err == nil {
					break
				}
			}
			os.Exit(agents.Run("solver", nil, os.Stdout, os.Stderr))
		}
		os.Exit(agents.Run(os.Args[2], os.Args[3:], os.Stdout, os.Stderr))
	}
	if os.Getenv("EVALMESH_TEST_NODE") != "" {
		os.Exit(nodeMain())
	}
	os.Exit(m.Run())
}

var (
	examplesOnce sync.Once
	examplesDir  string
	examplesErr  error
)

// exampleTask returns the folder of a generated example task (generated once per test run).
func exampleTask(t *testing.T, name string) string {
	t.Helper()
	examplesOnce.Do(func() {
		examplesDir, examplesErr = os.MkdirTemp("", "evalmesh-examples-")
		if examplesErr == nil {
			_, examplesErr = exampletasks.Generate(examplesDir)
		}
	})
	if examplesErr != nil {
		t.Fatal(examplesErr)
	}
	return filepath.Join(examplesDir, name)
}

// copyTask copies an example task so a test can edit its task.yaml.
func copyTask(t *testing.T, name string, edit func(yaml string) string) string {
	t.Helper()
	src := exampleTask(t, name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == "task.yaml" && edit != nil {
			data = []byte(edit(string(data)))
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func newHome(t *testing.T) home.Home {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if _, err := h.Init(); err != nil {
		t.Fatal(err)
	}
	return h
}

func processRunner(t *testing.T, h home.Home, ex runner.Executor) *runner.Runner {
	t.Helper()
	key, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	if ex == nil {
		ex = process.New(process.Options{})
	}
	return &runner.Runner{
		Home:         h,
		Executors:    map[string]runner.Executor{ex.Name(): ex},
		Executor:     ex.Name(),
		Key:          key,
		SelfSigned:   true,
		SelfExe:      os.Args[0],
		PollInterval: 50 * time.Millisecond,
	}
}

func exampleAgent(name string) *agentspec.Spec {
	return &agentspec.Spec{Name: name, Version: "1.0.0", Command: []string{"evalmesh", "agent", name}}
}

// trustSelf is a trust store that trusts the home's node key directly.
func trustSelf(t *testing.T, h home.Home) *attest.TrustStore {
	t.Helper()
	key, err := h.Identity()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := key.GetPublic().Raw()
	ts := attest.NewTrustStore()
	if _, err := ts.AddNode("self", raw); err != nil {
		t.Fatal(err)
	}
	return ts
}

func attestationFiles(t *testing.T, h home.Home) []string {
	t.Helper()
	ents, err := os.ReadDir(h.AttestationsDir())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	return out
}

var bg = context.Background()

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
)

// privateGate is the real docker executor with one addition: when the agent's task is
// destroyed it checks that the container is really gone from the engine, and only then
// writes the true labels into private/. Until that moment private/ holds junk labels, so a
// runner that read (or mounted for an evaluator) private/ while the agent still existed
// would score the junk.
type privateGate struct {
	runner.Executor
	cli    *client.Client
	labels string // path of private/<labels>
	truth  []byte

	mu     sync.Mutex
	events []string
}

func (g *privateGate) Destroy(ctx context.Context, h *runner.Handle) error {
	err := g.Executor.Destroy(ctx, h)
	if err != nil || !strings.HasSuffix(h.Config.ID, "-agent") {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ierr := g.cli.ContainerInspect(ctx, docker.ContainerName(h.Config.ID)); !cerrdefs.IsNotFound(ierr) {
		g.events = append(g.events, "agent container still exists after Destroy")
		return err
	}
	g.events = append(g.events, "agent gone")
	if werr := os.WriteFile(g.labels, g.truth, 0o644); werr != nil {
		g.events = append(g.events, "write labels: "+werr.Error())
	}
	return err
}

func (g *privateGate) Start(ctx context.Context, cfg runner.TaskConfig) (*runner.Handle, error) {
	if strings.Contains(cfg.ID, "-eval") {
		g.mu.Lock()
		g.events = append(g.events, "evaluator start")
		g.mu.Unlock()
	}
	return g.Executor.Start(ctx, cfg)
}

func TestAgentContainerGoneBeforePrivateTouched(t *testing.T) {
	r, cli := dockerRunner(t)
	img := exampleImage(t, cli)
	solver := &agentspec.Spec{Name: "solver", Version: "1.0.0", Image: img, Command: []string{"/agent"}}
	junk := regexp.MustCompile(`,[^,\n]+\n`)
	tests := []struct {
		name, task string
		edit       func(string) string
		events     string
	}{
		{"built-in metric", "arithmetic", nil, "agent gone"},
		{"evaluator container", "arithmetic", func(y string) string {
			i := strings.Index(y, "evaluator:")
			return y[:i] + "evaluator:\n  labels: private/labels.csv\n  image: " + img + "\n  command: [\"/evaluator\", \"--metric\", \"Accuracy\"]\n"
		}, "agent gone,evaluator start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := copyTask(t, tt.task, tt.edit)
			labels := filepath.Join(task, "private", "labels.csv")
			truth, err := os.ReadFile(labels)
			if err != nil {
				t.Fatal(err)
			}
			header, rows, _ := strings.Cut(string(truth), "\n")
			if err := os.WriteFile(labels, []byte(header+"\n"+junk.ReplaceAllString(rows, ",-12345\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			g := &privateGate{Executor: r.Executors["docker"], cli: cli, labels: labels, truth: truth}
			r.Executors = map[string]runner.Executor{"docker": g}
			o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: solver})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(g.events, ","); got != tt.events {
				t.Fatalf("events %q, want %q", got, tt.events)
			}
			if !o.Valid || o.Score == nil || *o.Score != 1 {
				t.Fatalf("valid %v score %v (%s): private/ was read before the agent's container was gone", o.Valid, o.Predicate.Score, o.InvalidReason)
			}
		})
	}
}

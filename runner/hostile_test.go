package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// Hostile agents in the real engine, through the whole pipeline: each is contained, and the
// signed attestation says why the run is what it is.
func TestRunDockerHostileAgentsAttested(t *testing.T) {
	r, cli := dockerRunner(t)
	img := executortest.Image(t, cli)
	insp, err := cli.ImageInspect(bg, img)
	if err != nil {
		t.Fatal(err)
	}
	limits := func(y string) string {
		y = strings.Replace(y, "wall_clock_seconds: 120", "wall_clock_seconds: 10", 1)
		return strings.Replace(y, "memory_bytes: 536870912", "memory_bytes: 67108864", 1)
	}
	task := copyTask(t, "arithmetic", limits)
	tests := []struct {
		name   string
		args   []string
		reason string // in the attestation's exit reason
		check  func(exit runner.ExitResult, log string) bool
	}{
		{"allocates past its memory limit", []string{"alloc", "512"}, "memory limit",
			func(e runner.ExitResult, log string) bool {
				return e.OOMKilled && !strings.Contains(log, "allocated all")
			}},
		{"outlives its wall-clock limit", []string{"sleep", "1h"}, "wall-clock limit",
			func(e runner.ExitResult, log string) bool {
				return e.TimedOut && !strings.Contains(log, "done sleeping")
			}},
		{"fork bomb", []string{"forkbomb"}, "exited with status 3 after its pids limit refused new processes",
			func(e runner.ExitResult, log string) bool { return strings.Contains(log, "then:") }},
		{"looks for a network", []string{"netifs"}, "",
			func(e runner.ExitResult, log string) bool { return strings.Contains(log, "interfaces: lo\n") }},
		{"writes outside its output folder", []string{"writes"}, "",
			func(e runner.ExitResult, log string) bool {
				for _, p := range []string{"/evil", "/etc/evil", "/task/evil", "/public/evil"} {
					if !strings.Contains(log, "write "+p+": denied") {
						return false
					}
				}
				return strings.Contains(log, "write /output/ok: ok")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := &agentspec.Spec{Name: "hostile", Version: "1", Image: insp.ID, Command: append([]string{"/agent"}, tt.args...)}
			o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: agent})
			if err != nil {
				t.Fatal(err)
			}
			log, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "logs", "agent.log"))
			p := o.Predicate
			exit := runner.ExitResult{ExitCode: p.Exit.Code, Signal: p.Exit.Signal, OOMKilled: p.Exit.OOMKilled, TimedOut: p.Exit.TimedOut}
			if !tt.check(exit, string(log)) {
				t.Fatalf("not contained: exit %+v\nlog:\n%s", p.Exit, log)
			}
			if tt.reason != "" && !strings.Contains(p.Exit.Reason, tt.reason) {
				t.Fatalf("exit reason %q, want %q", p.Exit.Reason, tt.reason)
			}
			// The attestation names the engine behind the Docker API and its version.
			if ex := p.Executor; ex == nil || !strings.HasPrefix(ex.Engine, "docker ") && !strings.HasPrefix(ex.Engine, "podman ") {
				t.Fatalf("predicate executor %+v does not name the engine", ex)
			}
			if o.Valid || !strings.Contains(o.InvalidReason, "no submission") {
				t.Fatalf("valid %v reason %q", o.Valid, o.InvalidReason)
			}
			if tt.reason != "" && !strings.Contains(o.InvalidReason, tt.reason) {
				t.Fatalf("invalid reason %q does not say %q", o.InvalidReason, tt.reason)
			}
		})
	}
	// Nothing the agents tried reached the bundle.
	if _, err := os.Stat(filepath.Join(task, "public", "evil")); err == nil {
		t.Fatal("an agent wrote into the bundle's public/")
	}
}

// The same fork bomb under the process executor (its own pids cgroup, where the node may
// create one): contained, and the attestation says the pids limit is why it ended.
func TestRunProcessForkBombAttested(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: the process executor's pids cgroup needs root")
	}
	h := newHome(t)
	r := processRunner(t, h, nil)
	agent := &agentspec.Spec{Name: "forkbomb", Version: "1", Command: []string{executortest.Binary(t), "forkbomb"}}
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "arithmetic"), Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(runner.RunDir(h, o.RunID), "logs", "agent.log"))
	if !strings.Contains(string(log), "then:") || strings.Contains(string(log), "never refused") {
		t.Fatalf("fork bomb not stopped by the pids limit:\n%s", log)
	}
	if want := "after its pids limit refused new processes"; !strings.Contains(o.Predicate.Exit.Reason, want) {
		t.Fatalf("exit reason %q, want %q", o.Predicate.Exit.Reason, want)
	}
	tel, _ := o.Predicate.Telemetry.(map[string]any)
	if hits, _ := tel["agent_pids_limit_hits"].(float64); hits < 1 {
		t.Fatalf("telemetry %v: no pids-limit hits", o.Predicate.Telemetry)
	}
}

// At the node's default 2 s poll, a fork bomb that gives up after a second is still caught
// hitting its pids limit: the runner samples the agent early (its container's cgroup goes
// with it).
func TestRunDockerForkBombAttestedAtDefaultPoll(t *testing.T) {
	r, cli := dockerRunner(t)
	r.PollInterval = 0
	insp, err := cli.ImageInspect(bg, executortest.Image(t, cli))
	if err != nil {
		t.Fatal(err)
	}
	agent := &agentspec.Spec{Name: "forkbomb", Version: "1", Image: insp.ID, Command: []string{"/agent", "forkbomb"}}
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "arithmetic"), Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	if want := "after its pids limit refused new processes"; !strings.Contains(o.Predicate.Exit.Reason, want) {
		// The agent's log says when and how its forks were refused; the telemetry, what the
		// samples saw.
		log, _ := os.ReadFile(filepath.Join(runner.RunDir(r.Home, o.RunID), "logs", "agent.log"))
		t.Fatalf("exit reason %q, want %q; telemetry %v; agent log:\n%s", o.Predicate.Exit.Reason, want, o.Predicate.Telemetry, log)
	}
	tel, _ := o.Predicate.Telemetry.(map[string]any)
	if mem, _ := tel["agent_peak_memory_bytes"].(float64); mem <= 0 {
		t.Fatalf("telemetry %v: no peak memory sampled for a docker agent", tel)
	}
}

// Under the process executor the agent gets a sandbox whose public/ is a copy with nothing
// beside it but the agent's own folders, and (on a root node) runs as nobody: neither
// $EVALMESH_PUBLIC/../private/labels.csv nor the bundle's private/ by its own path can be
// read. The signed predicate says what the executor really did, and which build signed.
func TestRunProcessHostileAgentCannotReadPrivate(t *testing.T) {
	open := reachableDir(t) // a bundle and an agent program the agent's uid can reach
	task := filepath.Join(open, "sentiment")
	if err := os.CopyFS(task, os.DirFS(exampleTask(t, "sentiment"))); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{task, filepath.Join(task, "public"), filepath.Join(task, "private")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	labelsPath := filepath.Join(task, "private", "labels.csv")
	if err := os.Chmod(labelsPath, 0o644); err != nil {
		t.Fatal(err)
	}
	labels, err := os.ReadFile(labelsPath)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(open, "agent")
	if err := os.WriteFile(bin, mustRead(t, executortest.Binary(t)), 0o755); err != nil {
		t.Fatal(err)
	}
	secret := strings.Split(string(labels), "\n")[1]
	h := newHome(t)
	r := processRunner(t, h, nil)
	root := os.Geteuid() == 0
	cmd := []string{bin, "private", secret}
	if root { // under a uid of its own the agent cannot read the bundle's private/ by its path
		cmd = append(cmd, labelsPath)
	}
	hunter := &agentspec.Spec{Name: "hunter", Version: "1", Command: cmd}
	o, err := r.Run(bg, runner.Request{TaskDir: task, Agent: hunter})
	if err != nil {
		t.Fatal(err)
	}
	log := string(mustRead(t, filepath.Join(runner.RunDir(h, o.RunID), "logs", "agent.log")))
	if !strings.Contains(log, "secret-found: no") {
		t.Fatalf("the agent read private labels:\n%s", log)
	}
	ex := o.Predicate.Executor
	if ex == nil || ex.Name != "process" || ex.Isolation != attest.IsolationProcess || ex.SeparateUID != root {
		t.Fatalf("predicate executor %+v, want process/%s with separate uid %v", ex, attest.IsolationProcess, root)
	}
	if want := map[bool]string{true: "cgroup1", false: "rlimit"}[root]; ex.Limits != want {
		t.Fatalf("predicate executor limits %q, want %q on this machine", ex.Limits, want)
	}
	if root && !strings.Contains(log, "read "+labelsPath+": denied") {
		t.Fatalf("an agent under its own uid read the bundle's private/ by path:\n%s", log)
	}
	if b := o.Predicate.Build; b == nil || b.Module != runner.ModulePath || b.Version == "" {
		t.Fatalf("predicate build %+v, want module %s", b, runner.ModulePath)
	}
	// The same in the signed statement a peer reads.
	if _, err := attest.Verify(o.Envelope, trustSelf(t, h), time.Now()); err != nil {
		t.Fatal(err)
	}
	env, err := attest.DecodeEnvelope(o.Envelope)
	if err != nil {
		t.Fatal(err)
	}
	var signed struct {
		Predicate attest.RunPredicate `json:"predicate"`
	}
	if err := json.Unmarshal(env.Payload, &signed); err != nil {
		t.Fatal(err)
	}
	if p := signed.Predicate; p.Executor == nil || *p.Executor != *ex || p.Build == nil || *p.Build != *o.Predicate.Build {
		t.Fatalf("signed predicate executor %+v build %+v", p.Executor, p.Build)
	}
}

// reachableDir is a fresh folder every uid may search (t.TempDir's are closed to others).
func reachableDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

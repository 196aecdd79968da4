package runner_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/internal/testutil"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/docker"
	"github.com/evalmesh/evalmesh/runner/executortest"
	"github.com/evalmesh/evalmesh/runner/process"
)

// nodeMain is the node process of the SIGKILL tests: it starts one run and waits for it;
// the test kills it with SIGKILL mid-run.
func nodeMain() int {
	var req struct {
		Home, Task, Executor string
		ModelProxy           string
		Agent                agentspec.Spec
		Models               runner.ModelPolicy
	}
	if err := json.Unmarshal([]byte(os.Getenv("EVALMESH_TEST_NODE")), &req); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var ex runner.Executor = process.New(process.Options{})
	if req.Executor == "docker" {
		d, err := docker.New(docker.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		ex = d
	}
	h := home.Home{Dir: req.Home}
	key, _ := h.Identity()
	r := &runner.Runner{Home: h, Executors: map[string]runner.Executor{ex.Name(): ex}, Executor: ex.Name(), Key: key, SelfExe: os.Args[0], SelfSigned: true, Models: req.Models, ModelProxy: req.ModelProxy}
	if _, err := r.Run(bg, runner.Request{TaskDir: req.Task, Agent: &req.Agent}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// sigkillRecovery starts a node process, SIGKILLs it while the agent runs, then recovers in
// this process: the run is re-attached and finished, and attested exactly once.
func sigkillRecovery(t *testing.T, r *runner.Runner, agent agentspec.Spec) *runner.Outcome {
	req, _ := json.Marshal(map[string]any{"Home": r.Home.Dir, "Task": exampleTask(t, "arithmetic"), "Executor": r.Executor, "Agent": agent, "Models": r.Models, "ModelProxy": r.ModelProxy})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_NODE="+string(req))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	testutil.WaitFor(t, 60*time.Second, "the node to record its agent task", func() bool {
		runs, _ := runner.ListRuns(r.Home)
		if len(runs) == 1 && runs[0].Phase == runner.PhaseAgent {
			id = runs[0].ID
			return true
		}
		return false
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("node process ended %v before it was killed; stderr:\n%s", err, stderr.String())
	}
	if st, _ := runner.LoadState(r.Home, id); st.Phase != runner.PhaseAgent {
		t.Fatalf("after SIGKILL the run is in phase %s", st.Phase)
	}
	rec, err := r.Recover(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || rec[0].Err != nil {
		t.Fatalf("recovered %+v", rec)
	}
	o := rec[0].Outcome
	if o.Predicate.Exit.Code != 0 || o.Predicate.Exit.Reason != "" {
		t.Fatalf("re-attached agent ended %+v, want a clean exit (it was not lost)", o.Predicate.Exit)
	}
	if files := attestationFiles(t, r.Home); len(files) != 1 {
		t.Fatalf("attestations %v", files)
	}
	if again, _ := r.Recover(bg); len(again) != 0 {
		t.Fatalf("recovered twice: %+v", again)
	}
	return o
}

func TestSIGKILLRecoveryProcess(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	sigkillRecovery(t, r, agentspec.Spec{Name: "sleeper", Version: "1", Command: []string{"/bin/sleep", "3"}})
}

func TestSIGKILLRecoveryDocker(t *testing.T) {
	r, cli := dockerRunner(t)
	img := executortest.Image(t, cli)
	insp, err := cli.ImageInspect(bg, img)
	if err != nil {
		t.Fatal(err)
	}
	sigkillRecovery(t, r, agentspec.Spec{Name: "sleeper", Version: "1", Image: insp.ID, Command: []string{"/agent", "sleep", "5s"}})
}

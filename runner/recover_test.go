package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"

	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/gpu"
	"github.com/evalmesh/evalmesh/runner/process"
)

// fakeGPUs is a two-GPU source whose energy counters advance by 1 J per read.
type fakeGPUs struct {
	mu     sync.Mutex
	energy map[string]uint64
}

func (f *fakeGPUs) Inventory() (gpu.Inventory, error) {
	return gpu.Inventory{Driver: "550.54.15", GPUs: []gpu.Info{
		{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", MemoryBytes: 141 << 30},
		{Index: 1, UUID: "GPU-bbbb", Name: "NVIDIA H200", MemoryBytes: 141 << 30},
	}}, nil
}

func (f *fakeGPUs) EnergyMilliJoules(uuid string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.energy == nil {
		f.energy = map[string]uint64{}
	}
	f.energy[uuid] += 1000
	return f.energy[uuid], nil
}

func (f *fakeGPUs) Sample(string) (gpu.Sample, error) {
	return gpu.Sample{GPUPercent: 50, UsedBytes: 1 << 30}, nil
}

func gpuTask(t *testing.T) string {
	return copyTask(t, "arithmetic", func(y string) string { return strings.Replace(y, "gpus: 0", "gpus: 1", 1) })
}

func rewriteState(t *testing.T, r *runner.Runner, id string, edit func(*runner.RunState)) {
	t.Helper()
	st, err := runner.LoadState(r.Home, id)
	if err != nil {
		t.Fatal(err)
	}
	edit(st)
	b, _ := jsonMarshal(st)
	if err := os.WriteFile(filepath.Join(runner.RunDir(r.Home, id), "state.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverNeverSignsTwice(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "arithmetic"), Agent: exampleAgent("heuristic"), Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	dir := runner.RunDir(h, o.RunID)
	steps := []struct {
		name  string
		crash func()
	}{
		{"crash after attestation.json, before state.json said done", func() {
			rewriteState(t, r, o.RunID, func(s *runner.RunState) { s.Phase, s.AttestationID = runner.PhaseSigning, "" })
		}},
		{"crash after statement.json, before signing", func() {
			rewriteState(t, r, o.RunID, func(s *runner.RunState) { s.Phase, s.AttestationID = runner.PhaseEvaluating, "" })
			os.Remove(filepath.Join(dir, "attestation.json"))
			os.Remove(filepath.Join(h.AttestationsDir(), o.AttestationID+".json"))
		}},
		{"crash while the state still said agent", func() {
			rewriteState(t, r, o.RunID, func(s *runner.RunState) { s.Phase, s.AttestationID = runner.PhaseAgent, "" })
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.crash()
			r2 := processRunner(t, h, nil) // a fresh process
			rec, err := r2.Recover(bg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rec) != 1 || rec[0].Err != nil || rec[0].Outcome == nil {
				t.Fatalf("recovered %+v", rec)
			}
			if rec[0].Outcome.AttestationID != o.AttestationID {
				t.Fatalf("recovery produced attestation %s, the run had %s", rec[0].Outcome.AttestationID, o.AttestationID)
			}
			if files := attestationFiles(t, h); len(files) != 1 {
				t.Fatalf("attestations after recovery: %v", files)
			}
			if st, _ := runner.LoadState(h, o.RunID); st.Phase != runner.PhaseDone {
				t.Fatalf("phase %s", st.Phase)
			}
			if again, _ := r2.Recover(bg); len(again) != 0 {
				t.Fatalf("second recovery did something: %+v", again)
			}
		})
	}
}

// startSleepy starts a run of the gated agent, waits until its task is recorded, then
// abandons it as a SIGKILLed node would (cancelling the context leaves the task running).
func startSleepy(t *testing.T, r *runner.Runner, task, gate string) string {
	t.Helper()
	agent := exampleAgent("sleepy")
	agent.Env = map[string]string{"GATE": gate}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, runner.Request{TaskDir: task, Agent: agent, Seed: 2})
		done <- err
	}()
	var id string
	testutil.WaitFor(t, 20*time.Second, "the agent task to be recorded", func() bool {
		runs, _ := runner.ListRuns(r.Home)
		if len(runs) == 1 && runs[0].Phase == runner.PhaseAgent {
			id = runs[0].ID
			return true
		}
		return false
	})
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("abandoned run returned %v", err)
	}
	return id
}

func TestRecoverReattachesToRunningAgent(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	r.GPUs = &fakeGPUs{}
	gate := filepath.Join(t.TempDir(), "gate")
	id := startSleepy(t, r, gpuTask(t), gate)
	st, _ := runner.LoadState(h, id)
	if st.Phase != runner.PhaseAgent || len(st.GPUs) != 1 {
		t.Fatalf("abandoned run: %+v", st)
	}
	if held, _ := runner.GPUHolders(h); len(held) != 1 || held["GPU-aaaa"] != id {
		t.Fatalf("GPU holders %v, want GPU-aaaa held by %s", held, id)
	}

	r2 := processRunner(t, h, nil)
	r2.GPUs = r.GPUs // the same hardware: its energy counters kept counting
	// While the abandoned run lives, its GPU is held: a second 1-GPU run gets the other one.
	// (Checked through allocation of a 2-GPU task, which must fail.)
	two := copyTask(t, "arithmetic", func(y string) string { return strings.Replace(y, "gpus: 0", "gpus: 2", 1) })
	if _, err := r2.Run(bg, runner.Request{TaskDir: two, Agent: exampleAgent("solver")}); err == nil || !strings.Contains(err.Error(), "1 of this node's 2 are free") {
		t.Fatalf("2-GPU run while 1 GPU is held: %v", err)
	}

	recDone := make(chan []runner.Recovered, 1)
	go func() {
		rec, _ := r2.Recover(bg)
		recDone <- rec
	}()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var rec []runner.Recovered
	select {
	case rec = <-recDone:
	case <-time.After(60 * time.Second):
		t.Fatal("recovery did not finish")
	}
	if len(rec) != 1 || rec[0].Err != nil || rec[0].Outcome == nil {
		t.Fatalf("recovered %+v", rec)
	}
	o := rec[0].Outcome
	if !o.Valid || *o.Score != 1 || o.Predicate.Hardware.GPUCount != 1 || o.Predicate.Hardware.GPUModel != "NVIDIA H200" {
		t.Fatalf("re-attached run: valid %v score %v hardware %+v", o.Valid, o.Score, o.Predicate.Hardware)
	}
	if o.Predicate.EnergyJoules <= 0 {
		t.Fatalf("energy %v: the counter delta must span the restart", o.Predicate.EnergyJoules)
	}
	if files := attestationFiles(t, h); len(files) != 1 {
		t.Fatalf("attestations: %v", files)
	}
}

func TestRecoverLostTaskFailsAndReleasesGPUs(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	r.GPUs = &fakeGPUs{}
	gate := filepath.Join(t.TempDir(), "gate")
	id := startSleepy(t, r, gpuTask(t), gate)
	st, _ := runner.LoadState(h, id)
	// The task disappears while the node is down (machine reboot, someone cleaned up).
	ex := r.Executors["process"]
	if err := ex.Stop(bg, st.AgentHandle, 0); err != nil {
		t.Fatal(err)
	}
	if err := ex.Destroy(bg, st.AgentHandle); err != nil {
		t.Fatal(err)
	}

	r2 := processRunner(t, h, nil)
	r2.GPUs = &fakeGPUs{}
	rec, err := r2.Recover(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || rec[0].Err == nil || rec[0].Outcome != nil {
		t.Fatalf("recovered %+v, want a failed run", rec)
	}
	st, _ = runner.LoadState(h, id)
	if st.Phase != runner.PhaseFailed || !strings.Contains(st.Error, "lost") {
		t.Fatalf("state %s: %s", st.Phase, st.Error)
	}
	if files := attestationFiles(t, h); len(files) != 0 {
		t.Fatalf("a lost run was attested: %v", files)
	}
	// Both GPUs are free again.
	two := copyTask(t, "arithmetic", func(y string) string { return strings.Replace(y, "gpus: 0", "gpus: 2", 1) })
	o, err := r2.Run(bg, runner.Request{TaskDir: two, Agent: exampleAgent("solver")})
	if err != nil || o.Predicate.Hardware.GPUCount != 2 {
		t.Fatalf("2-GPU run after recovery: %v", err)
	}
}

// A node killed while its evaluator ran: the restarted node removes that evaluator task and
// evaluates again under a new task ID, and signs once.
func TestRecoverDuringEvaluation(t *testing.T) {
	h := newHome(t)
	gate := filepath.Join(t.TempDir(), "gate")
	task := copyTask(t, "arithmetic", func(y string) string {
		i := strings.Index(y, "evaluator:")
		script := `while [ ! -e ` + gate + ` ]; do sleep 0.05; done; echo '--- EVALUATION RESULT ---'; echo '{"Accuracy": 0.5}'`
		return y[:i] + "evaluator:\n  image: sha256:" + strings.Repeat("0", 64) + "\n  command: [\"/bin/sh\", \"-c\", \"" + strings.ReplaceAll(script, `"`, `\"`) + "\"]\n"
	})
	oe := &orderExecutor{Executor: processRunner(t, h, nil).Executors["process"]}
	r := processRunner(t, h, oe)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, runner.Request{TaskDir: task, Agent: exampleAgent("solver")})
		done <- err
	}()
	var id string
	testutil.WaitFor(t, 30*time.Second, "the evaluator task to be recorded", func() bool {
		runs, _ := runner.ListRuns(h)
		if len(runs) == 1 && runs[0].EvalHandle != nil {
			id = runs[0].ID
			return true
		}
		return false
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("abandoned run returned no error")
	}
	if st, _ := runner.LoadState(h, id); st.Phase != runner.PhaseEvaluating {
		t.Fatalf("phase %s", st.Phase)
	}
	oe2 := &orderExecutor{Executor: oe.Executor}
	r2 := processRunner(t, h, oe2)
	os.WriteFile(gate, nil, 0o644)
	rec, err := r2.Recover(bg)
	if err != nil || len(rec) != 1 || rec[0].Err != nil {
		t.Fatalf("recover: %v %+v", err, rec)
	}
	if o := rec[0].Outcome; !o.Valid || *o.Score != 0.5 {
		t.Fatalf("outcome valid %v score %v (%s)", o.Valid, o.Score, o.InvalidReason)
	}
	if got := strings.Join(oe2.calls, ","); got != "destroy eval0,start eval1,destroy eval1" {
		t.Fatalf("recovery calls %s", got)
	}
	if files := attestationFiles(t, h); len(files) != 1 {
		t.Fatalf("attestations %v", files)
	}
}

// Two evalmesh processes on one home: recovery leaves alone a run another live process
// drives (its lock is held), so the run is neither doubled nor torn down.
func TestRecoverSkipsRunsOwnedByALiveProcess(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	gate := filepath.Join(t.TempDir(), "gate")
	agent := exampleAgent("sleepy")
	agent.Env = map[string]string{"GATE": gate}
	done := make(chan *runner.Outcome, 1)
	go func() {
		o, err := r.Run(bg, runner.Request{TaskDir: exampleTask(t, "arithmetic"), Agent: agent})
		if err != nil {
			t.Error(err)
		}
		done <- o
	}()
	testutil.WaitFor(t, 20*time.Second, "the agent task to be recorded", func() bool {
		runs, _ := runner.ListRuns(h)
		return len(runs) == 1 && runs[0].Phase == runner.PhaseAgent
	})
	if rec, err := processRunner(t, h, nil).Recover(bg); err != nil || len(rec) != 0 {
		t.Fatalf("recovered a live run: %+v %v", rec, err)
	}
	os.WriteFile(gate, nil, 0o644)
	if o := <-done; o == nil || !o.Valid {
		t.Fatalf("owner's run: %+v", o)
	}
	if files := attestationFiles(t, h); len(files) != 1 {
		t.Fatalf("attestations %v", files)
	}
}

// A process that lacks the run's executor (a docker run, recovered by `evalmesh run
// --executor process`) must leave the run alone: failing it would free GPUs its task still
// uses. A process that has the executor then finishes it, once.
func TestRecoverWithoutTheRunsExecutorLeavesItAlone(t *testing.T) {
	h := newHome(t)
	r := processRunner(t, h, nil)
	r.GPUs = &fakeGPUs{}
	gate := filepath.Join(t.TempDir(), "gate")
	id := startSleepy(t, r, gpuTask(t), gate)

	other := processRunner(t, h, nil)
	other.Executors = map[string]runner.Executor{"other": process.New(process.Options{})}
	other.Executor = "other"
	other.GPUs = r.GPUs
	rec, err := other.Recover(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 1 || !errors.Is(rec[0].Err, runner.ErrExecutorUnavailable) || rec[0].Outcome != nil {
		t.Fatalf("recovered %+v, want the run left alone with ErrExecutorUnavailable", rec)
	}
	if !strings.Contains(rec[0].Err.Error(), "--executor process") {
		t.Fatalf("error %q does not say how to recover the run", rec[0].Err)
	}
	st, _ := runner.LoadState(h, id)
	if st.Phase != runner.PhaseAgent {
		t.Fatalf("phase %s (%s), want agent", st.Phase, st.Error)
	}
	if held, _ := runner.GPUHolders(h); held["GPU-aaaa"] != id {
		t.Fatalf("GPU holders %v: the run's GPU was released while its task runs", held)
	}
	if ts, err := r.Executors["process"].Inspect(bg, st.AgentHandle); err != nil || !ts.Running {
		t.Fatalf("agent task after the foreign recovery: %+v %v", ts, err)
	}

	os.WriteFile(gate, nil, 0o644)
	r2 := processRunner(t, h, nil)
	r2.GPUs = r.GPUs
	rec, err = r2.Recover(bg)
	if err != nil || len(rec) != 1 || rec[0].Err != nil || rec[0].Outcome == nil || !rec[0].Outcome.Valid {
		t.Fatalf("recovery with the run's executor: %+v %v", rec, err)
	}
	if files := attestationFiles(t, h); len(files) != 1 {
		t.Fatalf("attestations %v", files)
	}
}

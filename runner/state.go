package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

// Phase is where a run stands. The order is the pipeline's; Done and Failed are final.
type Phase string

const (
	PhaseStarting   Phase = "starting"   // GPUs held, agent not started (or its handle not saved)
	PhaseAgent      Phase = "agent"      // agent task started; AgentHandle saved
	PhaseEvaluating Phase = "evaluating" // agent ended and destroyed; scoring the submission
	PhaseSigning    Phase = "signing"    // statement.json written; signing it
	PhaseDone       Phase = "done"       // attestation.json written
	PhaseFailed     Phase = "failed"     // ended without an attestation (Error says why)
	// PhaseAwaitingKey: the agent ended and its submission is kept, but the bundle is sealed
	// and this lab holds no grant of its key; the run holds no GPUs and is scored when a
	// grant arrives (Runner.ScoreAwaiting, Recover).
	PhaseAwaitingKey Phase = "awaiting-key"
)

// Final reports whether the run holds nothing any more (its GPUs are free).
func (p Phase) Final() bool { return p == PhaseDone || p == PhaseFailed }

// holdsGPUs reports whether a run in this phase keeps its GPUs.
func (p Phase) holdsGPUs() bool { return !p.Final() && p != PhaseAwaitingKey }

// RunState is HOME/runs/<run-id>/state.json, rewritten atomically at every phase change so a
// restarted node knows what each run was doing and which GPUs it held.
type RunState struct {
	ID       string         `json:"id"`
	Phase    Phase          `json:"phase"`
	Executor string         `json:"executor"`
	TaskDir  string         `json:"task_dir"`
	TaskCID  string         `json:"task_cid"`
	Campaign string         `json:"campaign"`
	Agent    agentspec.Spec `json:"agent"`
	AgentCID string         `json:"agent_cid"`
	Seed     int            `json:"seed"`
	// Attempt is the attempt number the run signs: the caller's (Request.Attempt, from the
	// claim machine) or, when higher, one more than this node's earlier runs of the slot
	// (nextAttempt). 0 in states of an older evalmesh, attested as absent (read as 1).
	Attempt int `json:"attempt,omitempty"`
	// Witness is the witness record the run cites (Request.Witness), kept so a run recovered
	// after a crash signs the same one.
	Witness string `json:"witness,omitempty"`
	// Audit: this is a re-execution of another lab's run (Request.Audit): never signed,
	// and not resumed after a restart.
	Audit bool      `json:"audit,omitempty"`
	GPUs  []string  `json:"gpus,omitempty"`
	Start time.Time `json:"start"`
	// AgentHandle is saved right after Start, before waiting, so Recover can re-attach.
	AgentHandle *Handle     `json:"agent_handle,omitempty"`
	AgentExit   *ExitResult `json:"agent_exit,omitempty"`
	// ModelHandle is the model's task (an agent spec with a model), saved before waiting
	// for it to be ready; ModelGPUs its share of GPUs; ModelReady when it first answered;
	// ModelEnded once it was stopped and removed (after the agent, before scoring).
	ModelHandle *Handle   `json:"model_handle,omitempty"`
	ModelGPUs   []string  `json:"model_gpus,omitempty"`
	ModelReady  time.Time `json:"model_ready,omitempty"`
	ModelEnded  bool      `json:"model_ended,omitempty"`
	// ProxyHandle is the recording proxy's task beside the model (transcript.go), saved
	// before waiting for it; ProxyEnded once it was stopped and removed.
	ProxyHandle *Handle `json:"proxy_handle,omitempty"`
	ProxyEnded  bool    `json:"proxy_ended,omitempty"`
	// BridgeHandle is the bridge the agent reaches the recorder through (transcript.go).
	BridgeHandle *Handle `json:"bridge_handle,omitempty"`
	BridgeEnded  bool    `json:"bridge_ended,omitempty"`
	// EvalHandle is the evaluator task while it runs; EvalAttempt numbers evaluator tasks so
	// a retry after a restart never collides with a leftover of the previous attempt.
	EvalHandle  *Handle `json:"eval_handle,omitempty"`
	EvalAttempt int     `json:"eval_attempt,omitempty"`
	// AgentPeakMemory and AgentCPUSeconds are what the executor measured, where it can.
	AgentPeakMemory int64   `json:"agent_peak_memory_bytes,omitempty"`
	AgentCPUSeconds float64 `json:"agent_cpu_seconds,omitempty"`
	// AgentPIDsLimitHits counts forks the agent's pids limit refused (sampled while it ran).
	AgentPIDsLimitHits int64 `json:"agent_pids_limit_hits,omitempty"`
	// AgentGPUSeconds and AgentEnergyJoules are the executor's own accounting of the agent
	// (a scheduler's: TaskStatus.GPUSeconds, EnergyJoules); 0: measured by the runner.
	AgentGPUSeconds   float64       `json:"agent_gpu_seconds,omitempty"`
	AgentEnergyJoules float64       `json:"agent_energy_joules,omitempty"`
	Telemetry         gpu.Telemetry `json:"telemetry"`
	// AttestationID is set once attestation.json exists.
	AttestationID string    `json:"attestation_id,omitempty"`
	Error         string    `json:"error,omitempty"`
	Updated       time.Time `json:"updated"`
}

// Files of a run folder.
const (
	stateFile       = "state.json"
	statementFile   = "statement.json"
	attestationFile = "attestation.json"
	lockFile        = ".lock"
)

// RunDir is a run's folder.
func RunDir(h home.Home, runID string) string { return filepath.Join(h.RunsDir(), runID) }

// ObjectsDir holds the submissions and log archives of runs, each named by its CID.
func ObjectsDir(h home.Home) string { return h.ObjectsDir() }

func saveState(h home.Home, st *RunState, now time.Time) error {
	st.Updated = now.UTC()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(filepath.Join(RunDir(h, st.ID), stateFile), b, 0o644)
}

// LoadState reads a run's state.
func LoadState(h home.Home, runID string) (*RunState, error) {
	b, err := os.ReadFile(filepath.Join(RunDir(h, runID), stateFile))
	if err != nil {
		return nil, err
	}
	return DecodeState(runID, b)
}

// DecodeState parses the state.json of run folder runID. It is a decoder of input from disk
// (a crash, a hand edit): the ID must name that very folder, since every later write goes to
// RunDir(ID), and the phase must be one this runner knows.
func DecodeState(runID string, b []byte) (*RunState, error) {
	var st RunState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("run %s: state.json is corrupt: %w", runID, err)
	}
	if st.ID != runID {
		return nil, fmt.Errorf("run %s: state.json names run %q: it belongs to another folder (move it back or remove the folder)", runID, st.ID)
	}
	switch st.Phase {
	case PhaseStarting, PhaseAgent, PhaseEvaluating, PhaseSigning, PhaseDone, PhaseFailed, PhaseAwaitingKey:
	default:
		return nil, fmt.Errorf("run %s: state.json has unknown phase %q", runID, st.Phase)
	}
	return &st, nil
}

// ListRuns returns every run's state in ID order; unreadable folders are skipped.
func ListRuns(h home.Home) ([]*RunState, error) {
	ents, err := os.ReadDir(h.RunsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*RunState
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		st, err := LoadState(h, e.Name())
		if err != nil {
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// busyGPUs is the set of GPUs held by runs that are not final.
func busyGPUs(runs []*RunState) map[string]bool {
	busy := map[string]bool{}
	for _, r := range runs {
		if !r.Phase.holdsGPUs() {
			continue
		}
		for _, g := range r.GPUs {
			busy[g] = true
		}
	}
	return busy
}

// lockRuns takes an exclusive lock on HOME/runs so that two evalmesh processes sharing a
// home never hand the same GPU to two runs. The lock dies with the process.
func lockRuns(h home.Home) (unlock func(), err error) {
	if err := os.MkdirAll(h.RunsDir(), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(h.RunsDir(), lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// errOwned means another live process drives the run.
var errOwned = errors.New("run is driven by another live evalmesh process")

// ownRun takes the run's own lock for as long as this process drives it. The lock dies with
// the process, so a SIGKILLed node's runs are free for Recover at once, while two processes
// sharing a home never drive the same run.
func ownRun(h home.Home, runID string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(RunDir(h, runID), lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errOwned
		}
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// writeOnce creates path with data atomically (temp file, fsync, link) unless it exists.
// It returns the bytes now at path: data if it wrote them, the existing content otherwise.
// This is what keeps a run to one statement and one attestation across crashes.
func writeOnce(path string, data []byte) ([]byte, error) {
	if old, err := os.ReadFile(path); err == nil {
		return old, nil
	}
	if err := home.WriteFileExclusive(path, data, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return os.ReadFile(path)
		}
		return nil, err
	}
	return data, nil
}

// GPUHolders maps each GPU held by an unfinished run of the home to that run's ID.
func GPUHolders(h home.Home) (map[string]string, error) {
	runs, err := ListRuns(h)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range runs {
		if !r.Phase.holdsGPUs() {
			continue
		}
		for _, g := range r.GPUs {
			out[g] = r.ID
		}
	}
	return out, nil
}

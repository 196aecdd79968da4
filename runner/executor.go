package runner

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Paths an agent sees. The docker executor mounts the run's folders at these paths; the
// process executor passes the host paths in the same environment variables, so one agent
// binary runs under both.
const (
	AgentPublicDir    = "/public"    // read-only: the bundle's public/ folder
	AgentWorkspaceDir = "/workspace" // read-write scratch, empty at start
	AgentOutputDir    = "/output"    // read-write: the agent leaves its submission here
	AgentPromptPath   = "/task/prompt.md"
	AgentMetaPath     = "/task/task.yaml" // read-only: the bundle's task.yaml (submission header, rows)

	EnvPublic    = "EVALMESH_PUBLIC"
	EnvWorkspace = "EVALMESH_WORKSPACE"
	EnvOutput    = "EVALMESH_OUTPUT"
	EnvPrompt    = "EVALMESH_PROMPT"
	EnvTaskMeta  = "EVALMESH_TASK_META"
	EnvSeed      = "EVALMESH_SEED"
	EnvGPUs      = "EVALMESH_GPUS" // comma-separated UUIDs assigned to the run
)

// Limits bound what one task may use. Zero means "no limit of this kind".
type Limits struct {
	MemoryBytes int64         `json:"memory_bytes,omitempty"`
	NanoCPUs    int64         `json:"nano_cpus,omitempty"` // 1e9 = one core
	PIDs        int64         `json:"pids,omitempty"`
	WallClock   time.Duration `json:"wall_clock,omitempty"`
	// OutputBytes bounds the task's output folder: a size-limited mount where the node can
	// make one (writes past it fail), else checked when the output is collected; either way
	// the output is cut off there and the run invalid (runner.CollectOutput).
	OutputBytes int64 `json:"output_bytes,omitempty"`
}

// TaskConfig is everything an executor needs to start one agent or evaluator task.
type TaskConfig struct {
	// ID names the task uniquely on this node (the run ID plus a role); executors use it to
	// name containers and to find them again after a restart.
	ID string `json:"id"`
	// Image is an image reference or digest (docker) or unused (process).
	Image string `json:"image,omitempty"`
	// Command is the argv; for the process executor Command[0] is a path to an executable.
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	// Host folders mounted at AgentPublicDir (read-only), AgentWorkspaceDir and AgentOutputDir.
	PublicDir    string `json:"public_dir,omitempty"`
	WorkspaceDir string `json:"workspace_dir,omitempty"`
	OutputDir    string `json:"output_dir,omitempty"`
	// PromptPath is a host file mounted read-only at AgentPromptPath.
	PromptPath string `json:"prompt_path,omitempty"`
	// MetaPath is a host file (the bundle's task.yaml) mounted read-only at AgentMetaPath.
	MetaPath string `json:"meta_path,omitempty"`
	// ExtraMounts are further read-only host folders, e.g. private/ for an evaluator; never
	// used for an agent.
	ExtraMounts []Mount `json:"extra_mounts,omitempty"`
	// GPUs are the NVML UUIDs assigned to this task.
	GPUs []string `json:"gpus,omitempty"`
	// Network gives the task a network; false means loopback only.
	Network bool `json:"network,omitempty"`
	// JoinNetworkOf is the ID of a running task whose network namespace this task shares
	// (a pod: the agent beside its model); it then has no network of its own.
	JoinNetworkOf string `json:"join_network_of,omitempty"`
	Limits        Limits `json:"limits"`
	// LogPath receives the task's stdout and stderr.
	LogPath string `json:"log_path"`
}

// Mount is a read-only bind of a host path into the task.
type Mount struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

// Handle identifies a started task. It is plain data: the caller persists it (JSON) before
// waiting, and after a node restart hands it back to Recover.
type Handle struct {
	Driver  string     `json:"driver"`
	Config  TaskConfig `json:"config"`
	Started time.Time  `json:"started"`
	// Deadline is Started + Limits.WallClock (zero: none); it survives restarts.
	Deadline time.Time `json:"deadline,omitempty"`
	// DriverState is the executor's own data (container ID, PID and start time, …).
	DriverState json.RawMessage `json:"driver_state,omitempty"`
}

// ExitResult is how a task ended.
type ExitResult struct {
	ExitCode  int       `json:"exit_code"`
	Signal    int       `json:"signal,omitempty"`
	OOMKilled bool      `json:"oom_killed,omitempty"`
	TimedOut  bool      `json:"timed_out,omitempty"` // killed at the wall-clock limit
	Err       string    `json:"error,omitempty"`     // the executor could not tell (lost task, …)
	Finished  time.Time `json:"finished"`
	// PIDsLimited is set by the runner when the task's pids limit refused a fork during
	// the run (TaskStatus.PIDsLimitHits), so an exit it caused is reported as such.
	PIDsLimited bool `json:"pids_limited,omitempty"`
}

// Successful reports a clean zero exit.
func (r *ExitResult) Successful() bool {
	return r != nil && r.ExitCode == 0 && r.Signal == 0 && !r.OOMKilled && !r.TimedOut && r.Err == ""
}

// TaskStatus is what Inspect reports.
type TaskStatus struct {
	Running bool        `json:"running"`
	Exit    *ExitResult `json:"exit,omitempty"` // set once the task has ended
	// PeakMemoryBytes and CPUSeconds where the executor can measure them.
	PeakMemoryBytes int64   `json:"peak_memory_bytes,omitempty"`
	CPUSeconds      float64 `json:"cpu_seconds,omitempty"`
	// PIDsLimitHits counts forks the pids limit refused, where the executor can read it.
	PIDsLimitHits int64 `json:"pids_limit_hits,omitempty"`
	// GPUSeconds and EnergyJoules are what a scheduler's accounting recorded for the task
	// once it ended (the slurm executor: allocated GPUs × the job's elapsed time, and the
	// compute node's NVML or Slurm's energy counters); 0: the runner measures them itself.
	GPUSeconds   float64 `json:"gpu_seconds,omitempty"`
	EnergyJoules float64 `json:"energy_joules,omitempty"`
}

// ErrTaskLost is returned by Recover (and Wait after a restart) when the task no longer
// exists: the caller marks the run failed and releases its GPUs.
var ErrTaskLost = errors.New("task lost")

// Executor runs tasks. It has the shape of Nomad's task drivers: Start returns a Handle the
// caller persists; Wait blocks until the task ends (enforcing the wall-clock deadline by
// stopping the task and reporting TimedOut); Stop kills it after a grace period; Inspect
// reports its state; Recover re-attaches to a task from a saved Handle after the node
// restarted, or returns ErrTaskLost; Destroy removes what the task left behind (container,
// cgroup) once the caller has read its result.
//
// Implementations are safe for concurrent use on distinct handles.
type Executor interface {
	Name() string
	Start(ctx context.Context, cfg TaskConfig) (*Handle, error)
	Wait(ctx context.Context, h *Handle) (*ExitResult, error)
	Stop(ctx context.Context, h *Handle, grace time.Duration) error
	Inspect(ctx context.Context, h *Handle) (*TaskStatus, error)
	Recover(ctx context.Context, h *Handle) error
	Destroy(ctx context.Context, h *Handle) error
}

// Containment is what an executor really enforced on one task: what the run attestation
// records as its executor (attest.ExecutorInfo).
type Containment struct {
	// Isolation is attest.IsolationContainer or attest.IsolationProcess.
	Isolation string
	// Limits is how resource limits were applied: "cgroup2", "cgroup1", "rlimit" or "none".
	Limits string
	// SeparateUID: the task ran under a uid other than the node's.
	SeparateUID bool
	// Engine names the container engine and its version ("docker 24.0.7", "podman 4.3.1");
	// empty for an executor without one.
	Engine string
	// Note says, when the task kept the node's uid, why (not attested; for logs).
	Note string
	// Partition and Node are where a scheduler ran the task (the slurm executor); empty for
	// an executor on this machine.
	Partition string
	Node      string
}

// ContainmentReporter is an Executor that can say what it enforced on a task it started.
// Runs of an executor that cannot are attested as host processes without limits.
type ContainmentReporter interface {
	Containment(h *Handle) Containment
}

// inContainer reports whether ex runs tasks in containers (docker here, or slurm on a
// compute node's engine): the task sees the Agent*Dir paths, an image is required, and a
// command's "evalmesh" is the image's, not this binary.
func inContainer(ex Executor) bool {
	n := ex.Name()
	return n == "docker" || n == "slurm"
}

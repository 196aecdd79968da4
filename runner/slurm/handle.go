package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
)

// DriverName is Handle.Driver for tasks this executor submitted.
const DriverName = "slurm"

// Files of a task's job folder (JobDir): the spec the compute node reads, the batch script,
// the job's own output, the record the compute node leaves, and the marker Stop writes
// before it cancels (so a cancelled job tells evalmesh's own Stop from an operator's scancel).
const (
	specFile    = "spec.json"
	scriptFile  = "job.sh"
	outFile     = "slurm.out"
	recordFile  = "record.json"
	stoppedFile = "stopped"
)

// state is Handle.DriverState: the job ID is the handle; the job folder holds the rest.
type state struct {
	JobID     string `json:"job_id"`
	JobDir    string `json:"job_dir"`
	Partition string `json:"partition,omitempty"`
	GPUs      int    `json:"gpus,omitempty"`
}

func encodeState(s state) json.RawMessage {
	b, _ := json.Marshal(s) // strings and ints only: cannot fail
	return b
}

// decodeState reads the driver state of a persisted handle (outside input: a file on disk).
func decodeState(h *runner.Handle) (state, error) {
	if h == nil {
		return state{}, errors.New("slurm executor: nil handle")
	}
	if h.Driver != DriverName {
		return state{}, fmt.Errorf("slurm executor: handle for task %q belongs to driver %q", h.Config.ID, h.Driver)
	}
	var s state
	if err := json.Unmarshal(h.DriverState, &s); err != nil {
		return state{}, fmt.Errorf("slurm executor: handle for task %q: bad driver state: %w", h.Config.ID, err)
	}
	if s.JobID == "" || !validJobID(s.JobID) {
		return state{}, fmt.Errorf("slurm executor: handle for task %q has no valid job ID (%q)", h.Config.ID, s.JobID)
	}
	if s.JobDir == "" || !filepath.IsAbs(s.JobDir) {
		return state{}, fmt.Errorf("slurm executor: handle for task %q has no absolute job folder (%q)", h.Config.ID, s.JobDir)
	}
	return s, nil
}

// validJobID accepts what sbatch --parsable prints: digits (a federated cluster's
// "ID;cluster" is cut before this).
func validJobID(id string) bool {
	if id == "" || len(id) > 20 {
		return false
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// jobSpec is what the compute node reads from spec.json: the task and how to contain it.
type jobSpec struct {
	Config    runner.TaskConfig `json:"config"`
	User      string            `json:"user,omitempty"`
	StopGrace float64           `json:"stop_grace_seconds"`
	NoInit    bool              `json:"no_init,omitempty"`
	// Runtime is Options.ContainerRuntime: "podman" points the job at podman's socket.
	Runtime string `json:"runtime,omitempty"`
}

// record is what the compute node writes to record.json once the container has ended: how
// it ended and where it ran. The job's exit status says the same to Slurm's accounting.
type record struct {
	Node         string            `json:"node"`
	JobID        string            `json:"job_id,omitempty"`
	Exit         runner.ExitResult `json:"exit"`
	Limits       string            `json:"limits,omitempty"` // "cgroup2", … as the node's engine applied them
	User         string            `json:"user,omitempty"`
	GPUs         []string          `json:"gpus,omitempty"` // what Slurm granted, as the container got them
	EnergyJoules float64           `json:"energy_joules,omitempty"`
	// Engine is the engine that ran the container ("docker 20.10.24", "podman 4.3.1").
	Engine string `json:"engine,omitempty"`
}

func readRecord(dir string) (*record, error) {
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("slurm executor: %s: %w", filepath.Join(dir, recordFile), err)
	}
	return &r, nil
}

func writeRecord(dir string, r *record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(filepath.Join(dir, recordFile), b, 0o644)
}

// Containment implements runner.ContainmentReporter: a container on the compute node's
// Docker engine with the docker executor's isolation, its limits as that engine applied them
// (the compute node's record; "none" before it wrote one), plus the partition and the node
// the job ran on.
func (e *Executor) Containment(h *runner.Handle) runner.Containment {
	c := runner.Containment{Isolation: attest.IsolationContainer, Limits: "none"}
	s, err := decodeState(h)
	if err != nil {
		return c
	}
	c.Partition = s.Partition
	if rec, err := readRecord(s.JobDir); err == nil {
		c.Node = rec.Node
		if rec.Limits != "" {
			c.Limits = rec.Limits
		}
		c.SeparateUID = separateUID(rec.User)
		c.Engine = rec.Engine
	}
	return c
}

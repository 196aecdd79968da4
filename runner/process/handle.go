package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
)

// DriverName is Handle.Driver for tasks this executor started.
const DriverName = "process"

// state is Handle.DriverState.
type state struct {
	PID int `json:"pid"`
	// StartTicks is field 22 of /proc/PID/stat (start time since boot, in clock ticks): with
	// the PID it names one process for the life of the machine.
	StartTicks uint64 `json:"start_ticks"`
	// StatusPath is where the supervisor shell writes the agent's exit status and where Wait
	// records the final result.
	StatusPath string `json:"status_path"`
	// Cgroups are the cgroup v1 folders created for the task (empty where none were writable).
	Cgroups []string `json:"cgroups,omitempty"`
	// NetworkIsolated: the task runs in a network namespace of its own with only lo (root
	// only); false means it shares the host's network.
	NetworkIsolated bool `json:"network_isolated,omitempty"`
	// Sandbox is the agent task's sandbox folder (sandboxLayout); empty for an evaluator.
	Sandbox string `json:"sandbox,omitempty"`
	// Limits says how the task's resource limits were applied: "cgroup1", "rlimit" or "none".
	Limits string `json:"limits,omitempty"`
	// SeparateUID: the task runs as UID, not as the node's uid; UIDNote says why not when not.
	SeparateUID bool   `json:"separate_uid,omitempty"`
	UID         int    `json:"uid,omitempty"`
	UIDNote     string `json:"uid_note,omitempty"`
}

func encodeState(s state) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// decodeState reads the driver state of a persisted handle (outside input).
func decodeState(h *runner.Handle) (state, error) {
	if h == nil {
		return state{}, errors.New("process executor: nil handle")
	}
	if h.Driver != DriverName {
		return state{}, fmt.Errorf("process executor: handle for task %q belongs to driver %q", h.Config.ID, h.Driver)
	}
	var s state
	if err := json.Unmarshal(h.DriverState, &s); err != nil {
		return state{}, fmt.Errorf("process executor: handle for task %q: bad driver state: %w", h.Config.ID, err)
	}
	if s.PID <= 1 || s.StatusPath == "" {
		return state{}, fmt.Errorf("process executor: handle for task %q: driver state lacks a PID or status path", h.Config.ID)
	}
	return s, nil
}

// procStat is what we need from /proc/PID/stat.
type procStat struct {
	State      byte
	StartTicks uint64
	// Session is field 6: the session ID, which every descendant of the supervisor keeps
	// unless it calls setsid(2) (then only the task's cgroups still hold it).
	Session int
}

// parseStat parses /proc/PID/stat. The command name (field 2) is in parentheses and may
// itself contain spaces and parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("no ')' in stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); start time is field 22, f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("stat has %d fields after the command name, want ≥ 20", len(f))
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("stat start time: %w", err)
	}
	sid, err := strconv.Atoi(f[3])
	if err != nil {
		return procStat{}, fmt.Errorf("stat session: %w", err)
	}
	return procStat{State: f[0][0], StartTicks: st, Session: sid}, nil
}

// parseStatus reads a status file: either the bare exit status the supervisor shell wrote
// (an integer; 128+N when the agent died of signal N) or the JSON ExitResult Wait recorded.
// ok is false for an empty file (the shell is still writing it).
func parseStatus(b []byte) (res *runner.ExitResult, ok bool, err error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, false, nil
	}
	if t[0] == '{' {
		var r runner.ExitResult
		if err := json.Unmarshal(t, &r); err != nil {
			return nil, false, fmt.Errorf("status file: %w", err)
		}
		return &r, true, nil
	}
	code, err := strconv.Atoi(string(t))
	if err != nil || code < 0 || code > 255 {
		return nil, false, fmt.Errorf("status file: %q is not an exit status", t)
	}
	r := &runner.ExitResult{ExitCode: code}
	if code > 128 && code < 128+65 {
		r.Signal = code - 128
	}
	return r, true, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// NetworkIsolated reports whether the task of h runs in a network namespace of its own (only
// lo), so a caller can attest what was enforced. False for a bad handle.
func NetworkIsolated(h *runner.Handle) bool {
	s, err := decodeState(h)
	return err == nil && s.NetworkIsolated
}

// Containment implements runner.ContainmentReporter: a host process (never a container),
// the limits as applied, and whether it ran under a uid of its own.
func (e *Executor) Containment(h *runner.Handle) runner.Containment {
	s, err := decodeState(h)
	if err != nil {
		return runner.Containment{Isolation: attest.IsolationProcess, Limits: "none"}
	}
	limits := s.Limits
	if limits == "" { // a handle of an older evalmesh
		limits = limitsApplied(s.Cgroups, false)
	}
	return runner.Containment{Isolation: attest.IsolationProcess, Limits: limits, SeparateUID: s.SeparateUID, Note: s.UIDNote}
}

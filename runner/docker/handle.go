package docker

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
)

// DriverName is Handle.Driver for tasks this executor started.
const DriverName = "docker"

// state is Handle.DriverState: enough to find the container again after a restart.
type state struct {
	ContainerID string `json:"container_id"`
	Name        string `json:"name"`
	// Limits ("cgroup1", "cgroup2", "none") and User (uid:gid) are what the task ran under,
	// for the attestation; empty in handles of an older evalmesh.
	Limits string `json:"limits,omitempty"`
	User   string `json:"user,omitempty"`
	// Engine is the engine that ran the task ("docker 24.0.7", "podman 4.3.1").
	Engine string `json:"engine,omitempty"`
}

func encodeState(s state) json.RawMessage {
	b, _ := json.Marshal(s) // strings only: cannot fail
	return b
}

// decodeState reads the driver state of a persisted handle (outside input: a file on disk).
func decodeState(h *runner.Handle) (state, error) {
	if h == nil {
		return state{}, fmt.Errorf("docker executor: nil handle")
	}
	if h.Driver != DriverName {
		return state{}, fmt.Errorf("docker executor: handle for task %q belongs to driver %q", h.Config.ID, h.Driver)
	}
	var s state
	if err := json.Unmarshal(h.DriverState, &s); err != nil {
		return state{}, fmt.Errorf("docker executor: handle for task %q: bad driver state: %w", h.Config.ID, err)
	}
	if s.ContainerID == "" {
		return state{}, fmt.Errorf("docker executor: handle for task %q has no container ID", h.Config.ID)
	}
	return s, nil
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// Containment implements runner.ContainmentReporter: a container, with its limits applied
// by the engine's cgroups, under the task's user (a uid of its own unless it is root).
func (e *Executor) Containment(h *runner.Handle) runner.Containment {
	c := runner.Containment{Isolation: attest.IsolationContainer, Limits: "none"}
	s, err := decodeState(h)
	if err != nil {
		return c
	}
	if s.Limits != "" {
		c.Limits = s.Limits
	}
	c.Engine = s.Engine
	user := s.User
	if user == "" {
		user = e.user
	}
	if uid, _, ok := parseUser(user); ok && uid != 0 && uid != os.Geteuid() {
		c.SeparateUID = true
	}
	return c
}

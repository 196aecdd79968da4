package docker

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/evalmesh/evalmesh/runner"
)

// DriverName is Handle.Driver for tasks this executor started.
const DriverName = "docker"

// state is Handle.DriverState: enough to find the container again after a restart.
type state struct {
	ContainerID string `json:"container_id"`
	Name        string `json:"name"`
}

func encodeState(s state) json.RawMessage {
	b, _ := json.Marshal(s) // two strings: cannot fail
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

package agentspec

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/ipfs/go-cid"
)

// Environment the runner gives the agent when its spec names a model; Validate refuses a
// spec that sets the first two itself, since the runner would overwrite them.
const (
	EnvOpenAIBaseURL = "OPENAI_BASE_URL" // http://127.0.0.1:PORT/v1
	EnvModelName     = "EVALMESH_MODEL"  // the model name to put in requests
	EnvOpenAIModel   = "OPENAI_MODEL"    // the same, under the name several scaffolds read
	EnvOpenAIAPIKey  = "OPENAI_API_KEY"  // a placeholder: clients refuse to start without one
)

// Model is the model part of an agent spec: a server the runner starts beside the agent,
// on loopback only (docs/agents.md).
type Model struct {
	// Name is the model name the server answers to (the "model" of a chat completion).
	Name string `json:"name" yaml:"name"`
	// Image is the model server's image ID (sha256:…).
	Image string `json:"image" yaml:"image"`
	// Command is the server's argv, e.g. ["vllm", "serve", "/weights/gpt-oss-120b", "--port", "8000"].
	Command []string          `json:"command" yaml:"command"`
	Env     map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// GPUs is the model's share of the run's GPUs (the first ones); the agent gets the rest.
	GPUs int `json:"gpus,omitempty" yaml:"gpus,omitempty"`
	// Port is the TCP port the server listens on inside the pod (loopback).
	Port int `json:"port" yaml:"port"`
	// ReadyPath is the HTTP path that answers 2xx once the model is loaded (e.g. /health).
	ReadyPath string `json:"ready_path" yaml:"ready_path"`
	// Probe is the argv, inside the model's image, that checks readiness: the runner appends
	// http://127.0.0.1:PORT/READY_PATH and runs it in the model's container; exit 0 = ready.
	// E.g. ["curl", "-fsS"] for an image with curl; the stand-in model has ["/model", "probe"].
	Probe []string `json:"probe" yaml:"probe"`
	// ReadyTimeoutSeconds bounds the wait (0: the runner's default, runner.DefaultModelReadySeconds); it counts against
	// the run's wall clock.
	ReadyTimeoutSeconds int `json:"ready_timeout_seconds,omitempty" yaml:"ready_timeout_seconds,omitempty"`
	// Weights are read-only folders the lab provides, by the name its config gives them.
	Weights []WeightRef `json:"weights,omitempty" yaml:"weights,omitempty"`
}

// WeightRef names a weight folder of the lab's config and the digest it must have.
type WeightRef struct {
	// Name is the folder's name in the lab's config (runner.models.weights).
	Name string `json:"name" yaml:"name"`
	// Digest is the folder's CID as `ipfs add -r -Q --cid-version=1 --only-hash DIR` prints it
	// (runner.WeightsDigest); a folder with another digest is refused.
	Digest string `json:"digest" yaml:"digest"`
	// Mount is where the model sees it, read-only; "" means /weights/NAME.
	Mount string `json:"mount,omitempty" yaml:"mount,omitempty"`
}

// MountPath is where the weights appear inside the model's container.
func (w WeightRef) MountPath() string {
	if w.Mount != "" {
		return w.Mount
	}
	return "/weights/" + w.Name
}

var weightNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks a model spec on its own; the lab's policy is the runner's
// (runner.CheckAgentPolicy), since only a lab knows which images and weights it serves.
func (m *Model) Validate() error {
	switch {
	case m.Name == "":
		return errors.New("model: name is required (the model name its server answers to)")
	case !digestRE.MatchString(m.Image):
		return fmt.Errorf("model: image %q must be an image ID sha256:<64 hex> (docker inspect --format '{{.Id}}' IMAGE)", m.Image)
	case len(m.Command) == 0 || m.Command[0] == "":
		return errors.New("model: command is required (the server's argv)")
	case m.Port < 1 || m.Port > 65535:
		return fmt.Errorf("model: port %d must be 1-65535 (the port the server listens on)", m.Port)
	case !strings.HasPrefix(m.ReadyPath, "/"):
		return fmt.Errorf("model: ready_path %q must start with / (e.g. /health or /v1/models)", m.ReadyPath)
	case len(m.Probe) == 0 || m.Probe[0] == "":
		return errors.New(`model: probe is required: the argv inside the model's image that checks readiness, the URL appended (e.g. ["curl", "-fsS"])`)
	case m.GPUs < 0 || m.ReadyTimeoutSeconds < 0:
		return errors.New("model: gpus and ready_timeout_seconds must not be negative")
	}
	for k := range m.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.HasPrefix(k, "EVALMESH_") {
			return fmt.Errorf("model: env name %q is not allowed", k)
		}
	}
	seen := map[string]bool{}
	for _, w := range m.Weights {
		if !weightNameRE.MatchString(w.Name) {
			return fmt.Errorf("model: weights name %q must be 1-64 letters, digits, '.', '_' or '-'", w.Name)
		}
		if _, err := cid.Decode(w.Digest); err != nil {
			return fmt.Errorf("model: weights %s: digest %q is not a CID (ipfs add -r -Q --cid-version=1 --only-hash DIR): %v", w.Name, w.Digest, err)
		}
		mp := w.MountPath()
		if !path.IsAbs(mp) || path.Clean(mp) != mp || mp == "/" {
			return fmt.Errorf("model: weights %s: mount %q must be a clean absolute path", w.Name, mp)
		}
		if seen[mp] {
			return fmt.Errorf("model: two weight folders mount at %s", mp)
		}
		seen[mp] = true
	}
	return nil
}

// BaseURL is what the agent gets as OPENAI_BASE_URL.
func (m *Model) BaseURL() string { return fmt.Sprintf("http://127.0.0.1:%d/v1", m.Port) }

// ReadyURL is what the probe is given.
func (m *Model) ReadyURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", m.Port, m.ReadyPath)
}

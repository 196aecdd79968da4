// Package agentspec owns the agent spec (docs/agent-spec.md): what an agent is made of (image,
// command, env, resources, an optional model served beside it), how a spec file is parsed and
// checked, and its identity, the CID of its canonical JSON. It is a wire object: campaigns
// carry specs and the ledger names agents by their CID, so protocol reads it as much as the
// runner does. It therefore lives apart from the runner and imports no executor, no GPU or
// network library and no other evalmesh package: a protocol validator must be able to check
// a campaign's agents without linking Docker, NVML or a blockstore.
//
// Values only, no state: a Spec is not changed by any function here (Canonical copies it), so
// specs and the package's functions are safe for concurrent use as long as callers do not
// mutate a Spec they share.
package agentspec

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
	"go.yaml.in/yaml/v3"
)

// Spec describes an agent (docs/design.md §4; docs/agent-spec.md). Its identity is the CID
// of its canonical JSON (Spec.CID), so two labs holding the same spec name the same agent.
type Spec struct {
	Name    string `json:"name" yaml:"name"`
	Version string `json:"version" yaml:"version"`
	// Image is the OCI image ID (sha256:…) the docker executor runs; required for docker.
	Image string `json:"image,omitempty" yaml:"image,omitempty"`
	// ImageCID is the CID of a `docker save` tar of the image in IPFS, for labs without a
	// registry; ImageTar a local path to such a tar (relative to the spec file), not part of
	// the identity.
	ImageCID string `json:"image_cid,omitempty" yaml:"image_cid,omitempty"`
	ImageTar string `json:"-" yaml:"image_tar,omitempty"`
	// Command is the argv. For the process executor, a first word "evalmesh" means this
	// evalmesh binary (so the built-in example agents need no build step).
	Command []string          `json:"command" yaml:"command"`
	Env     map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// Network is "none" (the default) or "bridge"; a network is given only if the lab's
	// policy (runner.allow_network) also allows it.
	Network   string    `json:"network,omitempty" yaml:"network,omitempty"`
	Resources Resources `json:"resources,omitzero" yaml:"resources,omitempty"`
	// Model, if set, is served beside the agent in a container of its own; the agent reaches
	// it at http://127.0.0.1:PORT/v1 and nothing else (docs/agents.md; the runner serves it).
	Model *Model `json:"model,omitempty" yaml:"model,omitempty"`
	// Deterministic declares that the agent, given the same bundle, seed and GPU model,
	// writes the same submission byte for byte: audits of it then compare submissions
	// exactly (a mismatch confirmed by a majority of auditors is proof); audits of other
	// agents are judged statistically (docs/scoring.md "Audits"). Absent (false) from the
	// canonical JSON unless set, so existing agents keep their CIDs.
	Deterministic bool `json:"deterministic,omitempty" yaml:"deterministic,omitempty"`
}

// Resources are what the agent asks for; the task's limits cap them.
type Resources struct {
	GPUs        int   `json:"gpus,omitempty" yaml:"gpus,omitempty"`
	CPUs        int   `json:"cpus,omitempty" yaml:"cpus,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty" yaml:"memory_bytes,omitempty"`
}

// maxSize bounds a spec before YAML sees it (alias expansion is the risk).
const maxSize = 64 << 10

var (
	digestRE    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	agentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Parse reads a spec from YAML or JSON (JSON is YAML) and validates it. Unknown
// fields are errors naming the field, so a typo is not silently dropped from the identity.
func Parse(data []byte) (*Spec, error) {
	if len(data) > maxSize {
		return nil, fmt.Errorf("agent spec is %d bytes, over the %d-byte limit: a spec names an image and a command, nothing bulky", len(data), maxSize)
	}
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("agent spec is empty: it needs at least name, version and command")
		}
		return nil, fmt.Errorf("agent spec: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Load reads and validates the spec at path; ImageTar is made absolute.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent spec: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.ImageTar != "" && !filepath.IsAbs(s.ImageTar) {
		s.ImageTar = filepath.Join(filepath.Dir(path), s.ImageTar)
	}
	return s, nil
}

// Validate checks the fields every executor relies on.
func (s *Spec) Validate() error {
	switch {
	case !agentNameRE.MatchString(s.Name):
		return fmt.Errorf("agent spec: name %q must be 1-64 letters, digits, '.', '_' or '-'", s.Name)
	case s.Version == "":
		return fmt.Errorf("agent spec %s: version is required (e.g. \"1.0.0\")", s.Name)
	case len(s.Command) == 0 || s.Command[0] == "":
		return fmt.Errorf("agent spec %s: command is required (the argv, e.g. [\"/agent\"])", s.Name)
	case s.Image != "" && !digestRE.MatchString(s.Image):
		return fmt.Errorf("agent spec %s: image %q must be an image ID sha256:<64 hex> (see `docker inspect --format '{{.Id}}' IMAGE`)", s.Name, s.Image)
	case s.ImageCID != "":
		if _, err := cid.Decode(s.ImageCID); err != nil {
			return fmt.Errorf("agent spec %s: image_cid %q: %v", s.Name, s.ImageCID, err)
		}
	}
	switch s.Network {
	case "", "none", "bridge":
	default:
		return fmt.Errorf("agent spec %s: network %q must be \"none\" or \"bridge\"", s.Name, s.Network)
	}
	if s.Resources.GPUs < 0 || s.Resources.CPUs < 0 || s.Resources.MemoryBytes < 0 {
		return fmt.Errorf("agent spec %s: resources must not be negative", s.Name)
	}
	if s.Model != nil {
		if s.Network == "bridge" {
			return fmt.Errorf("agent spec %s: network: bridge and a model exclude each other: an agent with a model lives in its model's network namespace (loopback only)", s.Name)
		}
		if err := s.Model.Validate(); err != nil {
			return fmt.Errorf("agent spec %s: %w", s.Name, err)
		}
		for k := range s.Env {
			if k == EnvOpenAIBaseURL || k == EnvModelName {
				return fmt.Errorf("agent spec %s: env name %q is set by the runner when the spec names a model", s.Name, k)
			}
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.HasPrefix(k, "EVALMESH_") {
			return fmt.Errorf("agent spec %s: env name %q is not allowed (EVALMESH_* are set by the runner)", s.Name, k)
		}
	}
	return nil
}

// WantsNetwork reports whether the spec asks for a network.
func (s *Spec) WantsNetwork() bool { return s.Network == "bridge" }

// Canonical is the spec's canonical JSON: keys sorted (the struct declares them in the
// order encoding/json emits, and maps are sorted), no insignificant space, "network"
// defaulted to "none", no trailing newline.
func (s *Spec) Canonical() []byte {
	c := *s
	if c.Network == "" {
		c.Network = "none"
	}
	// Field order above is not alphabetical; marshal through a sorted map to be canonical.
	raw, err := json.Marshal(c)
	if err != nil {
		panic(err) // only strings, ints and maps of strings
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out, _ := json.Marshal(m) // encoding/json sorts map keys
	return out
}

// CID is the agent's identity: CIDv1, raw codec, sha2-256 of Canonical() — what
// `ipfs add --cid-version=1 --raw-leaves` gives for the file holding those bytes.
func (s *Spec) CID() string { return RawCID(s.Canonical()) }

// RawCID is the CIDv1 (raw codec, sha2-256) of data; for files up to one 256 KiB chunk it
// equals `ipfs add --cid-version=1 --raw-leaves`.
func RawCID(data []byte) string {
	h := sha256.Sum256(data)
	mh, _ := multihash.Encode(h[:], multihash.SHA2_256)
	return cid.NewCidV1(cid.Raw, mh).String()
}

package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/evalmesh/evalmesh/runner"
)

// Labels every evalmesh container carries, so a node can find its own containers after a
// restart and an operator can tell them apart with `docker ps --filter label=…`.
const (
	LabelTaskID  = "evalmesh.task-id"
	LabelManaged = "evalmesh.managed"
	LabelDriver  = "evalmesh.driver-version"

	driverVersion = "1"
)

// DefaultUser is the uid:gid agents run as ("nobody"); an image needs no /etc/passwd for a
// numeric user.
const DefaultUser = "65534:65534"

// DefaultTmpfsBytes bounds the writable /tmp of a container.
const DefaultTmpfsBytes = 64 << 20

// ContainerName is the container name for a task ID: "evalmesh-" plus the ID, with characters
// Docker does not accept replaced and a short hash appended when anything was replaced, so
// distinct IDs never share a name.
func ContainerName(taskID string) string {
	var b strings.Builder
	changed := false
	for i, r := range taskID {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			(i > 0 && (r == '_' || r == '.' || r == '-'))
		if ok {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			changed = true
		}
	}
	name := "evalmesh-" + b.String()
	if changed || len(name) > 200 {
		sum := sha256.Sum256([]byte(taskID))
		if len(name) > 200 {
			name = name[:200]
		}
		name += "-" + hex.EncodeToString(sum[:4])
	}
	return name
}

// containerSpec builds the container and host configuration for a task. It is pure so the
// isolation settings (including GPU device requests, which cannot be exercised without a
// GPU) are unit-tested.
func containerSpec(cfg runner.TaskConfig, user string, tmpfsBytes int64, init bool) (*container.Config, *container.HostConfig, error) {
	env := map[string]string{}
	for k, v := range cfg.Env {
		env[k] = v
	}
	var mounts []mount.Mount
	bind := func(src, dst string, ro bool) error {
		abs, err := filepath.Abs(src)
		if err != nil {
			return fmt.Errorf("task %s: mount %s: %w", cfg.ID, src, err)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: abs, Target: dst, ReadOnly: ro})
		return nil
	}
	if cfg.PublicDir != "" {
		if err := bind(cfg.PublicDir, runner.AgentPublicDir, true); err != nil {
			return nil, nil, err
		}
		env[runner.EnvPublic] = runner.AgentPublicDir
	}
	if cfg.WorkspaceDir != "" {
		if err := bind(cfg.WorkspaceDir, runner.AgentWorkspaceDir, false); err != nil {
			return nil, nil, err
		}
		env[runner.EnvWorkspace] = runner.AgentWorkspaceDir
	}
	if cfg.OutputDir != "" {
		if err := bind(cfg.OutputDir, runner.AgentOutputDir, false); err != nil {
			return nil, nil, err
		}
		env[runner.EnvOutput] = runner.AgentOutputDir
	}
	if cfg.PromptPath != "" {
		if err := bind(cfg.PromptPath, runner.AgentPromptPath, true); err != nil {
			return nil, nil, err
		}
		env[runner.EnvPrompt] = runner.AgentPromptPath
	}
	if cfg.MetaPath != "" {
		if err := bind(cfg.MetaPath, runner.AgentMetaPath, true); err != nil {
			return nil, nil, err
		}
		env[runner.EnvTaskMeta] = runner.AgentMetaPath
	}
	for _, m := range cfg.ExtraMounts {
		if !filepath.IsAbs(m.Target) {
			return nil, nil, fmt.Errorf("task %s: extra mount target %q must be an absolute path", cfg.ID, m.Target)
		}
		if err := bind(m.Source, m.Target, true); err != nil {
			return nil, nil, err
		}
	}
	if len(cfg.GPUs) > 0 {
		env[runner.EnvGPUs] = strings.Join(cfg.GPUs, ",")
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	envList := make([]string, 0, len(keys))
	for _, k := range keys {
		envList = append(envList, k+"="+env[k])
	}

	cc := &container.Config{
		Image:      cfg.Image,
		Env:        envList,
		User:       user,
		WorkingDir: "",
		Labels: map[string]string{
			LabelTaskID:  cfg.ID,
			LabelManaged: "true",
			LabelDriver:  driverVersion,
		},
	}
	if len(cfg.Command) > 0 {
		// The command is the whole argv: its first word replaces the image's ENTRYPOINT.
		// (An empty Entrypoint would do for Docker, but podman's compatible API reads [] as
		// unset and prepends the image's: /agent /agent exit 0.)
		cc.Entrypoint = []string{cfg.Command[0]}
		cc.Cmd = append([]string{}, cfg.Command[1:]...)
	}
	if cfg.WorkspaceDir != "" {
		cc.WorkingDir = runner.AgentWorkspaceDir
	}

	network := container.NetworkMode("none")
	switch {
	case cfg.JoinNetworkOf != "":
		// The pod's shared loopback: the task sees the other task's interfaces (loopback
		// only, for a model started with network none) and no others.
		network = container.NetworkMode("container:" + ContainerName(cfg.JoinNetworkOf))
	case cfg.Network:
		network = "bridge"
	}
	hc := &container.HostConfig{
		NetworkMode:    network,
		Mounts:         mounts,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		IpcMode:        "private",
		Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%d", tmpfsBytes)},
		// The engine keeps at most 2 × 32 MiB of a task's output (the oldest rotates
		// away): an agent printing for 24 hours cannot fill the node's disk.
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "32m", "max-file": "2"}},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	if init {
		// A real PID 1 (the engine's docker-init): signals reach the agent with their default
		// action, so a stopped agent reports the signal, and orphans are reaped.
		hc.Init = &init
	}
	if l := cfg.Limits; l.MemoryBytes > 0 {
		hc.Memory = l.MemoryBytes
		hc.MemorySwap = l.MemoryBytes // no swap: the limit is the limit
	}
	if cfg.Limits.NanoCPUs > 0 {
		hc.NanoCPUs = cfg.Limits.NanoCPUs
	}
	if cfg.Limits.PIDs > 0 {
		p := cfg.Limits.PIDs
		hc.PidsLimit = &p
	}
	if len(cfg.GPUs) > 0 {
		hc.DeviceRequests = []container.DeviceRequest{{
			Driver:       "nvidia",
			DeviceIDs:    append([]string(nil), cfg.GPUs...),
			Capabilities: [][]string{{"gpu"}},
		}}
	}
	return cc, hc, nil
}

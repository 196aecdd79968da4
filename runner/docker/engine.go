package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// EngineInfo is what the engine says about itself that decides how well it isolates a
// task: the cgroup version its limits go through and its security options.
type EngineInfo struct {
	// Name is the engine behind the Docker API: EngineDocker or EnginePodman.
	Name string `json:"name"`
	// Host is the engine's address as the client dials it (DOCKER_HOST, or the default socket).
	Host    string `json:"host"`
	Version string `json:"version"`
	// CgroupVersion is "1" or "2", "" when the engine does not say (limits then read "none").
	CgroupVersion string `json:"cgroup_version"`
	CgroupDriver  string `json:"cgroup_driver"`
	// Seccomp is the default seccomp profile's name ("default", "builtin", a path), "" when
	// the engine has no seccomp.
	Seccomp string `json:"seccomp"`
	// UserNS: the engine remaps container users into a user namespace (userns-remap).
	UserNS bool `json:"userns"`
	// Rootless: the engine itself runs as an unprivileged user.
	Rootless bool `json:"rootless"`
	// SecurityOptions are the engine's raw security options (name=…,…).
	SecurityOptions []string `json:"security_options"`
}

// Engines that serve the Docker API, as EngineInfo.Name and the attestation's executor.engine
// name them.
const (
	EngineDocker = "docker"
	// EnginePodman is podman's Docker-compatible API (podman system service).
	EnginePodman = "podman"
)

// Limits says how the engine applies a container's memory, CPU and pids limits, as the run
// attestation records it: "cgroup1" or "cgroup2", or "none" when the engine does not say
// its cgroup version or cannot enforce limits at all: a rootless engine on cgroup v1 (an
// unprivileged user cannot be delegated v1 controllers; podman then ignores the limits
// with a warning, and a run so started must not claim them).
func (i EngineInfo) Limits() string {
	switch {
	case i.CgroupVersion == "1" && i.Rootless:
		return "none"
	case i.CgroupVersion == "1" || i.CgroupVersion == "2":
		return "cgroup" + i.CgroupVersion
	}
	return "none"
}

// Engine asks the engine cli talks to (nil: DOCKER_HOST etc., as New does) whether it answers
// and how it isolates containers. It never starts a container. An error names the engine's
// address and says what to do.
func Engine(ctx context.Context, cli *client.Client) (EngineInfo, error) {
	if cli == nil {
		var err error
		cli, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return EngineInfo{}, fmt.Errorf("docker client: %w (check DOCKER_HOST)", err)
		}
		defer cli.Close()
	}
	out := EngineInfo{Host: cli.DaemonHost()}
	// Each call has its own 10 s: podman answers /info and /version in a second or more
	// each when idle, several under load, and one budget for all three once ran out
	// before /version, naming podman "docker" in the attestation.
	call := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return f(ctx)
	}
	if err := call(func(ctx context.Context) error { _, err := cli.Ping(ctx); return err }); err != nil {
		return out, fmt.Errorf("no Docker engine answers at %s: %w (start dockerd, or set DOCKER_HOST to the engine's socket)", out.Host, err)
	}
	_ = call(func(ctx context.Context) error { cli.NegotiateAPIVersion(ctx); return nil })
	var info system.Info
	if err := call(func(ctx context.Context) (err error) { info, err = cli.Info(ctx); return err }); err != nil {
		return out, fmt.Errorf("the Docker engine at %s answers a ping but not /info: %w", out.Host, err)
	}
	out.Name, out.Version, out.CgroupVersion, out.CgroupDriver = EngineDocker, info.ServerVersion, info.CgroupVersion, info.CgroupDriver
	// Podman's compatible /version lists a "Podman Engine" component; Docker's an "Engine".
	// Without /version the engine is unknown: an error, not a guess the attestation records.
	var v types.Version
	if err := call(func(ctx context.Context) (err error) { v, err = cli.ServerVersion(ctx); return err }); err != nil {
		return out, fmt.Errorf("the Docker engine at %s answers /info but not /version, which names the engine: %w", out.Host, err)
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			out.Name, out.Version = EnginePodman, c.Version
		}
	}
	out.SecurityOptions = info.SecurityOptions
	opts, err := system.DecodeSecurityOptions(info.SecurityOptions)
	if err != nil {
		return out, fmt.Errorf("the Docker engine at %s: security options %q: %w", out.Host, info.SecurityOptions, err)
	}
	for _, o := range opts {
		switch o.Name {
		case "seccomp":
			out.Seccomp = "default"
			for _, kv := range o.Options {
				if kv.Key == "profile" && kv.Value != "" {
					out.Seccomp = kv.Value
				}
			}
		case "userns":
			out.UserNS = true
		case "rootless":
			out.Rootless = true
		}
	}
	return out, nil
}

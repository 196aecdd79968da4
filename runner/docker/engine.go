package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// EngineInfo is what the engine says about itself that decides how well it isolates a
// task: the cgroup version its limits go through and its security options.
type EngineInfo struct {
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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return out, fmt.Errorf("no Docker engine answers at %s: %w (start dockerd, or set DOCKER_HOST to the engine's socket)", out.Host, err)
	}
	cli.NegotiateAPIVersion(ctx)
	info, err := cli.Info(ctx)
	if err != nil {
		return out, fmt.Errorf("the Docker engine at %s answers a ping but not /info: %w", out.Host, err)
	}
	out.Version, out.CgroupVersion, out.CgroupDriver = info.ServerVersion, info.CgroupVersion, info.CgroupDriver
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

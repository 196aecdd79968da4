package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	errdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/evalmesh/evalmesh/runner"
)

// Options configure an Executor. The zero value is usable.
type Options struct {
	// Client talks to the engine; nil means client.FromEnv with API version negotiation
	// (the engine may be older than this client).
	Client *client.Client
	// User is the uid:gid tasks run as; "" means DefaultUser. Workspace and output folders
	// are handed to this user before the task starts.
	User string
	// TmpfsBytes sizes /tmp; 0 means DefaultTmpfsBytes.
	TmpfsBytes int64
	// StopGrace is how long a task gets between SIGTERM and SIGKILL when Wait stops it at its
	// deadline; 0 means 10 s.
	StopGrace time.Duration
	// Now is the clock (tests inject one); nil means time.Now.
	Now func() time.Time
	// NoInit runs the agent itself as PID 1 instead of under the engine's docker-init (for
	// engines installed without it). PID 1 ignores SIGTERM unless it handles it.
	NoInit bool
}

// Executor runs tasks as Docker containers. Safe for concurrent use.
type Executor struct {
	cli   *client.Client
	user  string
	tmpfs int64
	grace time.Duration
	now   func() time.Time
	init  bool
	// limits is how the engine applies a container's limits: "cgroup1" or "cgroup2" (its
	// CgroupVersion), "none" when it does not say or cannot enforce them (rootless on
	// cgroup v1).
	limits string
	// engine names the engine and its version ("docker 24.0.7", "podman 4.3.1") for the
	// attestation; podman is true for podman's Docker-compatible API.
	engine string
	podman bool
}

var _ runner.Executor = (*Executor)(nil)

// New connects to the engine (DOCKER_HOST etc. when opts.Client is nil) and checks that it
// answers, so a node without Docker learns it at startup rather than at its first run.
func New(opts Options) (*Executor, error) {
	cli := opts.Client
	if cli == nil {
		var err error
		cli, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("docker executor: %w (set DOCKER_HOST or use --executor process)", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("docker executor: no Docker engine answers at %s: %w (start dockerd, set DOCKER_HOST, or use --executor process)", cli.DaemonHost(), err)
	}
	cli.NegotiateAPIVersion(ctx)
	e := &Executor{cli: cli, user: opts.User, tmpfs: opts.TmpfsBytes, grace: opts.StopGrace, now: opts.Now, init: !opts.NoInit, limits: "none"}
	if info, err := Engine(ctx, cli); err == nil {
		e.limits = info.Limits()
		e.engine = info.Name + " " + info.Version
		e.podman = info.Name == EnginePodman
	}
	if e.user == "" {
		e.user = DefaultUser
	}
	if e.tmpfs <= 0 {
		e.tmpfs = DefaultTmpfsBytes
	}
	if e.grace <= 0 {
		e.grace = 10 * time.Second
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e, nil
}

// Client exposes the engine client (for image builds in tests and tools).
func (e *Executor) Client() *client.Client { return e.cli }

// Name implements runner.Executor.
func (e *Executor) Name() string { return DriverName }

// ResolveImage returns the local image ID (sha256:…) of ref, a reference or digest. It never
// pulls: a missing image is an error that says how to provide it.
func (e *Executor) ResolveImage(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return "", errors.New("docker executor: empty image reference")
	}
	info, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", fmt.Errorf("docker executor: image %q is not in the local engine and evalmesh never pulls; load it first (docker load -i IMAGE.tar, the agent spec's image_tar, or evalmesh agent pull SPEC.yaml when the spec has image_cid)", ref)
		}
		return "", fmt.Errorf("docker executor: inspect image %q: %w", ref, err)
	}
	return info.ID, nil
}

// LoadImage loads a `docker save` tar into the engine and returns the loaded image's ID.
func (e *Executor) LoadImage(ctx context.Context, tarPath string) (string, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return "", fmt.Errorf("docker executor: load image: %w", err)
	}
	defer f.Close()
	resp, err := e.cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return "", fmt.Errorf("docker executor: load image %s: %w", tarPath, err)
	}
	defer resp.Body.Close()
	id, ref, err := parseLoadOutput(resp.Body)
	if err != nil {
		return "", fmt.Errorf("docker executor: load image %s: %w", tarPath, err)
	}
	if id != "" {
		return id, nil
	}
	return e.ResolveImage(ctx, ref)
}

// parseLoadOutput reads the engine's JSON message stream from an image load and returns the
// loaded image ID or, for a tagged image, its reference.
func parseLoadOutput(r io.Reader) (id, ref string, err error) {
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return "", "", fmt.Errorf("unreadable engine reply: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return "", "", errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return "", "", errors.New(m.Error)
		}
		for _, line := range strings.Split(m.Stream, "\n") {
			line = strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(line, "Loaded image ID: "); ok && id == "" {
				id = v
			} else if v, ok := strings.CutPrefix(line, "Loaded image: "); ok && ref == "" {
				ref = v
			}
		}
	}
	if id == "" && ref == "" {
		return "", "", errors.New("the engine did not say which image it loaded (is the file a `docker save` tar?)")
	}
	return id, ref, nil
}

// Start implements runner.Executor: it creates and starts the task's container.
func (e *Executor) Start(ctx context.Context, cfg runner.TaskConfig) (h *runner.Handle, err error) {
	if cfg.ID == "" {
		return nil, errors.New("docker executor: task config has no ID")
	}
	if cfg.LogPath == "" {
		return nil, fmt.Errorf("docker executor: task %s has no log path", cfg.ID)
	}
	if _, err := e.ResolveImage(ctx, cfg.Image); err != nil {
		return nil, fmt.Errorf("task %s: %w", cfg.ID, err)
	}
	if err := os.MkdirAll(filepath.Dir(cfg.LogPath), 0o755); err != nil {
		return nil, fmt.Errorf("docker executor: task %s: log folder: %w", cfg.ID, err)
	}
	for _, dir := range []string{cfg.WorkspaceDir, cfg.OutputDir} {
		if dir == "" {
			continue
		}
		if err := e.handOver(dir); err != nil {
			return nil, fmt.Errorf("docker executor: task %s: %w", cfg.ID, err)
		}
	}
	bound := cfg
	if bound.OutputDir, err = e.stageOutput(cfg); err != nil {
		return nil, fmt.Errorf("docker executor: task %s: %w", cfg.ID, err)
	}
	if bound.OutputDir != cfg.OutputDir {
		defer func() {
			if err != nil {
				_ = runner.UnmountOutputLimit(bound.OutputDir)
			}
		}()
	}
	cc, hc, err := containerSpec(bound, e.user, e.tmpfs, e.init)
	if err != nil {
		return nil, err
	}
	name := ContainerName(cfg.ID)
	started := e.now()
	created, err := e.cli.ContainerCreate(ctx, cc, hc, nil, nil, name)
	if err != nil {
		if errdefs.IsConflict(err) {
			return nil, fmt.Errorf("docker executor: task %s: container %s already exists: Recover its saved handle, or Destroy it first: %w", cfg.ID, name, err)
		}
		return nil, fmt.Errorf("docker executor: task %s: create container: %w", cfg.ID, err)
	}
	if err := e.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = e.cli.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true})
		if strings.Contains(err.Error(), "error setting rlimit") {
			// Rootful podman gives containers RLIMIT_NOFILE 1048576 and RLIMIT_NPROC beyond,
			// which root without CAP_SYS_RESOURCE (a host that is itself a container) cannot.
			return nil, fmt.Errorf("docker executor: task %s: start container: %w (the engine gives containers more open files or processes than this host's hard limits allow: for podman set default_ulimits in /etc/containers/containers.conf to the host's `ulimit -Hn` and `ulimit -Hu`, see docs/operating.md)", cfg.ID, err)
		}
		return nil, fmt.Errorf("docker executor: task %s: start container: %w", cfg.ID, err)
	}
	h = &runner.Handle{
		Driver:      DriverName,
		Config:      cfg,
		Started:     started,
		DriverState: encodeState(state{ContainerID: created.ID, Name: name, Limits: e.limits, User: e.user, Engine: e.engine}),
	}
	if cfg.Limits.WallClock > 0 {
		h.Deadline = started.Add(cfg.Limits.WallClock)
	}
	return h, nil
}

// handOver creates dir and makes it writable by the task's user: chown when the node runs as
// root, otherwise world-writable (the folder is the run's own, created for it).
func (e *Executor) handOver(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	uid, gid, ok := parseUser(e.user)
	if ok && os.Geteuid() == 0 {
		return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
	}
	return os.Chmod(dir, 0o777)
}

func parseUser(u string) (uid, gid int, ok bool) {
	a, b, found := strings.Cut(u, ":")
	uid, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, false
	}
	gid = uid
	if found {
		if gid, err = strconv.Atoi(b); err != nil {
			return 0, 0, false
		}
	}
	return uid, gid, true
}

// Stop implements runner.Executor: SIGTERM, then SIGKILL after grace. Stopping a task that
// already ended is not an error; stopping one whose container is gone returns ErrTaskLost.
func (e *Executor) Stop(ctx context.Context, h *runner.Handle, grace time.Duration) error {
	s, err := decodeState(h)
	if err != nil {
		return err
	}
	secs := int((grace + time.Second - 1) / time.Second)
	if err := e.cli.ContainerStop(ctx, s.ContainerID, container.StopOptions{Timeout: &secs}); err != nil {
		if errdefs.IsNotFound(err) {
			return fmt.Errorf("task %s: %w", h.Config.ID, runner.ErrTaskLost)
		}
		return fmt.Errorf("docker executor: task %s: stop: %w", h.Config.ID, err)
	}
	return nil
}

// Destroy implements runner.Executor: it removes the container (idempotent).
func (e *Executor) Destroy(ctx context.Context, h *runner.Handle) error {
	// The container is named after the task, so a node that died between ContainerCreate and
	// persisting the handle's driver state can still remove it by name.
	if h == nil || h.Driver != DriverName {
		_, err := decodeState(h)
		return err
	}
	ref := ContainerName(h.Config.ID)
	if s, err := decodeState(h); err == nil {
		ref = s.ContainerID
	}
	err := e.cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true})
	if err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("docker executor: task %s: remove container: %w", h.Config.ID, err)
	}
	// The container is gone: nothing writes to its output any more.
	if err := e.collectOutput(h.Config); err != nil {
		return fmt.Errorf("docker executor: task %s: collect the output: %w", h.Config.ID, err)
	}
	return nil
}

// Container is one evalmesh container on the engine, as List reports it.
type Container struct {
	TaskID      string `json:"task_id"`
	ContainerID string `json:"container_id"`
	Name        string `json:"name"`
	Running     bool   `json:"running"`
}

// List returns every container evalmesh created on this engine (label evalmesh.managed),
// running or not, so a restarted node can find containers that no saved handle names (the
// node died between creating one and persisting its handle) and Destroy them.
func (e *Executor) List(ctx context.Context) ([]Container, error) {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))})
	if err != nil {
		return nil, fmt.Errorf("docker executor: list containers: %w", err)
	}
	out := make([]Container, 0, len(cs))
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Container{TaskID: c.Labels[LabelTaskID], ContainerID: c.ID, Name: name, Running: c.State == "running"})
	}
	return out, nil
}

// HandleFor rebuilds a handle for a listed container (enough for Stop, Inspect and Destroy;
// its Config holds only the task ID).
func HandleFor(c Container) *runner.Handle {
	return &runner.Handle{Driver: DriverName, Config: runner.TaskConfig{ID: c.TaskID}, DriverState: encodeState(state{ContainerID: c.ContainerID, Name: c.Name})}
}

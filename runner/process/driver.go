package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/evalmesh/evalmesh/runner"
)

// Options configure an Executor. The zero value is usable.
type Options struct {
	// StateDir holds the per-task status files; "" means the folder of the task's LogPath.
	StateDir string
	// CgroupRoot is where cgroup v1 controllers are mounted; "" means /sys/fs/cgroup.
	// CgroupParent is the folder created under each controller; "" means "evalmesh".
	CgroupRoot, CgroupParent string
	// NoCgroups disables cgroups even where they are writable (limits fall back to rlimits).
	NoCgroups bool
	// NoNetNS lets tasks without a network share the host's network even where the node
	// could give them a namespace of their own.
	NoNetNS bool
	// StopGrace is the SIGTERM→SIGKILL grace when Wait stops a task at its deadline; 0: 10 s.
	StopGrace time.Duration
	// PollInterval is how often Wait checks a task it did not start itself (after a restart);
	// 0 means 250 ms.
	PollInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SandboxDir holds each agent task's sandbox (see the package doc); "" means
	// $TMPDIR/evalmesh-agents.
	SandboxDir string
	// UID and GID are whom agent tasks run as when the node runs as root; 0 means DefaultUID
	// and DefaultGID. SameUID keeps agents under the node's own uid even then.
	UID, GID int
	SameUID  bool
}

// Executor runs tasks as local subprocesses (development only, see the package doc). Safe for
// concurrent use.
type Executor struct {
	opts Options

	mu       sync.Mutex
	children map[int]*child // by PID, for tasks this Executor started

	attached func() // test hook: Wait is watching a recovered task
}

// child is a task started by this Executor: its exit is learnt from wait(2).
type child struct {
	done  chan struct{}
	state *os.ProcessState
}

var _ runner.Executor = (*Executor)(nil)

// New returns a process executor.
func New(opts Options) *Executor {
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = "/sys/fs/cgroup"
	}
	if opts.CgroupParent == "" {
		opts.CgroupParent = "evalmesh"
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Executor{opts: opts, children: map[int]*child{}}
}

// Name implements runner.Executor.
func (e *Executor) Name() string { return DriverName }

// Start implements runner.Executor.
func (e *Executor) Start(ctx context.Context, cfg runner.TaskConfig) (*runner.Handle, error) {
	if cfg.ID == "" {
		return nil, errors.New("process executor: task config has no ID")
	}
	if len(cfg.Command) == 0 {
		return nil, fmt.Errorf("process executor: task %s has no command (Command[0] must be an executable)", cfg.ID)
	}
	if cfg.LogPath == "" {
		return nil, fmt.Errorf("process executor: task %s has no log path", cfg.ID)
	}
	if p, err := exec.LookPath(cfg.Command[0]); err != nil {
		return nil, fmt.Errorf("process executor: task %s: agent command %q is not an executable file: %w", cfg.ID, cfg.Command[0], err)
	} else if !filepath.IsAbs(p) && cfg.WorkspaceDir != "" {
		// The supervisor runs in the workspace: a relative path must not change meaning.
		if abs, err := filepath.Abs(p); err == nil {
			cfg.Command = append([]string{abs}, cfg.Command[1:]...)
		}
	}
	if len(cfg.ExtraMounts) > 0 {
		return nil, fmt.Errorf("process executor: task %s: extra mounts cannot be provided to a subprocess (pass the folder in Env, or use the docker executor)", cfg.ID)
	}
	// An agent task (one with a public/ folder) runs in a sandbox of its own, under a uid of
	// its own where the node can give it one; an evaluator runs as the node, in its folders.
	agent := cfg.PublicDir != ""
	uid, gid, separate, uidNote := -1, -1, false, ""
	if agent {
		if uid, gid, separate, uidNote = e.agentUID(cfg.Command[0]); !separate {
			uid, gid = -1, -1
		}
	}
	for _, d := range []string{cfg.WorkspaceDir, cfg.OutputDir, filepath.Dir(cfg.LogPath)} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("process executor: task %s: %w", cfg.ID, err)
		}
	}
	name := taskName(cfg.ID)
	stateDir := e.opts.StateDir
	if stateDir == "" {
		stateDir = filepath.Dir(cfg.LogPath)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("process executor: task %s: state folder: %w", cfg.ID, err)
	}
	statusPath, err := filepath.Abs(filepath.Join(stateDir, name+".exit"))
	if err != nil {
		return nil, err
	}
	if err := os.Remove(statusPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("process executor: task %s: stale status file: %w", cfg.ID, err)
	}

	var sb sandboxLayout
	taskCfg := cfg // what the task sees; the handle keeps the caller's cfg
	if agent {
		if sb, taskCfg, err = e.makeSandbox(cfg, name, uid, gid); err != nil {
			_ = removeSandbox(sb)
			return nil, fmt.Errorf("process executor: task %s: %w", cfg.ID, err)
		}
		if separate {
			// The supervisor runs as the agent's uid: its status file lives in the sandbox,
			// handed over beforehand (the node's state folder is closed to that uid).
			statusPath = sb.status()
			err := os.WriteFile(statusPath, nil, 0o600)
			if err == nil {
				err = os.Chown(statusPath, uid, gid)
			}
			if err != nil {
				_ = removeSandbox(sb)
				return nil, fmt.Errorf("process executor: task %s: status file: %w", cfg.ID, err)
			}
		}
	}

	var cgroups []string
	memViaCgroup := false
	if !e.opts.NoCgroups {
		if cgroups, err = makeCgroups(e.opts.CgroupRoot, e.opts.CgroupParent, name, cfg.Limits); err != nil {
			_ = removeSandbox(sb)
			return nil, fmt.Errorf("process executor: task %s: %w", cfg.ID, err)
		}
		for _, d := range cgroups {
			memViaCgroup = memViaCgroup || filepath.Base(filepath.Dir(filepath.Dir(d))) == "memory"
		}
	}
	// Without a memory cgroup, RLIMIT_DATA (writable private mappings) stands in: unlike
	// RLIMIT_AS it does not count the address space runtimes reserve without using (Go's
	// heap arenas, CUDA's unified address space), which would stop such agents at startup.
	dataKiB := ""
	if cfg.Limits.MemoryBytes > 0 && !memViaCgroup {
		dataKiB = strconv.FormatInt((cfg.Limits.MemoryBytes+1023)/1024, 10)
	}

	cleanup := func() {
		removeCgroups(cgroups)
		_ = removeSandbox(sb)
	}
	logf, err := os.OpenFile(cfg.LogPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("process executor: task %s: log file: %w", cfg.ID, err)
	}
	defer logf.Close()
	gateR, gateW, err := os.Pipe()
	if err != nil {
		cleanup()
		return nil, err
	}
	defer gateR.Close()
	defer gateW.Close()

	args := append([]string{"-c", supervisorScript, "evalmesh-supervisor", statusPath, dataKiB}, cfg.Command...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = taskEnv(taskCfg)
	cmd.Dir = taskCfg.WorkspaceDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{gateR} // fd 3
	// A session of its own: its own process group (killed as a whole at the deadline) and no
	// controlling terminal, so it outlives the node process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if separate {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	// No network unless the task may have one: a network namespace of its own, where the
	// node may create one (root); elsewhere the task shares the host's network, and the
	// handle says so (NetworkIsolated false).
	isolate := !cfg.Network && !e.opts.NoNetNS && os.Geteuid() == 0
	if isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
	}
	started := e.opts.Now()
	if err := cmd.Start(); err != nil && isolate && errors.Is(err, syscall.EPERM) {
		// Root without CAP_SYS_ADMIN (an unprivileged container): no namespace to be had.
		isolate = false
		cmd = rebuild(cmd)
		cmd.SysProcAttr.Cloneflags = 0
		err = cmd.Start()
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("process executor: task %s: start: %w", cfg.ID, err)
		}
	} else if err != nil {
		cleanup()
		return nil, fmt.Errorf("process executor: task %s: start: %w", cfg.ID, err)
	}
	pid := cmd.Process.Pid
	c := &child{done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.done)
	}()
	fail := func(err error) (*runner.Handle, error) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-c.done
		cleanup()
		return nil, fmt.Errorf("process executor: task %s: %w", cfg.ID, err)
	}
	if err := joinCgroups(cgroups, pid); err != nil {
		return fail(err)
	}
	if isolate {
		if err := loopbackUp(pid); err != nil {
			return fail(err)
		}
	}
	st, err := readStat(pid)
	if err != nil {
		return fail(err)
	}
	if _, err := gateW.Write([]byte("go\n")); err != nil {
		return fail(fmt.Errorf("release supervisor: %w", err))
	}
	e.mu.Lock()
	e.children[pid] = c
	e.mu.Unlock()

	h := &runner.Handle{
		Driver:  DriverName,
		Config:  cfg,
		Started: started,
		DriverState: encodeState(state{PID: pid, StartTicks: st.StartTicks, StatusPath: statusPath, Cgroups: cgroups, NetworkIsolated: isolate,
			Sandbox: sb.Dir, Limits: limitsApplied(cgroups, dataKiB != ""), SeparateUID: separate, UID: max(uid, 0), UIDNote: uidNote}),
	}
	if cfg.Limits.WallClock > 0 {
		h.Deadline = started.Add(cfg.Limits.WallClock)
	}
	return h, nil
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// alive reports whether the task's supervisor still runs: same PID, same start time, not a
// zombie (a zombie has ended; its reaper may simply not have run yet).
func alive(s state) bool {
	st, err := readStat(s.PID)
	return err == nil && st.StartTicks == s.StartTicks && st.State != 'Z' && st.State != 'X'
}

// Stop implements runner.Executor: SIGTERM to the task's process group, SIGKILL after grace.
func (e *Executor) Stop(ctx context.Context, h *runner.Handle, grace time.Duration) error {
	s, err := decodeState(h)
	if err != nil {
		return err
	}
	if !alive(s) {
		return nil
	}
	_ = syscall.Kill(-s.PID, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for alive(s) {
		select {
		case <-t.C:
			_ = syscall.Kill(-s.PID, syscall.SIGKILL)
			return nil
		case <-ctx.Done():
			_ = syscall.Kill(-s.PID, syscall.SIGKILL)
			return ctx.Err()
		case <-tick.C:
		}
	}
	// The leader is gone; anything left in its group goes too.
	_ = syscall.Kill(-s.PID, syscall.SIGKILL)
	return nil
}

// Destroy implements runner.Executor: it kills whatever is left of the task and waits
// until none of its processes is alive (killAll), then removes its cgroups and its status
// file. The log stays: it belongs to the run.
func (e *Executor) Destroy(ctx context.Context, h *runner.Handle) error {
	s, err := decodeState(h)
	if err != nil {
		return err
	}
	// Nothing of the task may outlive Destroy: its supervisor, a child that ignored SIGTERM
	// or left the process group, anything in its cgroups.
	kctx, cancel := context.WithTimeout(ctx, killTimeout)
	kerr := killAll(kctx, s)
	cancel()
	e.mu.Lock()
	c := e.children[s.PID]
	delete(e.children, s.PID)
	e.mu.Unlock()
	if c != nil {
		<-c.done
	}
	err = errors.Join(kerr, removeCgroups(s.Cgroups))
	sb := sandboxLayout{Dir: s.Sandbox}
	err = errors.Join(err, collectOutput(sb, h.Config.OutputDir, h.Config.Limits.OutputBytes), removeSandbox(sb))
	if rerr := os.Remove(s.StatusPath); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// killTimeout bounds Destroy's wait for a task's processes to die after SIGKILL (a process
// in uninterruptible sleep, e.g. on a dead NFS mount, may never).
const killTimeout = 30 * time.Second

// rebuild returns a fresh, unstarted copy of cmd (an exec.Cmd cannot be started twice).
func rebuild(cmd *exec.Cmd) *exec.Cmd {
	c := exec.Command(cmd.Path, cmd.Args[1:]...)
	c.Env, c.Dir, c.Stdout, c.Stderr, c.ExtraFiles = cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.ExtraFiles
	attr := *cmd.SysProcAttr
	c.SysProcAttr = &attr
	return c
}

package process

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evalmesh/evalmesh/runner"
)

// supervisorScript runs under /bin/sh as the task's process-group leader. $1 is the status
// file, $2 the data limit (RLIMIT_DATA) in KiB ("" for none), the rest the agent's argv. It waits
// on fd 3 until the executor has placed it in its cgroups (so the agent never runs outside
// them), runs the agent, and records the agent's exit status for a node that restarted in
// the meantime. "exec 3<&-" keeps the pipe away from the agent.
const supervisorScript = `s=$1; v=$2; shift 2
read -r _ <&3; exec 3<&-
if [ -n "$v" ]; then ulimit -d "$v" || exit 125; fi
"$@"
rc=$?
echo "$rc" > "$s"
exit "$rc"
`

// taskName is a file and cgroup name for a task ID.
func taskName(id string) string {
	var b strings.Builder
	changed := false
	for _, r := range id {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			changed = true
		}
	}
	n := b.String()
	if changed || len(n) > 100 || n == "" || n == "." || n == ".." {
		sum := sha256.Sum256([]byte(id))
		if len(n) > 100 {
			n = n[:100]
		}
		n += "-" + hex.EncodeToString(sum[:4])
	}
	return n
}

// taskEnv is the agent's whole environment: nothing of the node's own environment leaks in.
func taskEnv(cfg runner.TaskConfig) []string {
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}
	for k, v := range cfg.Env {
		env[k] = v
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	if cfg.PublicDir != "" {
		env[runner.EnvPublic] = abs(cfg.PublicDir)
	}
	if cfg.WorkspaceDir != "" {
		env[runner.EnvWorkspace] = abs(cfg.WorkspaceDir)
		env["HOME"] = abs(cfg.WorkspaceDir)
	}
	if cfg.OutputDir != "" {
		env[runner.EnvOutput] = abs(cfg.OutputDir)
	}
	if cfg.PromptPath != "" {
		env[runner.EnvPrompt] = abs(cfg.PromptPath)
	}
	if cfg.MetaPath != "" {
		env[runner.EnvTaskMeta] = abs(cfg.MetaPath)
	}
	if len(cfg.GPUs) > 0 {
		env[runner.EnvGPUs] = strings.Join(cfg.GPUs, ",")
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(cfg.GPUs, ",")
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// cgroupFiles lists, per cgroup v1 controller, the files that carry a task's limits.
func cgroupFiles(l runner.Limits) map[string][][2]string {
	m := map[string][][2]string{}
	if l.MemoryBytes > 0 {
		v := strconv.FormatInt(l.MemoryBytes, 10)
		m["memory"] = [][2]string{{"memory.limit_in_bytes", v}, {"memory.memsw.limit_in_bytes", v}}
	}
	if l.PIDs > 0 {
		m["pids"] = [][2]string{{"pids.max", strconv.FormatInt(l.PIDs, 10)}}
	}
	if l.NanoCPUs > 0 {
		const period = 100000
		m["cpu"] = [][2]string{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", strconv.FormatInt(l.NanoCPUs*period/1e9, 10)}}
	}
	return m
}

// makeCgroups creates one cgroup v1 folder per controller the limits need, where the
// controller's hierarchy is writable, and returns the folders created. A controller that is
// not mounted or not writable is skipped (the package doc says what is then not enforced).
func makeCgroups(root, parent, name string, l runner.Limits) ([]string, error) {
	var dirs []string
	for ctrl, files := range cgroupFiles(l) {
		base := filepath.Join(root, ctrl)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(base, parent, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			continue // not writable: not enforced here
		}
		dirs = append(dirs, dir)
		for _, kv := range files {
			p := filepath.Join(dir, kv[0])
			if _, err := os.Stat(p); err != nil && kv[0] == "memory.memsw.limit_in_bytes" {
				continue // no swap accounting in this kernel
			}
			if err := os.WriteFile(p, []byte(kv[1]), 0o644); err != nil {
				removeCgroups(dirs)
				return nil, fmt.Errorf("cgroup %s: set %s=%s: %w", dir, kv[0], kv[1], err)
			}
		}
	}
	return dirs, nil
}

func joinCgroups(dirs []string, pid int) error {
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: add pid %d: %w", d, pid, err)
		}
	}
	return nil
}

// killCgroups SIGKILLs every process left in the task's cgroups (agents that left the process
// group with setsid) and removes the folders; it retries briefly while the kernel reaps.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		deadline := time.Now().Add(5 * time.Second)
		for {
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			err := os.Remove(d)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// oomKilled reports whether the kernel OOM-killed a process of the task's memory cgroup.
func oomKilled(dirs []string) bool {
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "memory.oom_control"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok && strings.TrimSpace(v) != "0" {
				return true
			}
		}
	}
	return false
}

func peakMemory(dirs []string) int64 {
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "memory.max_usage_in_bytes")); err == nil {
			v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			return v
		}
	}
	return 0
}

// loopbackUp brings lo up in the network namespace of pid (a fresh namespace starts with lo
// down, and agents may talk to themselves over 127.0.0.1, as they can under docker's "none").
func loopbackUp(pid int) error {
	errc := make(chan error, 1)
	go func() {
		// This thread enters the task's namespace for good: it is never unlocked, so the
		// runtime discards it when the goroutine ends instead of reusing it.
		runtime.LockOSThread()
		errc <- func() error {
			fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("enter network namespace: %w", err)
			}
			s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer unix.Close(s)
			ifr, err := unix.NewIfreq("lo")
			if err != nil {
				return err
			}
			if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
				return fmt.Errorf("lo flags: %w", err)
			}
			ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
			if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
				return fmt.Errorf("bring lo up: %w", err)
			}
			return nil
		}()
	}()
	return <-errc
}

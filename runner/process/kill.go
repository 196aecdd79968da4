package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// leftovers lists the live processes of a task: those in its session (the supervisor
// started one: every descendant is in it unless it called setsid) that started no earlier
// than the supervisor (a session ID is a PID, and a reused one would name a stranger's),
// and every process in the task's cgroups (which a setsid does not leave). Zombies are
// not counted: they hold no resources and only their parent, or init, can reap them.
func leftovers(s state) []int {
	seen := map[int]bool{}
	var out []int
	add := func(pid int) {
		if pid <= 1 || seen[pid] {
			return
		}
		seen[pid] = true
		if st, err := readStat(pid); err == nil && st.State != 'Z' && st.State != 'X' {
			out = append(out, pid)
		}
	}
	for _, d := range s.Cgroups {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					add(pid)
				}
			}
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || seen[pid] {
			continue
		}
		if st, err := readStat(pid); err == nil && st.Session == s.PID && st.StartTicks >= s.StartTicks {
			add(pid)
		}
	}
	return out
}

// killAll SIGKILLs every process of the task (leftovers) until none is left, or ctx ends.
// Why not only kill(-pgid): a child that ignored SIGTERM outlives its supervisor, and one
// that left the process group (setpgid) or session (setsid) is not reached by the group's
// signal; the session and the cgroups still name it.
func killAll(ctx context.Context, s state) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if alive(s) {
			// While the supervisor lives its PID names its group; once it is gone the
			// session scan (which checks start times) stands in, as the PID may be reused.
			_ = syscall.Kill(-s.PID, syscall.SIGKILL)
		}
		left := leftovers(s)
		if len(left) == 0 {
			return nil
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("process executor: processes %v of task (supervisor pid %d) still alive: %w", left, s.PID, ctx.Err())
		case <-tick.C:
		}
	}
}

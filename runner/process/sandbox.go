package process

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/evalmesh/evalmesh/runner"
)

// DefaultUID and DefaultGID are the uid and gid agents run as when the node runs as root
// ("nobody"/"nogroup" on Debian; the docker executor's DefaultUser too).
const (
	DefaultUID = 65534
	DefaultGID = 65534
)

// sandboxLayout is where an agent task's folders live: a fresh folder per task, laid out like
// the docker executor's mounts, so that the parent of public/ holds only the agent's own
// folders and nothing names the bundle (or its private/):
//
//	<root>/<task>/public/          copy of TaskConfig.PublicDir (hard links when the agent's uid
//	                               cannot write the bundle's files)
//	<root>/<task>/task/prompt.md   copy of TaskConfig.PromptPath
//	<root>/<task>/workspace/       the agent's scratch (owned by the agent's uid)
//	<root>/<task>/output/          the agent's output, copied into TaskConfig.OutputDir when the
//	                               task has ended (Wait, or Destroy if nobody waited)
//	<root>/<task>.exit             the supervisor's status file when the agent has a uid of its own
type sandboxLayout struct {
	Dir string `json:"dir"`
}

func (s sandboxLayout) public() string    { return filepath.Join(s.Dir, "public") }
func (s sandboxLayout) prompt() string    { return filepath.Join(s.Dir, "task", "prompt.md") }
func (s sandboxLayout) workspace() string { return filepath.Join(s.Dir, "workspace") }
func (s sandboxLayout) output() string    { return filepath.Join(s.Dir, "output") }
func (s sandboxLayout) status() string    { return s.Dir + ".exit" }

// agentUID says whether (and as whom) an agent task runs under a uid of its own: only a root
// node can switch, and only to a uid that can reach the agent's program. why says, when the
// answer is no, what kept it from it.
func (e *Executor) agentUID(cmd0 string) (uid, gid int, separate bool, why string) {
	if e.opts.SameUID {
		return 0, 0, false, "Options.SameUID"
	}
	if os.Geteuid() != 0 {
		return 0, 0, false, fmt.Sprintf("the node runs as uid %d, not root, and cannot switch uid", os.Geteuid())
	}
	uid, gid = e.opts.UID, e.opts.GID
	if uid == 0 {
		uid = DefaultUID
	}
	if gid == 0 {
		gid = DefaultGID
	}
	if err := reachable(cmd0, uid, gid, 0o5); err != nil {
		return 0, 0, false, fmt.Sprintf("uid %d cannot run the agent's program: %v", uid, err)
	}
	return uid, gid, true, ""
}

// reachable checks, from the mode bits, that uid:gid could search every folder above path and
// has the permissions want (0o4 read, 0o2 write, 0o1 execute, as "other" bits) on path itself.
// Hand-written: access(2) answers only for the caller's own uid.
func reachable(path string, uid, gid int, want os.FileMode) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	allowed := func(p string, bits os.FileMode) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner information", p)
		}
		m := fi.Mode().Perm()
		var have os.FileMode
		switch {
		case int(st.Uid) == uid:
			have = m >> 6
		case int(st.Gid) == gid:
			have = (m >> 3) & 7
		default:
			have = m & 7
		}
		if have&bits != bits {
			return fmt.Errorf("%s (mode %v) is closed to it", p, fi.Mode().Perm())
		}
		return nil
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		if err := allowed(d, 0o1); err != nil {
			return err
		}
		if d == "/" || d == "." {
			break
		}
	}
	return allowed(abs, want)
}

// makeSandbox creates the task's sandbox (see sandboxLayout) and returns cfg with the agent's
// paths pointing into it. uid < 0 keeps the node's uid (then public/ is always a copy: hard
// links would let the agent write the bundle's own files).
func (e *Executor) makeSandbox(cfg runner.TaskConfig, name string, uid, gid int) (sandboxLayout, runner.TaskConfig, error) {
	root := e.opts.SandboxDir
	if root == "" {
		// One root per node uid: a shared /tmp may hold another user's.
		root = filepath.Join(os.TempDir(), "evalmesh-agents")
		if os.Geteuid() != 0 {
			root += fmt.Sprintf("-%d", os.Geteuid())
		}
	}
	// On a root node the root is searchable but not listable by the agents' uid: one cannot
	// find another's folder (its name holds the run ID's random part). Elsewhere it is the
	// node user's alone.
	mode := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		mode = 0o711
	}
	if err := os.MkdirAll(root, mode); err != nil {
		return sandboxLayout{}, cfg, fmt.Errorf("sandbox: %w", err)
	}
	// In a world-writable /tmp the root may have been made by someone else (or be a link to
	// elsewhere): use it only if it is this node's own folder.
	if fi, err := os.Lstat(root); err != nil {
		return sandboxLayout{}, cfg, fmt.Errorf("sandbox: %w", err)
	} else if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return sandboxLayout{}, cfg, fmt.Errorf("sandbox: %s is not a folder of uid %d (remove it, or set the sandbox folder elsewhere)", root, os.Geteuid())
	}
	if err := os.Chmod(root, mode); err != nil {
		return sandboxLayout{}, cfg, fmt.Errorf("sandbox: %w", err)
	}
	sb := sandboxLayout{Dir: filepath.Join(root, name)}
	if err := os.RemoveAll(sb.Dir); err != nil { // a stale one of an earlier start
		return sb, cfg, fmt.Errorf("sandbox: %w", err)
	}
	if err := os.Mkdir(sb.Dir, 0o755); err != nil {
		return sb, cfg, fmt.Errorf("sandbox: %w", err)
	}
	out := cfg
	if cfg.PublicDir != "" {
		if err := copyTree(cfg.PublicDir, sb.public(), uid >= 0); err != nil {
			return sb, cfg, fmt.Errorf("sandbox: copy public/: %w", err)
		}
		out.PublicDir = sb.public()
	}
	if cfg.PromptPath != "" {
		if err := os.Mkdir(filepath.Dir(sb.prompt()), 0o755); err != nil {
			return sb, cfg, fmt.Errorf("sandbox: %w", err)
		}
		if err := copyFile(cfg.PromptPath, sb.prompt(), nil); err != nil {
			return sb, cfg, fmt.Errorf("sandbox: copy prompt: %w", err)
		}
		out.PromptPath = sb.prompt()
	}
	if cfg.MetaPath != "" {
		meta := filepath.Join(sb.Dir, "task", "task.yaml")
		if err := os.MkdirAll(filepath.Dir(meta), 0o755); err != nil {
			return sb, cfg, fmt.Errorf("sandbox: %w", err)
		}
		if err := copyFile(cfg.MetaPath, meta, nil); err != nil {
			return sb, cfg, fmt.Errorf("sandbox: copy task.yaml: %w", err)
		}
		out.MetaPath = meta
	}
	for _, d := range []string{sb.workspace(), sb.output()} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return sb, cfg, fmt.Errorf("sandbox: %w", err)
		}
		if uid >= 0 {
			if err := os.Chown(d, uid, gid); err != nil {
				return sb, cfg, fmt.Errorf("sandbox: hand %s to uid %d: %w", d, uid, err)
			}
		}
	}
	// The output limit: a tmpfs of that size over output/ where the node can mount one.
	if _, err := runner.MountOutputLimit(sb.output(), cfg.Limits.OutputBytes, uid, gid); err != nil {
		return sb, cfg, fmt.Errorf("sandbox: %w", err)
	}
	out.WorkspaceDir, out.OutputDir = sb.workspace(), sb.output()
	return sb, out, nil
}

// removeSandbox removes the task's sandbox folder and status file.
func removeSandbox(sb sandboxLayout) error {
	if sb.Dir == "" {
		return nil
	}
	var err error
	if runner.OutputMounted(sb.output()) {
		err = runner.UnmountOutputLimit(sb.output())
	}
	err = errors.Join(err, os.RemoveAll(sb.Dir))
	if rerr := os.Remove(sb.status()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// collectOutput copies what the agent left in the sandbox's output/ into the run's own
// output folder, once (the sandbox's output/ is removed after), with runner.CollectOutput:
// regular files and folders only, never following a link the agent made, no FIFO or
// hard-linked file, at most limit bytes; what it leaves out, and an output/ mount the agent
// filled, are recorded in the run's output folder for the evaluator.
func collectOutput(sb sandboxLayout, dst string, limit int64) error {
	if sb.Dir == "" || dst == "" {
		return nil
	}
	if _, err := os.Lstat(sb.output()); errors.Is(err, os.ErrNotExist) {
		return nil // collected already
	}
	mounted := runner.OutputMounted(sb.output())
	if err := runner.CollectOutput(sb.output(), dst, limit, mounted && runner.OutputFull(sb.output())); err != nil {
		return fmt.Errorf("collect the agent's output: %w", err)
	}
	if mounted {
		if err := runner.UnmountOutputLimit(sb.output()); err != nil {
			return err
		}
	}
	return os.RemoveAll(sb.output())
}

// copyTree copies the folder src to the new folder dst: folders and regular files only
// (anything else is refused), with hard links instead of copies when link is true and the
// file is writable by its owner alone (the agent then runs under another uid and cannot
// change the bundle's files through them).
func copyTree(src, dst string, link bool) error {
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	refuse := func(p string, m os.FileMode) error {
		return fmt.Errorf("%s: not a regular file or folder (%v)", p, m.Type())
	}
	return copyEntries(src, dst, link, refuse)
}

func copyEntries(src, dst string, link bool, other func(string, os.FileMode) error) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, ent := range ents {
		s, d := filepath.Join(src, ent.Name()), filepath.Join(dst, ent.Name())
		switch t := ent.Type(); {
		case t.IsDir():
			err := os.Mkdir(d, 0o755)
			if err == nil || errors.Is(err, os.ErrExist) {
				err = copyEntries(s, d, link, other)
			}
			if err != nil {
				return err
			}
		case t.IsRegular():
			if link {
				if fi, err := os.Lstat(s); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o022 == 0 {
					if os.Link(s, d) == nil {
						continue
					}
				}
			}
			if err := copyFile(s, d, other); err != nil {
				return err
			}
		default:
			if err := other(s, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyFile copies the regular file src to the new file dst (mode 0644). The source is
// opened without following a link and without blocking, and checked to be a regular file
// before it is read, so a link or FIFO an agent made cannot redirect or hang the copy; such
// an entry goes to other (nil: refused).
func copyFile(src, dst string, other func(string, os.FileMode) error) error {
	fd, err := unix.Open(src, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) && other != nil {
			return other(src, os.ModeSymlink)
		}
		return fmt.Errorf("open %s: %w", src, err)
	}
	in := os.NewFile(uintptr(fd), src)
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		if other != nil {
			return other(src, fi.Mode())
		}
		return fmt.Errorf("%s: not a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// limitsApplied names how a task's resource limits were applied, for the attestation.
func limitsApplied(cgroups []string, rlimit bool) string {
	switch {
	case len(cgroups) > 0:
		return "cgroup1"
	case rlimit:
		return "rlimit"
	}
	return "none"
}

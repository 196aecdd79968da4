package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/evalmesh/evalmesh/internal/home"
)

// The agent's output folder is hostile ground: the agent made everything in it. The runner
// reads it (the submission) and the executors copy it (out of a sandbox or a size-limited
// staging mount) only through the helpers below, which never follow a link out of the
// folder, never block on a FIFO, never read a special file or a file with more than one
// hard link (which may be another file's inode, the labels', say), and never copy more than
// the task's output limit. What they refuse is recorded in the folder's OutputReportFile,
// so the evaluator's verdict names the reason (docs/agent-spec.md, "What the agent sees").

// OutputReportFile is the record an executor leaves in a run's output folder when it
// collected the agent's output: what it refused, and whether the output hit its limit. An
// agent's own entry of this name is refused, never copied.
const OutputReportFile = ".evalmesh-output.json"

// DefaultOutputBytes is the output limit of a task whose limits name none.
const DefaultOutputBytes = MaxSubmissionBytes

// OutputReport is OutputReportFile's content.
type OutputReport struct {
	LimitBytes int64 `json:"limit_bytes,omitempty"`
	// Truncated: the agent's output reached the limit, so writes were cut off (a staging
	// mount full) or files left out (the copy stopped there).
	Truncated bool           `json:"truncated,omitempty"`
	Refused   []RefusedEntry `json:"refused,omitempty"`
}

// RefusedEntry is one output entry that was not copied, with the reason.
type RefusedEntry struct {
	Name   string `json:"name"` // relative to the output folder
	Reason string `json:"reason"`
}

// ReadOutputReport returns dir's OutputReportFile, or nil when there is none.
func ReadOutputReport(dir string) *OutputReport {
	f, _, why := OpenOutputFile(dir, OutputReportFile, 1<<20)
	if why != "" {
		return nil
	}
	defer f.Close()
	var r OutputReport
	if json.NewDecoder(f).Decode(&r) != nil {
		return nil
	}
	return &r
}

// refusedFor is the reason name was refused at collection, or "".
func (r *OutputReport) refusedFor(name string) string {
	if r == nil {
		return ""
	}
	for _, e := range r.Refused {
		if e.Name == name {
			return e.Reason
		}
	}
	return ""
}

// OpenOutputFile opens name in the folder dir for reading, openat-style: the folder itself
// opened without following a link, the file with O_NOFOLLOW and O_NONBLOCK (a FIFO neither
// blocks nor is read), then checked by fstat on the open descriptor (no window between the
// check and the read): a regular file, one hard link, at most limit bytes (limit <= 0: no
// bound). why is "" on success, else the reason in words, and f is nil.
func OpenOutputFile(dir, name string, limit int64) (f *os.File, fi os.FileInfo, why string) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Sprintf("output folder: %v", err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if errors.Is(err, unix.ELOOP) {
		target := "?"
		buf := make([]byte, 4096)
		if n, err := unix.Readlinkat(dfd, name, buf); err == nil {
			target = string(buf[:n])
		}
		return nil, nil, fmt.Sprintf("%s is a symbolic link (to %q): refused, never read through", name, target)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, nil, fmt.Sprintf("no submission: the agent left no %s in its output folder", name)
	}
	if err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", name, err)
	}
	f = os.NewFile(uintptr(fd), filepath.Join(dir, name))
	fi, err = f.Stat()
	if err == nil {
		why = fileRefusal(name, fi, limit)
	} else {
		why = fmt.Sprintf("%s: %v", name, err)
	}
	if why != "" {
		f.Close()
		return nil, nil, why
	}
	return f, fi, ""
}

// fileRefusal says why the opened entry fi may not be read, or "".
func fileRefusal(name string, fi os.FileInfo, limit int64) string {
	m := fi.Mode()
	switch {
	case m&os.ModeNamedPipe != 0:
		return name + " is a FIFO (named pipe), not a file: refused, never read"
	case m&os.ModeSocket != 0:
		return name + " is a socket, not a file: refused"
	case m&os.ModeDevice != 0:
		return name + " is a device file: refused, never read"
	case !m.IsRegular():
		return fmt.Sprintf("%s is not a regular file (%s): refused", name, m.Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Sprintf("%s has %d hard links: a hard-linked file may be another file's data (the labels', say), so it is refused, never read", name, st.Nlink)
	}
	if limit > 0 && fi.Size() > limit {
		return fmt.Sprintf("%s is %d bytes, over the %d-byte limit", name, fi.Size(), limit)
	}
	return ""
}

// CollectOutput copies the folders and regular files under src into dst (created), through
// OpenOutputFile: no link is followed, no FIFO or special file or hard-linked file copied,
// and at most limit bytes in all (limit <= 0: no bound); full says src was a staging mount
// the agent filled. Every entry left out is named in dst's OutputReportFile with the reason,
// written (atomically) whenever there is something to report.
func CollectOutput(src, dst string, limit int64, full bool) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	rep := &OutputReport{LimitBytes: limit, Truncated: full}
	var copied int64
	var walk func(rel string) error
	walk = func(rel string) error {
		dir := filepath.Join(src, rel)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, ent := range ents {
			name, relName := ent.Name(), filepath.Join(rel, ent.Name())
			if relName == OutputReportFile {
				rep.Refused = append(rep.Refused, RefusedEntry{Name: relName, Reason: OutputReportFile + " is a name the runner keeps for itself: refused"})
				continue
			}
			if ent.IsDir() {
				if err := os.Mkdir(filepath.Join(dst, relName), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
					return err
				}
				if err := walk(relName); err != nil {
					rep.Refused = append(rep.Refused, RefusedEntry{Name: relName, Reason: "folder not copied: " + err.Error()})
				}
				continue
			}
			left := int64(-1)
			if limit > 0 {
				left = limit - copied
			}
			f, fi, why := OpenOutputFile(dir, name, 0)
			if why != "" {
				rep.Refused = append(rep.Refused, RefusedEntry{Name: relName, Reason: why})
				continue
			}
			if left >= 0 && fi.Size() > left {
				f.Close()
				rep.Truncated = true
				rep.Refused = append(rep.Refused, RefusedEntry{Name: relName, Reason: fmt.Sprintf("%s (%d bytes) is past the task's output limit of %d bytes: cut off", relName, fi.Size(), limit)})
				continue
			}
			n, err := copyOpen(f, filepath.Join(dst, relName), fi.Size())
			f.Close()
			if err != nil {
				return fmt.Errorf("collect %s: %w", relName, err)
			}
			copied += n
		}
		return nil
	}
	if err := walk("."); err != nil {
		return err
	}
	if !rep.Truncated && len(rep.Refused) == 0 {
		return nil
	}
	return WriteOutputReport(dst, rep)
}

// copyOpen copies at most size bytes of the open file to the new file dst.
func copyOpen(f *os.File, dst string, size int64) (int64, error) {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(f, size))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// MountOutputLimit mounts a tmpfs of limit bytes at dir (created if missing), owned by
// uid:gid (uid < 0: left as root's, mode 0777), so the agent's writes fail with ENOSPC at
// the limit and never fill the node's disk; its pages count against the memory cgroup of
// whoever writes them (the agent's limit). ok is false, with no error, when this node
// cannot mount (not root, or no CAP_SYS_ADMIN): then the limit is applied only when the
// output is collected. A tmpfs does not survive a reboot: a run recovered after one has
// lost its output and is invalid.
func MountOutputLimit(dir string, limit int64, uid, gid int) (ok bool, err error) {
	if limit <= 0 || os.Geteuid() != 0 {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	opts := "size=" + strconv.FormatInt(limit, 10) + ",mode=0777"
	if uid >= 0 {
		opts = fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", limit, uid, gid)
	}
	err = unix.Mount("evalmesh-output", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
	if errors.Is(err, unix.EPERM) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mount the output limit at %s: %w", dir, err)
	}
	return true, nil
}

// OutputMounted reports whether dir is a mount of MountOutputLimit's (a tmpfs).
func OutputMounted(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return false
	}
	var parent unix.Statfs_t
	if unix.Statfs(filepath.Dir(dir), &parent) != nil {
		return false
	}
	var a, b unix.Stat_t
	return unix.Lstat(dir, &a) == nil && unix.Lstat(filepath.Dir(dir), &b) == nil && a.Dev != b.Dev
}

// OutputFull reports whether the mount at dir has no room left: the agent's writes were
// cut off there.
func OutputFull(dir string) bool {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return false
	}
	return st.Bavail == 0
}

// UnmountOutputLimit unmounts MountOutputLimit's tmpfs at dir (detached, so a lingering
// process of the agent does not keep it) and removes the folder.
func UnmountOutputLimit(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount the output limit at %s: %w", dir, err)
	}
	return os.RemoveAll(dir)
}

// WriteOutputReport writes rep as dir's OutputReportFile, atomically.
func WriteOutputReport(dir string, rep *OutputReport) error {
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return home.WriteFileAtomic(filepath.Join(dir, OutputReportFile), append(raw, '\n'), 0o644)
}

// CheckOutputSize is the limit where no mount could enforce it: the agent wrote into dir
// directly, so if the regular files under it (links not followed) add up to more than
// limit, the output is recorded as cut off and the run is invalid.
func CheckOutputSize(dir string, limit int64) error {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable parts are not the submission's
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	if err != nil || total <= limit {
		return err
	}
	return WriteOutputReport(dir, &OutputReport{LimitBytes: limit, Truncated: true,
		Refused: []RefusedEntry{{Name: ".", Reason: fmt.Sprintf("the output holds %d bytes, over the task's output limit of %d bytes", total, limit)}}})
}

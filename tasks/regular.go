package tasks

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// OpenRegular opens path for reading only if it is a regular file. It never follows a
// final symlink and never blocks in open(2) (a FIFO or a device would: a FIFO named
// task.yaml would hang the node forever), and it checks the type with fstat on the
// descriptor it opened, so nothing can be swapped in between the check and the read.
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, nil, fmt.Errorf("%s: %s", path, describeMode(os.ModeSymlink))
	}
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %s", path, describeMode(fi.Mode()))
	}
	// Regular files never block; clear O_NONBLOCK so reads behave as usual.
	if err := unix.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// ReadRegular reads the regular file at path whole (OpenRegular: links, FIFOs, devices
// and sockets are refused before anything is read).
func ReadRegular(path string) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// fileStamp is what says a file did not change while it was read: size, modification and
// status-change times (a write moves both; a truncate to the same size still moves ctime).
type fileStamp struct {
	size         int64
	mtime, ctime time.Time
}

func stampOf(fi os.FileInfo) fileStamp {
	s := fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ctime = time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	return s
}

func (s fileStamp) same(o fileStamp) bool {
	return s.size == o.size && s.mtime.Equal(o.mtime) && s.ctime.Equal(o.ctime)
}

func (s fileStamp) String() string {
	return fmt.Sprintf("%d bytes, modified %s, changed %s", s.size, s.mtime.UTC().Format(time.RFC3339Nano), s.ctime.UTC().Format(time.RFC3339Nano))
}

package node

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// daemonProcess is an `evalmesh daemon` in its own process (this test binary running
// TestHelperDaemonProcess), so a daemon that exits (pebble's fatal errors call os.Exit by
// default) shows as an exited process, not a dead test.
type daemonProcess struct {
	cmd    *exec.Cmd
	c      *Client
	exited chan struct{}
	log    *bytes.Buffer
}

func startDaemonProcess(t *testing.T, h home.Home, store string) (*daemonProcess, error) {
	t.Helper()
	d := &daemonProcess{exited: make(chan struct{}), log: &bytes.Buffer{}}
	d.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperDaemonProcess$")
	d.cmd.Env = append(os.Environ(), "EVALMESH_TEST_DAEMON_HOME="+h.Dir, "EVALMESH_TEST_BLOCKSTORE="+store)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { d.cmd.Process.Kill(); <-d.exited })
	var exitedEarly bool
	testutil.WaitFor(t, 60*time.Second, "the daemon process to answer or exit", func() bool {
		select {
		case <-d.exited:
			exitedEarly = true
			return true
		default:
		}
		cl, err := NewClient(h)
		if err != nil {
			return false
		}
		if _, err := cl.ID(context.Background()); err != nil {
			return false
		}
		d.c = cl
		return true
	})
	if exitedEarly {
		return nil, errors.New("daemon exited at start: " + d.log.String())
	}
	return d, nil
}

func (d *daemonProcess) alive(t *testing.T, what string) {
	t.Helper()
	if _, err := d.c.ID(context.Background()); err != nil {
		select {
		case <-d.exited:
			t.Fatalf("%s: the daemon process died: %v\n%s", what, d.cmd.ProcessState, d.log.String())
		default:
		}
		t.Fatalf("%s: the daemon does not answer: %v", what, err)
	}
}

func (d *daemonProcess) kill(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

// fillDisk writes path until the filesystem is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			for n := 4096; n > 0; n /= 2 { // the last pages
				for {
					if _, err := f.Write(chunk[:n]); err != nil {
						break
					}
				}
			}
			return
		}
	}
}

// TestDaemonSurvivesFullDisk runs a real daemon process whose whole home is a 24 MiB tmpfs:
// an add that does not fit fails saying the disk is full and leaves the space as it was (a
// later add fits); a disk filled from outside makes metadata writes fail as errors, not kill
// the process; and a home left full by a killed daemon's unsynced segment tail starts again,
// because the block store cuts that tail before the metadata store opens.
func TestDaemonSurvivesFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	if testing.Short() {
		t.Skip("starts daemon processes")
	}
	ctx := context.Background()
	h := tmpfsHome(t, "24m")
	d, err := startDaemonProcess(t, h, "pack")
	if err != nil {
		t.Fatal(err)
	}
	small := writeTree(t, map[string]string{"s.bin": string(randomBytes(1, 1<<20))})
	smallRoot, err := d.c.Add(ctx, small, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := writeTree(t, map[string]string{"big.bin": string(randomBytes(2, 40<<20))})
	_, err = d.c.Add(ctx, big, true, nil)
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("add of 40 MiB onto 24 MiB: %v; want an error saying the disk is full and to free space", err)
	}
	t.Logf("error shown: %v", err)
	d.alive(t, "after the add that did not fit")
	// The space the refused add took was given back: an add of most of what was free fits.
	again := writeTree(t, map[string]string{"again.bin": string(randomBytes(3, 12<<20))})
	againRoot, err := d.c.Add(ctx, again, true, nil)
	if err != nil {
		t.Fatalf("add after a refused add: %v (the refused add's blocks still take the space?)", err)
	}
	d.alive(t, "after the add that fit")

	// Full from outside: the metadata store's write fails; the daemon answers and says why.
	fillDisk(t, filepath.Join(h.Dir, "filler"))
	err = d.c.Unpin(ctx, againRoot)
	t.Logf("unpin on a full disk: %v", err)
	d.alive(t, "after a metadata write on a full disk")
	if err != nil && !strings.Contains(err.Error(), "free space") {
		t.Fatalf("unpin on a full disk: %v; want an error saying to free space", err)
	}
	if err := os.Remove(filepath.Join(h.Dir, "filler")); err != nil {
		t.Fatal(err)
	}

	// A killed daemon's unsynced tail fills the disk: the next start cuts it and comes up.
	d.kill(t)
	segs, _ := filepath.Glob(filepath.Join(h.PackBlocksDir(), "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segment files")
	}
	fillDisk(t, segs[len(segs)-1])
	if _, err := os.Stat(h.APIPath()); err != nil {
		t.Fatalf("a killed daemon should leave %s behind for this test: %v", h.APIPath(), err)
	}
	d2, err := startDaemonProcess(t, h, "pack")
	if err != nil {
		t.Fatalf("restart on a disk filled by an unsynced segment tail: %v", err)
	}
	pins, err := d2.c.Pins(ctx)
	if err != nil || len(pins) == 0 || !pinned(pins, smallRoot) {
		t.Fatalf("pins after restart: %v, %v; want %s among them", pins, err, smallRoot)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := d2.c.Get(ctx, smallRoot, out, nil, nil); err != nil {
		t.Fatalf("get of a bundle stored before the disk filled: %v", err)
	}
}

func pinned(pins []PinInfo, c interface{ String() string }) bool {
	for _, p := range pins {
		if p.CID == c.String() {
			return true
		}
	}
	return false
}

// TestStaleAPIFileRemovedAtStart: HOME/api and HOME/api.token left by a killed daemon are
// removed at start, even when the start then fails, so the CLI does not try a dead address.
func TestStaleAPIFileRemovedAtStart(t *testing.T) {
	h := newHome(t)
	for _, p := range []string{h.APIPath(), h.APITokenPath()} {
		if err := os.WriteFile(p, []byte("127.0.0.1:1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := testOptions()
	opts.Blockstore = "no-such-kind" // makes the start fail after the stale files are handled
	if err := Run(context.Background(), h, opts, nil); err == nil {
		t.Fatal("Run with a bad blockstore kind started")
	}
	for _, p := range []string{h.APIPath(), h.APITokenPath()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after a failed start (%v)", p, err)
		}
	}
}

// TestMetadataFatalIsAnError: a fatal error pebble raises inside a metadata write (what a
// commit that cannot be written does) comes back as an error naming what to do, and the
// daemon keeps answering /id while refusing the rest with 503 instead of exiting.
func TestMetadataFatalIsAnError(t *testing.T) {
	d := startDaemon(t, newHome(t))
	err := d.n.guardMeta(func() error {
		pebbleLogger{t.Logf}.Fatalf("pebble: fatal commit error: %v", syscall.ENOSPC)
		return nil
	})
	if !errors.Is(err, ErrMetadataFailed) || !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "restart the daemon") {
		t.Fatalf("guardMeta after a pebble Fatalf: %v", err)
	}
	if _, err := d.c.ID(context.Background()); err != nil {
		t.Fatalf("id after a metadata failure: %v", err)
	}
	if _, err := d.c.Pins(context.Background()); err == nil || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("pin ls after a metadata failure: %v; want the failure, saying to free space", err)
	}
}

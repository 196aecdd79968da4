package node

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/internal/testutil"

	"github.com/evalmesh/evalmesh/internal/home"
)

// TestHelperDaemonProcess is not a test: TestDaemonKilledAfterAdd runs this test binary with
// EVALMESH_TEST_DAEMON_HOME set to get a daemon in its own process, which it then SIGKILLs.
func TestHelperDaemonProcess(t *testing.T) {
	dir := os.Getenv("EVALMESH_TEST_DAEMON_HOME")
	if dir == "" {
		t.Skip("helper process for TestDaemonKilledAfterAdd")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, home.Home{Dir: dir}, testOptions(), func(*Node, string) {}); err != nil {
		t.Fatal(err)
	}
}

// TestDaemonKilledAfterAdd: an add is durable once the call returns. The daemon runs in its
// own process and is SIGKILLed (no Close, no flush) right after Add answers; a node opened on
// the same home then has the pin and every block of the bundle.
func TestDaemonKilledAfterAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon process")
	}
	ctx := context.Background()
	h := newHome(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDaemonProcess$")
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_DAEMON_HOME="+h.Dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	var c *Client
	testutil.WaitFor(t, 60*time.Second, "the daemon process to answer", func() bool {
		cl, err := NewClient(h)
		if err != nil {
			return false
		}
		if _, err := cl.ID(ctx); err != nil {
			return false
		}
		c = cl
		return true
	})
	files := map[string][]byte{"data.bin": randomBytes(3, 3<<20+77), "small.txt": []byte("x")}
	src := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := c.Add(ctx, src, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("daemon process did not die")
	}
	n := startNodeAt(t, h, testOptions())
	if ok, err := n.IsPinned(ctx, root); err != nil || !ok {
		t.Fatalf("pin lost when the daemon was killed after Add returned: pinned %v, %v", ok, err)
	}
	checkFiles(t, n, root, files)
}

// TestDaemonKilledAfterPins: the pinner's records are written unsynced and made durable by
// the Flush that ends each change (pinStore), so a run of pins and unpins acknowledged back to
// back, the daemon SIGKILLed right after the last, must all be there when the home reopens:
// every pin kept, every unpin gone, and the pin list consistent with them.
func TestDaemonKilledAfterPins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon process")
	}
	ctx := context.Background()
	h := newHome(t)
	d, err := startDaemonProcess(t, h, testStore)
	if err != nil {
		t.Fatal(err)
	}
	var roots []cid.Cid
	for i := range 40 {
		src := t.TempDir()
		if err := os.WriteFile(filepath.Join(src, "obj.bin"), randomBytes(uint64(100+i), 2000+i), 0o644); err != nil {
			t.Fatal(err)
		}
		root, err := d.c.Add(ctx, src, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, root)
	}
	// Every third pin is removed again; the last change before the kill is an unpin.
	unpinned := map[cid.Cid]bool{}
	for i := len(roots) - 1; i >= 0; i -= 3 {
		if err := d.c.Unpin(ctx, roots[i]); err != nil {
			t.Fatal(err)
		}
		unpinned[roots[i]] = true
	}
	d.kill(t)
	n := startNodeAt(t, h, testOptions())
	for i, root := range roots {
		ok, err := n.IsPinned(ctx, root)
		if err != nil || ok == unpinned[root] {
			t.Errorf("object %d (%s) after the kill: pinned %v (%v), want %v", i, root, ok, err, !unpinned[root])
		}
	}
	pins, err := n.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(roots) - len(unpinned); len(pins) != want {
		t.Errorf("%d pins listed after the kill, want %d: %v", len(pins), want, pins)
	}
}

package node

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"

	"github.com/evalmesh/evalmesh/internal/home"
)

// daemon runs Run for home h until the test ends (or stop is called) and returns a client.
type daemon struct {
	n      *Node
	c      *Client
	stop   func()
	exited chan error
}

func startDaemon(t *testing.T, h home.Home) *daemon {
	t.Helper()
	return startDaemonWith(t, h, testOptions())
}

func startDaemonWith(t *testing.T, h home.Home, opts Options) *daemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{exited: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		d.exited <- Run(ctx, h, opts, func(n *Node, addr string) {
			d.n = n
			close(ready)
		})
	}()
	select {
	case <-ready:
	case err := <-d.exited:
		t.Fatalf("daemon exited: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start within 30s")
	}
	var stopped bool
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-d.exited; err != nil {
			t.Errorf("daemon shutdown: %v", err)
		}
	}
	t.Cleanup(d.stop)
	c, err := NewClient(h)
	if err != nil {
		t.Fatal(err)
	}
	d.c = c
	return d
}

// writeTree creates files (path → content) under a new temp folder.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDaemonAddGetOverAPI(t *testing.T) {
	ctx := context.Background()
	ha, hb := newHome(t), newHome(t)
	a, b := startDaemon(t, ha), startDaemon(t, hb)
	tree := map[string]string{"prompt.md": "solve it", "public/train.csv": strings.Repeat("x,1\n", 200000), "private/labels.csv": "y\n1\n"}
	src := writeTree(t, tree)

	root, err := a.c.Add(ctx, src, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	idA, err := a.c.ID(ctx)
	if err != nil || idA.PeerID != a.n.ID().String() || len(idA.Addrs) == 0 {
		t.Fatalf("id = %+v, %v", idA, err)
	}
	if err := b.c.Connect(ctx, idA.Addrs[0]); err != nil {
		t.Fatal(err)
	}
	peers, err := b.c.Peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].ID != idA.PeerID {
		t.Fatalf("peers of b = %+v, %v; want a", peers, err)
	}
	out := filepath.Join(t.TempDir(), "got")
	var last, total int64
	unpacked := false
	if err := b.c.Get(ctx, root, out, func(d, tot int64) { last, total = d, tot }, func() { unpacked = true }); err != nil {
		t.Fatal(err)
	}
	for p, content := range tree {
		got, err := os.ReadFile(filepath.Join(out, p))
		if err != nil || string(got) != content {
			t.Fatalf("%s after get: %d bytes, %v; want %d bytes", p, len(got), err, len(content))
		}
	}
	if last != total || total == 0 || !unpacked {
		t.Fatalf("progress ended at %d/%d, unpack reported %v", last, total, unpacked)
	}
	pins, err := b.c.Pins(ctx)
	if err != nil || len(pins) != 1 || pins[0].CID != root.String() {
		t.Fatalf("pins of b = %+v, %v; want %s", pins, err, root)
	}
	if err := b.c.Unpin(ctx, root); err != nil {
		t.Fatal(err)
	}
	if err := b.c.Unpin(ctx, root); err == nil || !strings.Contains(err.Error(), "not pinned") {
		t.Fatalf("second unpin: %v, want 'not pinned'", err)
	}

	// Export from a, import into a fresh daemon c: same root, pinned there.
	var car bytes.Buffer
	if err := a.c.ExportCAR(ctx, root, &car); err != nil {
		t.Fatal(err)
	}
	c := startDaemon(t, newHome(t))
	roots, err := c.c.ImportCAR(ctx, bytes.NewReader(car.Bytes()))
	if err != nil || len(roots) != 1 || roots[0] != root {
		t.Fatalf("import-car roots = %v, %v; want [%s]", roots, err, root)
	}
	if ok, _ := c.n.IsPinned(ctx, root); !ok {
		t.Fatal("imported root not pinned")
	}
	// A corrupted CAR is refused.
	bad := bytes.Clone(car.Bytes())
	bad[len(bad)-10] ^= 1
	if _, err := startDaemon(t, newHome(t)).c.ImportCAR(ctx, bytes.NewReader(bad)); err == nil {
		t.Fatal("a CAR with a corrupted block was imported")
	}
}

func TestDaemonRestartKeepsPin(t *testing.T) {
	ctx := context.Background()
	h := newHome(t)
	a := startDaemon(t, h)
	src := writeTree(t, map[string]string{"a.txt": strings.Repeat("evalmesh ", 100000)})
	root, err := a.c.Add(ctx, src, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.stop()
	if _, err := os.Stat(h.APIPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there after a clean stop (%v)", h.APIPath(), err)
	}
	// Stopped: the CLI's client says how to start it.
	if _, err := NewClient(h); !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "evalmesh daemon --home "+h.Dir) {
		t.Fatalf("client of a stopped daemon: %v", err)
	}
	a2 := startDaemon(t, h)
	b := startDaemon(t, newHome(t))
	if err := b.c.Connect(ctx, a2.n.Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	pins, err := a2.c.Pins(ctx)
	if err != nil || len(pins) != 1 || pins[0].CID != root.String() {
		t.Fatalf("pins after restart = %+v, %v", pins, err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := b.c.Get(ctx, root, out, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestClientStaleAPIFile(t *testing.T) {
	h := newHome(t)
	// A daemon that crashed leaves HOME/api behind; nothing listens there.
	if err := os.WriteFile(h.APIPath(), []byte("127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(h)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Pins(context.Background())
	if !errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "evalmesh daemon --home") {
		t.Fatalf("err = %v, want ErrNoDaemon with how to start it", err)
	}
}

func TestAPIRefusesWebPages(t *testing.T) {
	d := startDaemon(t, newHome(t))
	req, _ := http.NewRequest(http.MethodPost, d.c.base+"/pin/ls", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("request with Origin: %s, want 403", resp.Status)
	}
}

// TestDaemonStopsDuringGet: SIGTERM while a get waits for blocks ends the request, then
// closes the stores cleanly; the home opens again with its pins.
func TestDaemonStopsDuringGet(t *testing.T) {
	h := newHome(t)
	d := startDaemon(t, h)
	src := writeTree(t, map[string]string{"a.txt": "kept"})
	kept, err := d.c.Add(context.Background(), src, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	nobodyHasIt := importDir(t, startNode(t, testOptions()).LocalDAG(), testFiles(1000))
	got := make(chan error, 1)
	go func() { got <- d.c.Get(context.Background(), nobodyHasIt, filepath.Join(t.TempDir(), "x"), nil, nil) }()
	testutil.WaitFor(t, 10*time.Second, "the get to want its root", func() bool {
		for _, c := range d.n.bswap.GetWantlist() {
			if c == nobodyHasIt {
				return true
			}
		}
		return false
	})
	d.stop()
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("get of a CID nobody has succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("get still running 10s after the daemon stopped")
	}
	n := startNodeAt(t, h, testOptions())
	if ok, err := n.IsPinned(context.Background(), kept); err != nil || !ok {
		t.Fatalf("pin lost after stopping mid-get: %v %v", ok, err)
	}
}

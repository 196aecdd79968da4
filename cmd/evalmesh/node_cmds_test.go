package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
)

// runNodeDaemon runs the daemon of home dir in-process (what `evalmesh daemon` calls) until
// the test ends.
func runNodeDaemon(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	opts := node.Options{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, API: "127.0.0.1:0"}
	go func() { done <- node.Run(ctx, home.Home{Dir: dir}, opts, func(*node.Node, string) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("daemon: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not start in 30s")
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon stop: %v", err)
		}
	})
}

func TestNodeCommandsAddConnectGet(t *testing.T) {
	ha, hb := t.TempDir(), t.TempDir()
	for _, h := range []string{ha, hb} {
		if code, _, errOut := nodeCLI(t, "init", "--home", h); code != 0 {
			t.Fatalf("init: %s", errOut)
		}
	}
	// Stopped daemon: one line saying how to start it.
	code, _, errOut := nodeCLI(t, "pin", "ls", "--home", ha)
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "evalmesh daemon --home "+ha) {
		t.Fatalf("pin ls without daemon: code %d, stderr %q; want one line naming `evalmesh daemon --home %s`", code, errOut, ha)
	}
	// id without a daemon has no addrs.
	_, out, _ := nodeCLI(t, "id", "--home", ha, "--json")
	if strings.Contains(out, "addrs") {
		t.Fatalf("id --json without a daemon shows addrs: %s", out)
	}

	runNodeDaemon(t, ha)
	runNodeDaemon(t, hb)
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "public"), 0o755)
	os.WriteFile(filepath.Join(src, "prompt.md"), []byte("# do it\n"), 0o644)
	os.WriteFile(filepath.Join(src, "public", "data.csv"), []byte(strings.Repeat("1,2,3\n", 100000)), 0o644)

	code, out, errOut = nodeCLI(t, "task", "add", "--unchecked", src, "--home", ha, "--json")
	if code != 0 {
		t.Fatalf("task add: %s", errOut)
	}
	var added struct{ CID string }
	if err := json.Unmarshal([]byte(out), &added); err != nil || added.CID == "" {
		t.Fatalf("task add --json: %q (%v)", out, err)
	}
	_, out, _ = nodeCLI(t, "id", "--home", ha, "--json")
	var id struct{ Addrs []string }
	if err := json.Unmarshal([]byte(out), &id); err != nil || len(id.Addrs) == 0 || !strings.Contains(id.Addrs[0], "/p2p/") {
		t.Fatalf("id --json while the daemon runs: %s", out)
	}
	// No peer yet: said on stderr, not an empty answer.
	code, out, errOut = nodeCLI(t, "peers", "--home", hb)
	if code != 0 || out != "" || !strings.Contains(errOut, "no peers connected: this node is running alone") {
		t.Fatalf("peers of a node alone: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := nodeCLI(t, "connect", id.Addrs[0], "--home", hb); code != 0 {
		t.Fatalf("connect: %s", errOut)
	}
	_, out, _ = nodeCLI(t, "peers", "--home", hb, "--json")
	if !strings.Contains(out, strings.Split(id.Addrs[0], "/p2p/")[1]) {
		t.Fatalf("peers: %s", out)
	}
	dst := filepath.Join(t.TempDir(), "got")
	if code, _, errOut := nodeCLI(t, "task", "get", added.CID, dst, "--home", hb); code != 0 {
		t.Fatalf("task get: %s", errOut)
	}
	got, err := os.ReadFile(filepath.Join(dst, "public", "data.csv"))
	if err != nil || len(got) != 600000 {
		t.Fatalf("unpacked data.csv: %d bytes, %v", len(got), err)
	}
	_, out, _ = nodeCLI(t, "pin", "ls", "--home", hb)
	if !strings.Contains(out, added.CID) {
		t.Fatalf("pin ls after get: %q", out)
	}
	car := filepath.Join(t.TempDir(), "b.car")
	if code, _, errOut := nodeCLI(t, "task", "export", added.CID, car, "--home", hb); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	if code, _, errOut := nodeCLI(t, "pin", "rm", added.CID, "--home", hb); code != 0 {
		t.Fatalf("pin rm: %s", errOut)
	}
	code, out, errOut = nodeCLI(t, "task", "import-car", car, "--home", hb)
	if code != 0 || strings.TrimSpace(out) != added.CID {
		t.Fatalf("import-car: %d %q %s", code, out, errOut)
	}
}

// nodeCLI runs the CLI in-process and returns its exit code, stdout and stderr.
func nodeCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestRepoGCCommand: `repo gc --dry-run --json` reports the blocks of an unpinned bundle and
// keeps them; `repo gc` removes them and prints what it did.
func TestRepoGCCommand(t *testing.T) {
	h := t.TempDir()
	if code, _, errOut := nodeCLI(t, "init", "--home", h); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	runNodeDaemon(t, h)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.bin"), bytes.Repeat([]byte("gc me "), 200000), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := nodeCLI(t, "task", "add", "--unchecked", src, "--home", h)
	if code != 0 {
		t.Fatalf("task add: %s", errOut)
	}
	root := strings.TrimSpace(out)
	if code, _, errOut := nodeCLI(t, "pin", "rm", root, "--home", h); code != 0 {
		t.Fatalf("pin rm: %s", errOut)
	}
	code, out, errOut = nodeCLI(t, "repo", "gc", "--dry-run", "--json", "--home", h)
	var rep node.GCReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.DryRun || rep.Blocks == 0 || rep.UnpackFolders == nil {
		t.Fatalf("repo gc --dry-run --json: code %d, %q, %s", code, out, errOut)
	}
	code, out, errOut = nodeCLI(t, "repo", "gc", "--home", h)
	if code != 0 || !strings.Contains(out, "removed "+strconv.Itoa(rep.Blocks)+" unpinned blocks") {
		t.Fatalf("repo gc: code %d, %q, %s; want %d blocks removed", code, out, errOut, rep.Blocks)
	}
	code, out, _ = nodeCLI(t, "repo", "gc", "--dry-run", "--home", h)
	if code != 0 || !strings.Contains(out, "would remove 0 unpinned blocks") {
		t.Fatalf("repo gc after gc: %q", out)
	}
}

// TestTaskGetTimeout: `task get --timeout` of a CID no connected peer has gives up after
// about that long, naming the CID and the peer it asked, and leaves no folder.
func TestTaskGetTimeout(t *testing.T) {
	ha, hb := t.TempDir(), t.TempDir()
	for _, h := range []string{ha, hb} {
		if code, _, errOut := nodeCLI(t, "init", "--home", h); code != 0 {
			t.Fatalf("init: %s", errOut)
		}
		runNodeDaemon(t, h)
	}
	_, out, _ := nodeCLI(t, "id", "--home", ha, "--json")
	var id struct {
		PeerID string `json:"peer_id"`
		Addrs  []string
	}
	if err := json.Unmarshal([]byte(out), &id); err != nil || len(id.Addrs) == 0 {
		t.Fatalf("id --json: %s", out)
	}
	if code, _, errOut := nodeCLI(t, "connect", id.Addrs[0], "--home", hb); code != 0 {
		t.Fatalf("connect: %s", errOut)
	}
	nobodyHasIt := "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy" // sha256 of "hello\n"
	dst := filepath.Join(t.TempDir(), "got")
	start := time.Now()
	code, _, errOut := nodeCLI(t, "task", "get", "--timeout", "2s", nobodyHasIt, dst, "--home", hb)
	took := time.Since(start)
	if code == 0 || !strings.Contains(errOut, nobodyHasIt) || !strings.Contains(errOut, id.PeerID) || !strings.Contains(errOut, "2s") {
		t.Fatalf("task get --timeout 2s of a CID nobody has: code %d, stderr %q; want the CID, the peer asked (%s) and the timeout", code, errOut, id.PeerID)
	}
	if took > 30*time.Second {
		t.Fatalf("task get --timeout 2s took %s", took)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Fatalf("%s exists after a failed get", dst)
	}
	t.Logf("after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(errOut))
	if code, _, errOut := nodeCLI(t, "task", "get", "--timeout", "0s", nobodyHasIt, dst, "--home", hb); code == 0 || !strings.Contains(errOut, "positive duration") {
		t.Fatalf("--timeout 0s: code %d, %q", code, errOut)
	}
}

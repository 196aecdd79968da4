package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// A daemon process started with --dashboard-listen serves the dashboard on its own address
// (here a node alone: no ledger yet, no peers) with --log-format json logs, and stops cleanly.
func TestDaemonServesTheDashboard(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "home")
	if _, e, code := runE2(t, "init", "--home", h); code != 0 {
		t.Fatal(e)
	}
	out, errLog := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	stdout, _ := os.Create(out)
	stderr, _ := os.Create(errLog)
	defer stdout.Close()
	defer stderr.Close()
	daemon := exec.Command(os.Args[0], "daemon", "--home", h, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0",
		"--dashboard-listen", "127.0.0.1:0", "--log-format", "json", "--json")
	daemon.Env = append(os.Environ(), "EVALMESH_TEST_CLI=1")
	daemon.Stdout, daemon.Stderr = stdout, stderr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	t.Cleanup(func() {
		daemon.Process.Kill()
		<-exited
	})
	var ready struct {
		API       string `json:"api"`
		Dashboard string `json:"dashboard"`
	}
	testutil.WaitFor(t, 60*time.Second, "the daemon's ready line", func() bool {
		b, _ := os.ReadFile(out)
		return json.Unmarshal(b, &ready) == nil && ready.Dashboard != ""
	})
	if ready.Dashboard == ready.API {
		t.Fatalf("dashboard and API on one address %s", ready.API)
	}
	base := "http://" + ready.Dashboard
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for path, want := range map[string]string{"/api/v1/leaderboard": `"rows": []`, "/api/v1/campaigns": "[]", "/api/v1/peers": "[]",
		"/": "No ledger yet", "/metrics": `evalmesh_store_envelopes{set="attestations",status="accepted"} 0`} {
		if code, body := get(path); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, no %q in\n%.500s", path, code, want, body)
		}
	}
	if code, _ := get("/api/v1/ledger.json"); code != http.StatusServiceUnavailable {
		t.Errorf("ledger.json before any ledger: %d, want 503", code)
	}
	token, _ := os.ReadFile(filepath.Join(h, "api.token"))
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v0/id", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("the dashboard answers the API's POST /api/v0/id: %d", resp.StatusCode)
	}

	daemon.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	exited <- nil // for the cleanup
	logs, _ := os.ReadFile(errLog)
	lines := strings.Split(strings.TrimSpace(string(logs)), "\n")
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] == nil || rec["time"] == nil {
			t.Errorf("--log-format json wrote a line that is not a log record: %q", l)
		}
	}
	if !strings.Contains(string(logs), `"msg":"daemon stopped"`) {
		t.Errorf("no stop record in\n%s", logs)
	}
}

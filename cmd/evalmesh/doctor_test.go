package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/examples/demo"
	"github.com/evalmesh/evalmesh/internal/doctor"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/diskstore"
)

// doctorJSON runs `evalmesh doctor --json` in-process on home dir.
func doctorJSON(t *testing.T, dir string) (int, doctor.Report, string) {
	t.Helper()
	code, out, stderr := cliRun(t, "doctor", "--home", dir, "--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json printed no report (%v): %q, stderr %q", err, out, stderr)
	}
	t.Logf("evalmesh doctor --json (exit %d):\n%s", code, out)
	return code, rep, stderr
}

// checkOf is the check named name, failing the test when the report has none.
func checkOf(t *testing.T, rep doctor.Report, name string) doctor.Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("report has no %q check: %+v", name, rep.Checks)
	return doctor.Check{}
}

func wantStatus(t *testing.T, rep doctor.Report, name string, want doctor.Status, inDetail ...string) doctor.Check {
	t.Helper()
	c := checkOf(t, rep, name)
	if c.Status != want {
		t.Errorf("%s: status %s, want %s (%s; fix %q)", name, c.Status, want, c.Detail, c.Fix)
	}
	for _, s := range inDetail {
		if !strings.Contains(c.Detail, s) {
			t.Errorf("%s: detail %q does not name %q", name, c.Detail, s)
		}
	}
	return c
}

// A certified node of a demo network, its daemon running and connected to another lab's:
// doctor exits 0 and finds the certificate, the document, the peer and their agreement ok.
func TestDoctorHealthyNode(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 2)
	a, b := c.start(0), c.start(1)
	c.connect(a, b)
	// Heads come every 5 s: wait until a's daemon has heard b's.
	testutil.WaitFor(t, 30*time.Second, "a peer head heard", func() bool {
		st, err := a.client.LedgerStatus(t.Context())
		return err == nil && len(st.Peers) > 0
	})
	code, rep, stderr := doctorJSON(t, a.lab.Home.Dir)
	if code != 0 || rep.Fails != 0 {
		t.Fatalf("doctor on a healthy node: exit %d, %d fail(s): %s", code, rep.Fails, stderr)
	}
	if !rep.Daemon {
		t.Error("report says no daemon answered")
	}
	wantStatus(t, rep, "certificate", doctor.OK, "lab1", "days left")
	wantStatus(t, rep, "network_document", doctor.OK, c.labs.Doc.Hash())
	wantStatus(t, rep, "peers", doctor.OK, "1 peer(s)")
	wantStatus(t, rep, "network_agreement", doctor.OK, c.labs.Doc.Hash())
	wantStatus(t, rep, "addresses", doctor.OK, a.addr)
	// Both daemons read this machine's clock: b's heads show it within the gossip delay.
	wantStatus(t, rep, "clock", doctor.OK, "against 1 peer(s): "+b.peerID)
	// The demo counts process runs: allowed, but warned about.
	wantStatus(t, rep, "executor", doctor.Warn, "process")
}

// A node whose certificate expired: a fail naming the expiry, fixed by a new certificate.
func TestDoctorExpiredCertificate(t *testing.T) {
	labs, err := demo.NewLabs(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	l := labs.Nodes[0]
	mustCLI(t, "lab", "certify", "--dir", filepath.Join(labs.Dir, "labs", l.Name), "--node", l.PeerID,
		"--from", "2025-01-01T00:00:00Z", "--valid", "30d", "--out", l.Home.CertPath())
	code, rep, stderr := doctorJSON(t, l.Home.Dir)
	if code != 1 {
		t.Fatalf("doctor with an expired certificate: exit %d, want 1", code)
	}
	c := wantStatus(t, rep, "certificate", doctor.Fail, "expired at 2025-01-31T00:00:00Z", "lab1")
	if !strings.Contains(c.Fix, "evalmesh lab certify") || !strings.Contains(c.Fix, l.PeerID) {
		t.Errorf("certificate fix %q does not say how to get a new one for this node", c.Fix)
	}
	if !strings.Contains(stderr, "certificate") {
		t.Errorf("stderr %q does not name the failing check", stderr)
	}
	// Everything else of the home is sound: only the certificate fails.
	if got := rep.Failed(); len(got) != 1 {
		t.Errorf("failing checks %v, want only certificate", got)
	}
	wantStatus(t, rep, "daemon", doctor.Warn, "no evalmesh daemon")
}

// The docker executor with no engine behind DOCKER_HOST: a fail naming the engine's address.
// The same dead engine under the process executor is only a warning.
func TestDoctorStoppedEngine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	mustCLI(t, "init", "--home", dir)
	dead := "unix://" + filepath.Join(t.TempDir(), "no-dockerd.sock")
	t.Setenv("DOCKER_HOST", dead)
	code, rep, stderr := doctorJSON(t, dir)
	if code != 1 {
		t.Fatalf("doctor with a stopped engine: exit %d, want 1", code)
	}
	c := wantStatus(t, rep, "engine", doctor.Fail, "no Docker engine answers at "+dead)
	if !strings.Contains(c.Fix, "start the Docker engine") {
		t.Errorf("engine fix %q", c.Fix)
	}
	if !strings.Contains(stderr, "engine") {
		t.Errorf("stderr %q does not name the engine", stderr)
	}
	for _, name := range []string{"cgroup", "seccomp", "userns"} {
		for _, ck := range rep.Checks {
			if ck.Name == name {
				t.Errorf("%s checked on an engine that does not answer: %+v", name, ck)
			}
		}
	}

	cfg := filepath.Join(dir, "config.yaml")
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(raw), "executor: docker", "executor: process", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, rep, _ = doctorJSON(t, dir)
	wantStatus(t, rep, "engine", doctor.Warn, "does not use it")
	if code != 0 {
		t.Errorf("doctor, process executor, engine stopped: exit %d, want 0 (failing: %v)", code, rep.Failed())
	}
}

// A home on a filesystem filled past the block store's reserve: a fail naming free space
// and the reserve. The test mounts a small tmpfs (it needs root).
func TestDoctorFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	dir := filepath.Join(mnt, "node")
	mustCLI(t, "init", "--home", dir)

	_, rep, _ := doctorJSON(t, dir)
	wantStatus(t, rep, "disk", doctor.Warn, "reserve") // 8 MiB: low, not yet full

	avail, reserve, err := diskstore.FreeSpace(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, avail-reserve/2), 0o644); err != nil {
		t.Fatal(err)
	}
	code, rep, stderr := doctorJSON(t, dir)
	if code != 1 {
		t.Fatalf("doctor on a full disk: exit %d, want 1", code)
	}
	c := wantStatus(t, rep, "disk", doctor.Fail, "free on the filesystem of "+dir, "reserve of 0.4 MiB", "refuses every block write")
	if !strings.Contains(c.Fix, "evalmesh repo gc") {
		t.Errorf("disk fix %q", c.Fix)
	}
	if !strings.Contains(stderr, "disk") {
		t.Errorf("stderr %q does not name the disk", stderr)
	}
}

func TestDoctorTextSaysWhatToFix(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	mustCLI(t, "init", "--home", dir)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-dockerd.sock"))
	code, out, stderr := cliRun(t, "doctor", "--home", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"FAIL engine", "what to fix:", "FAIL engine: start the Docker engine", "WARN daemon: start it: evalmesh daemon --home " + dir} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "1 check(s) fail") {
		t.Errorf("stderr %q", stderr)
	}
}

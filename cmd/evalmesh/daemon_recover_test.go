package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner"
)

// A daemon started on a home whose node was killed mid-run re-attaches to the still running
// agent, attests the run once when it ends, and leaves nothing to recover.
func TestDaemonRecoversKilledRunAtStart(t *testing.T) {
	dir := t.TempDir()
	h, _, hold, old := killedGatedRun(t, dir)

	daemon := exec.Command(os.Args[0], "daemon", "--home", h, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0")
	daemon.Env = append(os.Environ(), "EVALMESH_TEST_CLI=1")
	// A file, not a pipe: the re-attached agent may hold inherited descriptors open, and
	// Wait would then block on copying a pipe until the agent ends.
	logPath := filepath.Join(dir, "daemon.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	daemon.Stderr = logFile
	stderr := fileText(logPath)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = daemon.Wait(); close(exited) }()
	t.Cleanup(func() {
		os.Remove(hold)
		daemon.Process.Signal(syscall.SIGKILL)
		<-exited
	})
	// This test timed out once in CI (a 60 s wait, which one unknown, not reproduced in 40
	// runs since): a failure now shows what the daemon and the run had got to.
	t.Cleanup(func() {
		if t.Failed() {
			st, err := runner.LoadState(home.Home{Dir: h}, old)
			t.Logf("run %s: state %+v (err %v)\ndaemon log:\n%s", old, st, err, stderr.String())
		}
	})

	testutil.WaitFor(t, 60*time.Second, "the daemon to start recovering the killed run", func() bool {
		return strings.Contains(stderr.String(), "recovering 1 unfinished run(s)")
	})
	if p := runPhase(t, h, old); p != runner.PhaseAgent {
		t.Fatalf("run in phase %s while its agent still runs", p)
	}
	if n := attestations(t, h); n != 0 {
		t.Fatalf("%d attestations before the re-attached agent ended", n)
	}
	os.Remove(hold)
	testutil.WaitFor(t, 60*time.Second, "the recovered run to be attested", func() bool {
		return runPhase(t, h, old) == runner.PhaseDone
	})
	if n := attestations(t, h); n != 1 {
		t.Fatalf("%d attestations, want 1", n)
	}
	// The daemon reports the run once Recover returns, just after the phase is saved.
	testutil.WaitFor(t, 10*time.Second, "the daemon log to report the recovered run", func() bool {
		return strings.Contains(stderr.String(), "recovered run "+old+": attestation bafkrei")
	})
	daemon.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("daemon exit after SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not stop within 60s of SIGTERM")
	}
	if out, e, code := runE2(t, "run", "--home", h, "--recover"); code != 0 || !strings.Contains(out, "no unfinished runs") {
		t.Fatalf("after the daemon: %d %q %q", code, out, e)
	}
}

// fileText reads a file that another process appends to.
type fileText string

func (f fileText) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

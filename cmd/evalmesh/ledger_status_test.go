package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/protocol"
)

// With a daemon running, its store holds the node's runs, `attest import` reports known and
// refused envelopes, and `ledger` reads the store by default, with the same root as
// verifying the folder; `ledger status --json` has the
// fields the issue names.
func TestAttestImportAndLedgerFromTheDaemonStore(t *testing.T) {
	f := newLedgerFixture(t)
	trust, err := os.ReadFile(f.trust)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(home.Home{Dir: f.home}.TrustPath(), trust, 0o644); err != nil {
		t.Fatal(err)
	}
	attDir := filepath.Join(f.home, "attestations")
	if err := os.WriteFile(filepath.Join(attDir, "junk.json"), []byte(`{"payloadType":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFolder, e, code := runE2(t, "ledger", "--home", f.home, "--trust", f.trust, "--tasks", f.tasks, "--bootstrap-rounds", "20", "--allow-process-runs", "--json")
	if code != 0 || !strings.Contains(e, "no daemon running") {
		t.Fatalf("ledger without a daemon: %d %s", code, e)
	}
	runNodeDaemon(t, f.home)

	out, e, code := runE2(t, "attest", "import", "--home", f.home, attDir, "--json")
	if code != 0 {
		t.Fatalf("import: %d %s", code, e)
	}
	var rep node.ImportReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// The daemon took the node's own runs from HOME/attestations when it started, so the
	// import finds them known (not verified again) and refuses the junk.
	if rep.New != 0 || rep.Known != len(f.runs) || rep.Refused != 1 || rep.Refusals[0].Reason != "malformed envelope" {
		t.Fatalf("import report %+v, want %d known and the junk refused", rep, len(f.runs))
	}
	out, _, code = runE2(t, "attest", "import", "--home", f.home, f.runs[0].Attestation)
	if code != 0 || !strings.Contains(out, "0 new, 1 already known, 0 refused") {
		t.Fatalf("second import: %s", out)
	}

	fromStore, e, code := runE2(t, "ledger", "--home", f.home, "--trust", f.trust, "--tasks", f.tasks, "--bootstrap-rounds", "20", "--allow-process-runs", "--json")
	if code != 0 || strings.Contains(e, "no daemon running") {
		t.Fatalf("ledger from the daemon: %d %s", code, e)
	}
	var a, b ledgerJSON
	json.Unmarshal([]byte(fromFolder), &a)
	json.Unmarshal([]byte(fromStore), &b)
	if a.Root == "" || a.Root != b.Root || b.Attestations.Counted != len(f.runs) || len(b.Attestations.Refused) != 0 {
		t.Fatalf("folder root %s, store root %s (%d counted, %d refused)", a.Root, b.Root, b.Attestations.Counted, len(b.Attestations.Refused))
	}

	out, e, code = runE2(t, "ledger", "status", "--home", f.home, "--json")
	if code != 0 {
		t.Fatalf("status: %d %s", code, e)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"network", "ledger_root", "attestations", "peers"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status JSON lacks %q: %s", k, out)
		}
	}
	if st["attestations"].(float64) != float64(len(f.runs)) || !strings.Contains(out, `"peers": []`) {
		t.Fatalf("status: %s", out)
	}
}

func TestLedgerStatusReportsARootMismatchLoudly(t *testing.T) {
	st := node.LedgerStatus{Network: "n", LedgerRoot: "r1", Attestations: 3, Fingerprint: "f",
		Peers: []protocol.PeerHead{
			{PeerID: "A", Status: protocol.StatusAgrees, Agrees: true, LedgerRoot: "r1"},
			{PeerID: "M", Status: protocol.StatusRootMismatch, LedgerRoot: "r2", Attestations: 3, Fingerprint: "f"},
		}}
	var out, errOut bytes.Buffer
	err := printLedgerStatus(&out, &errOut, st, false)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("exit %v, want code 2", err)
	}
	if !strings.Contains(errOut.String(), "ROOT MISMATCH: peer M") || !strings.Contains(errOut.String(), "r2") || !strings.Contains(errOut.String(), "ours is r1") {
		t.Fatalf("stderr: %s", errOut.String())
	}
	if !strings.Contains(out.String(), "peer A lab -: agrees") {
		t.Fatalf("stdout: %s", out.String())
	}
}

// Stale heads are printed as such with their age, and a node whose every peer head is
// stale is told it may be cut off.
func TestLedgerStatusSaysWhenHeadsAreStale(t *testing.T) {
	st := node.LedgerStatus{Network: "n", LedgerRoot: "r1", Attestations: 3, Fingerprint: "f",
		Peers: []protocol.PeerHead{{PeerID: "A", Status: protocol.StatusStale, Stale: true, LedgerRoot: "r1", AgeSeconds: 47}}}
	var out, errOut bytes.Buffer
	if err := printLedgerStatus(&out, &errOut, st, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "peer A lab -: stale head (root r1") || !strings.Contains(out.String(), "47s ago") || strings.Contains(out.String(), "agrees") {
		t.Fatalf("stdout: %s", out.String())
	}
	if !strings.Contains(errOut.String(), "every peer's head is stale") {
		t.Fatalf("stderr: %q", errOut.String())
	}
}

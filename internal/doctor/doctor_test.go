package doctor

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner/docker"
)

func byName(cs []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

// The isolation checks grade what the engine reports; the machines this runs on have one
// engine, so the other engines are given as reports.
func TestEngineIsolationChecks(t *testing.T) {
	dockerCfg, processCfg := home.DefaultConfig(), home.DefaultConfig()
	processCfg.Runner.Executor = "process"
	engine := func(info docker.EngineInfo) func(context.Context) (docker.EngineInfo, error) {
		return func(context.Context) (docker.EngineInfo, error) { return info, nil }
	}
	hardened := docker.EngineInfo{Version: "28.0", CgroupVersion: "2", CgroupDriver: "systemd", Seccomp: "builtin", Rootless: true}
	got := byName(checkEngine(t.Context(), dockerCfg, engine(hardened)))
	for _, n := range []string{"engine", "cgroup", "seccomp", "userns"} {
		if got[n].Status != OK {
			t.Errorf("hardened engine: %s is %s (%s)", n, got[n].Status, got[n].Detail)
		}
	}
	plain := docker.EngineInfo{Version: "20.10", CgroupVersion: "1", Seccomp: "unconfined"}
	got = byName(checkEngine(t.Context(), dockerCfg, engine(plain)))
	for _, n := range []string{"cgroup", "seccomp", "userns"} {
		if got[n].Status != Warn || got[n].Fix == "" {
			t.Errorf("docker executor on a plain engine: %s is %s, fix %q; want a warning with a fix", n, got[n].Status, got[n].Fix)
		}
	}
	rootlessV1 := docker.EngineInfo{Name: docker.EnginePodman, Version: "4.3.1", CgroupVersion: "1", Seccomp: "default", Rootless: true}
	got = byName(checkEngine(t.Context(), dockerCfg, engine(rootlessV1)))
	if c := got["cgroup"]; c.Status != Warn || !strings.Contains(c.Detail, "not enforced") || c.Fix == "" {
		t.Errorf("rootless podman on cgroup v1: cgroup %s (%s), want a warning that limits are not enforced", c.Status, c.Detail)
	}
	if c := got["engine"]; !strings.HasPrefix(c.Detail, "podman 4.3.1 at") {
		t.Errorf("engine detail %q does not name podman", c.Detail)
	}
	got = byName(checkEngine(t.Context(), processCfg, engine(plain)))
	if got["userns"].Status != Info || !strings.Contains(got["userns"].Detail, "does not use the engine") {
		t.Errorf("process executor on a plain engine: userns %s (%s), want info", got["userns"].Status, got["userns"].Detail)
	}
}

func TestAgreementCheck(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	peer := func(s protocol.PeerStatus) protocol.PeerHead {
		return protocol.PeerHead{PeerID: "12D3KooWpeer", Lab: "lab2", NetworkDoc: "bbbb", Status: s}
	}
	for _, tc := range []struct {
		name string
		st   node.LedgerStatus
		want Status
		in   string
	}{
		{"no heads", node.LedgerStatus{NetworkDoc: "aaaa"}, Info, "no peer head"},
		{"agrees", node.LedgerStatus{NetworkDoc: "aaaa", Peers: []protocol.PeerHead{peer(protocol.StatusAgrees), peer(protocol.StatusOtherSet)}}, OK, "2 peer(s) heard"},
		{"other document", node.LedgerStatus{NetworkDoc: "aaaa", Peers: []protocol.PeerHead{peer(protocol.StatusAgrees), peer(protocol.StatusOtherDocument)}}, Warn, "1 of 2 peer(s) run another network document than ours (aaaa): 12D3KooWpeer (lab lab2, document bbbb)"},
		{"root mismatch", node.LedgerStatus{NetworkDoc: "aaaa", LedgerRoot: "r1", Peers: []protocol.PeerHead{peer(protocol.StatusRootMismatch)}}, Warn, "ROOT MISMATCH"},
		{"majority runs another document", node.LedgerStatus{NetworkDoc: "aaaa", Peers: []protocol.PeerHead{peer(protocol.StatusOtherDocument)},
			DocumentMajority: &protocol.DocumentVerdict{Majority: "bbbb", Labs: []string{"lab2", "lab3"}, Mismatch: true}}, Fail, "labs lab2, lab3 (a majority, by their certified nodes' heads) announce document bbbb, this node runs aaaa: it claims nothing"},
		{"majority runs ours", node.LedgerStatus{NetworkDoc: "aaaa", Peers: []protocol.PeerHead{peer(protocol.StatusAgrees)},
			DocumentMajority: &protocol.DocumentVerdict{Majority: "aaaa", Labs: []string{"lab1", "lab2"}}}, OK, "1 peer(s) heard"},
	} {
		c := checkAgreement(h, nil, tc.st)
		if c.Status != tc.want || !strings.Contains(c.Detail, tc.in) {
			t.Errorf("%s: %s %q, want %s naming %q", tc.name, c.Status, c.Detail, tc.want, tc.in)
		}
	}
}

// The draw key check: silent where the document names no draw key and there is no file;
// where it names one for this node's lab, the file must be there, an ed25519 key, the one
// named, and readable by its owner alone; each failure names the file and the fix.
func TestDrawKeyCheck(t *testing.T) {
	f, err := attestgen.New("acme")
	if err != nil {
		t.Fatal(err)
	}
	h := home.Home{Dir: t.TempDir()}
	if err := os.WriteFile(h.CertPath(), f.Cert.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	newKey := func() (crypto.PrivKey, []byte, string) {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := crypto.MarshalPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := attest.DrawKeyString(k)
		if err != nil {
			t.Fatal(err)
		}
		return k, raw, pub
	}
	_, drawRaw, drawPub := newKey()
	_, otherRaw, otherPub := newKey()
	named := network{doc: &protocol.NetworkDoc{Labs: []protocol.NetworkLab{
		{Name: "acme", Key: base64.StdEncoding.EncodeToString(f.Lab.Pub), DrawKey: drawPub}}}}
	none := network{doc: &protocol.NetworkDoc{Labs: []protocol.NetworkLab{
		{Name: "acme", Key: base64.StdEncoding.EncodeToString(f.Lab.Pub)}}}}
	path := h.DrawKeyPath()
	write := func(raw []byte, mode os.FileMode) {
		t.Helper()
		os.Remove(path)
		if err := os.WriteFile(path, raw, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}

	if c, ok := checkDrawKey(h, none); ok {
		t.Errorf("no draw key named and no file: a check was made: %+v", c)
	}
	c, ok := checkDrawKey(h, named)
	if !ok || c.Status != Fail || !strings.Contains(c.Detail, path) || !strings.Contains(c.Detail, drawPub) || !strings.Contains(c.Fix, path) || !strings.Contains(c.Fix, "chmod 600") {
		t.Errorf("named draw key, no file: %+v; want a failure naming %s, the key, and the fix", c, path)
	}
	write(drawRaw, 0o600)
	if c, ok := checkDrawKey(h, named); !ok || c.Status != OK || !strings.Contains(c.Detail, drawPub) {
		t.Errorf("the named draw key, mode 0600: %+v; want ok", c)
	}
	write(drawRaw, 0o644)
	if c, ok := checkDrawKey(h, named); !ok || c.Status != Warn || c.Fix != "chmod 600 "+path {
		t.Errorf("the named draw key readable by all: %+v; want a warning to chmod it", c)
	}
	write(otherRaw, 0o600)
	if c, ok := checkDrawKey(h, named); !ok || c.Status != Fail || !strings.Contains(c.Detail, otherPub) || !strings.Contains(c.Detail, drawPub) || !strings.Contains(c.Fix, path) {
		t.Errorf("another key than the one named: %+v; want a failure naming both keys and the file", c)
	}
	write([]byte("not a key"), 0o600)
	if c, ok := checkDrawKey(h, named); !ok || c.Status != Fail || !strings.Contains(c.Detail, path) {
		t.Errorf("a corrupt key file: %+v; want a failure naming the file", c)
	}
	write(otherRaw, 0o640)
	if c, ok := checkDrawKey(h, none); !ok || c.Status != Warn {
		t.Errorf("a key file readable by the group, none named: %+v; want a warning", c)
	}
	write(otherRaw, 0o600)
	if c, ok := checkDrawKey(h, none); !ok || c.Status != Info || !strings.Contains(c.Detail, "names no draw key") {
		t.Errorf("a key file, none named: %+v; want info that it is not used", c)
	}
}

// The clock check grades the largest offset among fresh peer heads that carry a time and
// names that peer; stale heads and heads without a time are left out.
func TestClockCheck(t *testing.T) {
	off := func(s float64) *float64 { return &s }
	peer := func(id string, o *float64, stale bool) protocol.PeerHead {
		return protocol.PeerHead{PeerID: id, Lab: "lab-" + id, ClockOffsetSeconds: o, Stale: stale}
	}
	for _, tc := range []struct {
		name  string
		peers []protocol.PeerHead
		want  Status
		in    string
	}{
		{"no heads", nil, Info, "unknown"},
		{"no head carries a time", []protocol.PeerHead{peer("old", nil, false)}, Info, "unknown"},
		{"in sync", []protocol.PeerHead{peer("p1", off(0.3), false), peer("p2", off(-1.2), false)}, OK, "p2 (lab lab-p2) runs 1.2 s behind"},
		{"same clock", []protocol.PeerHead{peer("p1", off(-0.004), false)}, OK, "p1 (lab lab-p1) runs within 0.1 s of"},
		{"just under the warning", []protocol.PeerHead{peer("p1", off(4.9), false)}, OK, "p1"},
		{"warn from 5 s", []protocol.PeerHead{peer("p1", off(1), false), peer("p2", off(5), false)}, Warn, "p2 (lab lab-p2) runs 5.0 s ahead of"},
		{"behind by 30 s", []protocol.PeerHead{peer("p1", off(-30), false), peer("p2", off(2), false)}, Warn, "leases and witness times may be misjudged"},
		{"fail from 60 s", []protocol.PeerHead{peer("p1", off(2), false), peer("p3", off(-61), false)}, Fail, "p3 (lab lab-p3) runs 61.0 s behind"},
		{"a stale head is not counted", []protocol.PeerHead{peer("gone", off(600), true), peer("p1", off(0.5), false)}, OK, "against 1 peer(s): p1"},
	} {
		c := checkClock(node.LedgerStatus{Peers: tc.peers})
		if c.Status != tc.want || !strings.Contains(c.Detail, tc.in) {
			t.Errorf("%s: %s %q, want %s naming %q", tc.name, c.Status, c.Detail, tc.want, tc.in)
		}
		if (c.Status == Warn || c.Status == Fail) != strings.Contains(c.Fix, "NTP") {
			t.Errorf("%s: %s with fix %q", tc.name, c.Status, c.Fix)
		}
	}
	if c := checkClock(node.LedgerStatus{Peers: []protocol.PeerHead{peer("p3", off(-61), false)}}); !strings.Contains(c.Detail, "claims, leases and certificate windows are misjudged") {
		t.Errorf("fail detail %q does not say what goes wrong", c.Detail)
	}
}

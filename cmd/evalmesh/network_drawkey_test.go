package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
)

// `network draw-key` writes a draw key (0600) and names it as the lab's in the document,
// clearing the signatures; run again with the same file it names the same key; `show` lists
// it. A node of that lab draws with HOME/draw.key, refuses to start without it or with
// another key, and a node of a lab without one draws with its node key.
func TestNetworkDrawKeyCLI(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"acme", "beta"} {
		mustCLI(t, "lab", "init", "--dir", filepath.Join(dir, n), "--name", n)
	}
	doc := filepath.Join(dir, "network.json")
	mustCLI(t, "network", "create", "--network", "airs", "--out", doc, "--replication", "1", "--lab", filepath.Join(dir, "acme"), "--lab", filepath.Join(dir, "beta"))
	mustCLI(t, "network", "sign", doc, "--lab", filepath.Join(dir, "acme"))
	keyFile := filepath.Join(dir, "acme", "draw.key")
	out := mustCLI(t, "network", "draw-key", doc, "--lab", filepath.Join(dir, "acme"), "--key-file", keyFile)
	if !strings.Contains(out, "wrote "+keyFile) || !strings.Contains(out, "HOME/draw.key") {
		t.Errorf("draw-key said %q: want the file written and where it goes", out)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("draw key file: %v, mode %v; want 0600", err, fi)
	}
	d, err := networkRead(doc)
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := d.Lab("acme")
	key, err := home.ReadKey(keyFile, "draw key")
	if err != nil {
		t.Fatal(err)
	}
	if pub, _ := attest.DrawKeyString(key); acme.DrawKey != pub || len(d.Signatures) != 0 {
		t.Fatalf("document names %q (signatures %d), want the file's key %q and no signatures", acme.DrawKey, len(d.Signatures), pub)
	}
	hash := d.Hash()
	if out := mustCLI(t, "network", "draw-key", doc, "--name", "acme", "--key-file", keyFile); !strings.Contains(out, "read "+keyFile) {
		t.Errorf("draw-key with an existing file said %q: want it read", out)
	}
	if d2, _ := networkRead(doc); d2.Hash() != hash {
		t.Error("naming the same draw key again moved the hash")
	}
	var s networkShowOut
	if err := json.Unmarshal([]byte(mustCLI(t, "network", "show", doc, "--json")), &s); err != nil {
		t.Fatal(err)
	}
	for _, l := range s.Labs {
		if (l.Name == "acme") != (l.DrawKey != "") {
			t.Errorf("show: lab %s draw key %q", l.Name, l.DrawKey)
		}
	}

	acmeLab := attest.LabID(mustLabPub(t, filepath.Join(dir, "acme")))
	h := home.Home{Dir: t.TempDir()}
	if _, err := nodeDrawKey(h, d, acmeLab); err == nil || !strings.Contains(err.Error(), h.DrawKeyPath()) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("no draw.key: %v, want the missing file named", err)
	}
	other := filepath.Join(dir, "other.key")
	mustCLI(t, "network", "draw-key", doc, "--name", "beta", "--key-file", other)
	raw, _ := os.ReadFile(other)
	if err := os.WriteFile(h.DrawKeyPath(), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeDrawKey(h, d, acmeLab); err == nil || !strings.Contains(err.Error(), "but the network document names") {
		t.Errorf("another lab's draw key: %v, want it refused", err)
	}
	raw, _ = os.ReadFile(keyFile)
	if err := os.WriteFile(h.DrawKeyPath(), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := nodeDrawKey(h, d, acmeLab); err != nil || !got.Equals(key) {
		t.Errorf("the lab's draw key: %v, %v", got, err)
	}
	betaLab := attest.LabID(mustLabPub(t, filepath.Join(dir, "beta")))
	if got, err := nodeDrawKey(h, d, betaLab); err != nil || got != nil {
		t.Errorf("a lab without a draw key in the document: %v, %v; want node-key draws", got, err)
	}
}

func mustLabPub(t *testing.T, dir string) []byte {
	t.Helper()
	info, err := attest.LoadLabInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := attest.DecodeBase64(info.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

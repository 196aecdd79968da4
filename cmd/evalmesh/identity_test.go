package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// cliRun runs the CLI in-process and returns its exit code, stdout and stderr.
func cliRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestInitCreatesPrivateIdentityAndRefusesOverwrite(t *testing.T) {
	h := filepath.Join(t.TempDir(), "node")
	code, out, stderr := cliRun(t, "init", "--home", h, "--json")
	if code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	var res struct {
		PeerID string `json:"peer_id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.PeerID == "" {
		t.Fatalf("init --json: %q (%v)", out, err)
	}
	keyPath := filepath.Join(h, "identity.key")
	st, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("identity.key mode %v, want 0600", st.Mode().Perm())
	}
	before, _ := os.ReadFile(keyPath)
	key, err := crypto.UnmarshalPrivateKey(before)
	if err != nil || key.Type() != crypto.Ed25519 {
		t.Fatalf("identity is not an ed25519 libp2p key: %v", err)
	}

	code, _, stderr = cliRun(t, "init", "--home", h)
	if code == 0 {
		t.Fatal("second init succeeded; it must refuse to overwrite the identity")
	}
	if !strings.Contains(stderr, "already initialised") || !strings.Contains(stderr, keyPath) {
		t.Fatalf("refusal does not name the identity: %q", stderr)
	}
	after, _ := os.ReadFile(keyPath)
	if !bytes.Equal(before, after) {
		t.Fatal("second init changed the identity")
	}
}

func TestIDJSONPrintsPeerIDAndRawPublicKey(t *testing.T) {
	h := filepath.Join(t.TempDir(), "node")
	if code, _, stderr := cliRun(t, "init", "--home", h); code != 0 {
		t.Fatal(stderr)
	}
	code, out, stderr := cliRun(t, "id", "--home", h, "--json")
	if code != 0 {
		t.Fatalf("id: %s", stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("id --json is not JSON: %q", out)
	}
	pidStr, _ := res["peer_id"].(string)
	pkStr, _ := res["public_key"].(string)
	raw, err := base64.StdEncoding.DecodeString(pkStr)
	if err != nil || len(raw) != 32 {
		t.Fatalf("public_key %q is not base64 of 32 raw bytes", pkStr)
	}
	// The key printed is the key the peer ID names, and the one on disk.
	pid, err := peer.Decode(pidStr)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := crypto.UnmarshalEd25519PublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !pid.MatchesPublicKey(pub) {
		t.Fatal("public_key does not match peer_id")
	}
	disk, _ := os.ReadFile(filepath.Join(h, "identity.key"))
	key, _ := crypto.UnmarshalPrivateKey(disk)
	if !key.GetPublic().Equals(pub) {
		t.Fatal("public_key is not the identity's")
	}

	// Without init: an error that says what to do.
	code, _, stderr = cliRun(t, "id", "--home", filepath.Join(t.TempDir(), "none"))
	if code == 0 || !strings.Contains(stderr, "evalmesh init") {
		t.Fatalf("id on an empty home: %d %q", code, stderr)
	}
}

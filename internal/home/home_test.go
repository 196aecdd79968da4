package home

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInitCreatesPrivateIdentityAndRefusesOverwrite(t *testing.T) {
	h := Home{Dir: filepath.Join(t.TempDir(), "home")}
	id, err := h.Init()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(h.IdentityPath())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity %v mode %v, want 0600", err, st.Mode().Perm())
	}
	key, _ := os.ReadFile(h.IdentityPath())
	if _, err := h.Init(); !errors.Is(err, ErrExists) {
		t.Fatalf("second Init = %v, want ErrExists", err)
	}
	if again, _ := os.ReadFile(h.IdentityPath()); string(again) != string(key) {
		t.Fatal("second Init changed the identity")
	}
	if got, err := h.PeerID(); err != nil || got != id {
		t.Fatalf("PeerID = %s, %v; Init said %s", got, err, id)
	}
}

func TestIdentityOfUninitialisedHomeSaysWhatToRun(t *testing.T) {
	h := Home{Dir: t.TempDir()}
	_, err := h.Identity()
	if !errors.Is(err, ErrNotInitialised) || !strings.Contains(err.Error(), "evalmesh init --home "+h.Dir) {
		t.Fatalf("Identity() = %v", err)
	}
}

func TestDefaultConfigKeepsTrafficOnLoopback(t *testing.T) {
	c := DefaultConfig()
	if c.MDNS || len(c.Bootstrap) != 0 || !strings.HasPrefix(c.API, "127.0.0.1:") {
		t.Fatalf("default config reaches beyond loopback: %+v", c)
	}
	for _, a := range c.Listen {
		if !strings.HasPrefix(a, "/ip4/127.0.0.1/") {
			t.Fatalf("default listen address %s is not loopback", a)
		}
	}
}

func TestConfigRefusesUnknownFieldByName(t *testing.T) {
	h := Home{Dir: t.TempDir()}
	os.WriteFile(h.ConfigPath(), []byte("netwrok: x\n"), 0o644)
	if _, err := h.Config(); err == nil || !strings.Contains(err.Error(), "netwrok") {
		t.Fatalf("Config() = %v, want an error naming netwrok", err)
	}
	os.WriteFile(h.ConfigPath(), []byte("network: lab-a\n"), 0o644)
	c, err := h.Config()
	if err != nil || c.Network != "lab-a" || c.API != DefaultConfig().API {
		t.Fatalf("Config() = %+v, %v; want network lab-a and default api", c, err)
	}
}

func TestWriteFileExclusiveAndAtomic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := WriteFileExclusive(p, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileExclusive(p, []byte("two"), 0o640); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second exclusive write = %v, want ErrExist", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("content %q after refused write", b)
	}
	if err := WriteFileAtomic(p, []byte("three"), 0o640); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != "three" || st.Mode().Perm() != 0o640 {
		t.Fatalf("after atomic replace: %q mode %v", b, st.Mode().Perm())
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Fatalf("temp files left behind: %v", ents)
	}
}

// The layout is on disk in every home there is: a renamed entry strands what old homes hold,
// so the names are checked literally here, and no two entries may share one.
func TestLayoutSpellsEachEntryOnce(t *testing.T) {
	h := Home{Dir: filepath.Join("/", "h")}
	want := map[string]string{
		h.IdentityPath(): "identity.key", h.ConfigPath(): "config.yaml", h.CertPath(): "node-cert.json",
		h.TrustPath(): "trust.yaml", h.NetworkDocPath(): "network.json", h.LabAgeKeyPath(): "lab-age.key",
		h.APIPath(): "api", h.APITokenPath(): "api.token",
		h.BlocksDir(): "blocks", h.PackBlocksDir(): "blocks-pack", h.DatastoreDir(): "datastore",
		h.StoreDir(): "store", h.BundlesDir(): "bundles", h.RunsDir(): "runs", h.RescoresDir(): "rescores",
		h.AttestationsDir(): "attestations", h.ObjectsDir(): "objects", h.PeersPath(): "peers.json",
	}
	if len(want) != 18 {
		t.Fatalf("%d distinct paths for 18 entries: two entries share a name", len(want))
	}
	for path, name := range want {
		if path != filepath.Join(h.Dir, name) {
			t.Errorf("%s, want %s in the home", path, name)
		}
	}
}

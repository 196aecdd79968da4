package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/scoring"
)

// The daemon's scoring options come from HOME/network.json, ledger.elo_bootstrap
// included; without the document they are the defaults.
func TestNetworkPolicyEloBootstrap(t *testing.T) {
	h, err := home.Resolve(filepath.Join(t.TempDir(), "home"))
	if err != nil {
		t.Fatal(err)
	}
	np, err := loadNetworkPolicy(h, "airs")
	if err != nil || np.Scoring.EloBootstrap != "" {
		t.Fatalf("no document: %+v, %v", np.Scoring, err)
	}
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	doc := `{"version":1,"network":"airs","labs":[],"ledger":{"elo_bootstrap":"tasks-linearised"}}`
	if err := os.WriteFile(h.NetworkDocPath(), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	np, err = loadNetworkPolicy(h, "airs")
	if err != nil || np.Scoring.EloBootstrap != scoring.EloBootstrapTasksLinearised || np.Scoring.BootstrapRounds != 100 {
		t.Fatalf("with the document: %+v, %v", np.Scoring, err)
	}
}

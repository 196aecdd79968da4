package node

import (
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/internal/home"
)

// TestDefaultsServeNothingThatReachesOut: under the default config the host serves none of
// the protocols that come with relays (circuit relay), hole punching (DCUtR) or AutoNAT, and
// mDNS is not started, so nothing makes the node dial or announce beyond the peers a lab
// configures. (Checked by what the host registers; no packet is sent anywhere.)
func TestDefaultsServeNothingThatReachesOut(t *testing.T) {
	cfg := home.DefaultConfig()
	for i, a := range cfg.Listen {
		cfg.Listen[i] = strings.Replace(strings.Replace(a, "/tcp/4201", "/tcp/0", 1), "/udp/4201", "/udp/0", 1)
	}
	n := startNode(t, Options{Config: &cfg, API: "127.0.0.1:0"})
	var protos []string
	for _, p := range n.Host().Mux().Protocols() {
		protos = append(protos, string(p))
	}
	for _, p := range protos {
		for _, bad := range []string{"/libp2p/circuit/", "/libp2p/dcutr", "/libp2p/autonat/", "/ipfs/kad/"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("default node serves %s (all: %v)", p, protos)
			}
		}
	}
	if n.mdnsSvc != nil {
		t.Error("mDNS started under the default config")
	}
	if len(cfg.Bootstrap) != 0 {
		t.Errorf("default bootstrap list is not empty: %v", cfg.Bootstrap)
	}
	t.Logf("protocols served: %v", protos)
}

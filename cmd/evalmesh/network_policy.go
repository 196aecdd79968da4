package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// networkPolicy is what every node of a network must compute its ledger with.
type networkPolicy struct {
	Doc     *protocol.NetworkDoc // nil without HOME/network.json
	Trust   *attest.TrustStore   // the document's labs; nil without a document
	Policy  attest.AcceptPolicy
	Scoring scoring.Options
}

// loadNetworkPolicy reads HOME/network.json: the network's labs and ledger options. Without
// it, the node uses `evalmesh ledger`'s defaults (isolated runs only, no replication).
func loadNetworkPolicy(h home.Home, network string) (networkPolicy, error) {
	np := networkPolicy{Scoring: scoring.Options{Worst: "population", BootstrapRounds: 100}}
	path := h.NetworkDocPath()
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return np, nil
	}
	if err != nil {
		return np, err
	}
	doc, err := protocol.ParseNetworkDoc(raw)
	if err != nil {
		return np, fmt.Errorf("%s: %w", path, err)
	}
	if doc.Network != network {
		return np, fmt.Errorf("%s is the document of network %q, but config network: is %q: fix one of them", path, doc.Network, network)
	}
	if np.Trust, err = doc.TrustStore(); err != nil {
		return np, err
	}
	np.Doc = doc
	np.Scoring = doc.ScoringOptions()
	np.Policy = doc.AcceptPolicy()
	return np, nil
}

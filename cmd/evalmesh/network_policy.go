package main

import (
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/scoring"
)

// networkPolicy is what every node of a network must compute its ledger with.
type networkPolicy struct {
	Policy  attest.AcceptPolicy
	Scoring scoring.Options
}

// loadNetworkPolicy reads the network's ledger options for home h.
func loadNetworkPolicy(h home.Home) (networkPolicy, error) {
	return networkPolicy{Scoring: scoring.Options{Worst: "population", BootstrapRounds: 100}}, nil
}

package demo

import (
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
)

// demoAcceptPolicy is what the demo network counts: a run once one other lab's re-score
// agrees with it, and process-executor runs too (the demo has no Docker; a real network's
// default counts only isolated runs).
func demoAcceptPolicy() attest.AcceptPolicy {
	return attest.AcceptPolicy{Replication: 1}
}

// demoLedgerFlags are the `evalmesh ledger` flags that select the same policy.
var demoLedgerFlags = []string{"--replication", "1"}

func peerIDOfKey(k crypto.PrivKey) (string, error) {
	id, err := peer.IDFromPrivateKey(k)
	return id.String(), err
}

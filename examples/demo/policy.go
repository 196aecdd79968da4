package demo

import (
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// demoLedgerFlags are the `evalmesh ledger` flags that select the same policy.
var demoLedgerFlags = []string{"--replication", "1"}

func peerIDOfKey(k crypto.PrivKey) (string, error) {
	id, err := peer.IDFromPrivateKey(k)
	return id.String(), err
}

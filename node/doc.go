// Package node owns the wiring of a running evalmesh daemon: the libp2p host, the persistent
// blockstore and datastore, bitswap, pinning, bundle transfer, pubsub, and the local HTTP API
// the CLI talks to.
//
// It holds no scoring or protocol logic; it calls into those packages and does their I/O.
package node

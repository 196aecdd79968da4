// Package node owns the wiring of a running evalmesh daemon: the libp2p host, the persistent
// blockstore and datastore, bitswap, pinning, bundle transfer, and the local HTTP API the CLI
// talks to.
//
// New starts a node for a home; Run is the daemon's main function (node plus HTTP API, the
// API address written to HOME/api, clean shutdown); Client is the API's Go client. The API's
// server side is package node/api, a handler over interfaces the node implements (api.go
// here adapts it); its answer types keep their names here as aliases.
//
// Storage: blocks live in the block store of node/diskstore the config names (pack by
// default, under HOME/blocks-pack; flat under HOME/blocks). Pins live in a pebble datastore
// under HOME/datastore; the pinner's records are written unsynced and made durable by the
// synced flush that ends each pin change (pinStore in node.go), so a repair round costs a
// few fsyncs, not several per pin. The node Syncs the block store before it records a pin,
// so a pinned DAG's blocks are on stable storage.
// Concurrency: a Node is safe for concurrent use; the stores serialise writers.
//
// Transfer: Fetch gets a whole DAG from the connected peers over the streaming protocol of
// node/xfer (split across peers, each block verified against its CID), and falls back to
// bitswap when no peer speaks it or the streaming transfer fails. There is no content
// routing: only connected peers are asked.
//
// Network: the host listens where the config says (127.0.0.1 by default) and never turns
// on NAT port mapping, relays, hole punching or AutoNAT probes; mDNS and bootstrap peers only
// when configured; with a private-network key it runs TCP only (QUIC cannot carry a PSK).
// Peers it has been connected to are kept in HOME/peers.json and re-dialled with backoff
// while not connected (redial.go: one goroutine owns the schedule); connects, disconnects
// and running alone go to Options.Warnf.
//
// Verified store and anti-entropy: Store (HOME/store, its own pebble database) keeps the
// attestation and campaign sets, each envelope verified once on arrival and refusals kept
// apart with their reason; the Syncer of node/syncer serves and runs
// /evalmesh/<network>/sync/1.0.0 (range-based reconciliation from protocol/recon, then
// batched verified fetch and push on the same stream), and its Heads (wired in heads.go;
// LedgerStatus here) say whether peers agree and start a sync when their sets differ.
// docs/protocol-sync.md is the spec.
//
// Pubsub: NewPubSub runs gossipsub (StrictSign, content-addressed message IDs, queues sized
// for bursts) on the host's existing connections, one topic per kind with the validator the
// caller passes from package protocol; every verdict and drop is counted (PubSub.Counters).
// docs/protocol.md is the wire spec. A PubSub is safe for concurrent use.
//
// The mesh is the daemon's main loop in a network, package node/mesh, which does not import
// node: Run starts it when node.Options.Mesh answers with options (StartMesh fills in the
// node's values and hands it the node and its store through the adapters of
// mesh_wiring.go); Node.Mesh returns it for the API, the dashboard and /metrics. The node
// keeps the mesh's gossipsub (its counters are on /metrics).
//
// verify-ledger's re-verification is package node/verify, which does not import node either:
// VerifyLedger starts the node it runs on (no bootstrap, no automatic sync, a gossipsub that
// hears heads only) and hands it over as verify.Node (verifyledger.go).
//
// It holds no scoring or protocol logic; it calls into those packages and does their I/O.
package node

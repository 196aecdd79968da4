// Package node owns the wiring of a running evalmesh daemon: the libp2p host, the persistent
// blockstore and datastore, bitswap, pinning, bundle transfer, and the local HTTP API the CLI
// talks to.
//
// New starts a node for a home; Run is the daemon's main function (node plus HTTP API, the
// API address written to HOME/api, clean shutdown); Client is the API's Go client.
//
// Storage: by default blocks are appended to 1 GiB segment files under HOME/blocks-pack
// with a checksummed index log (packStore: no inode per block, which cost the flat store
// half of a receiving daemon's CPU); config `blockstore: flat` keeps one file per block
// under HOME/blocks (flatStore, kubo's flatfs layout). Both beat pebble for 256 KiB blocks
// and fail a write on a full disk cleanly. Pins live in a pebble datastore under
// HOME/datastore that syncs every write. Blocks are made durable (segments, then index;
// or the written files, then their folders) before a pin that needs them is recorded.
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
// apart with their reason; Syncer serves and runs /evalmesh/<network>/sync/1.0.0 (range-based
// reconciliation from protocol/recon, then batched verified fetch and push on the same
// stream); heads (SignedHead, ObserveHead, LedgerStatus) say whether peers agree.
// docs/protocol-sync.md is the spec.
//
// Pubsub: NewPubSub runs gossipsub (StrictSign, content-addressed message IDs, queues sized
// for bursts) on the host's existing connections, one topic per kind with the validator the
// caller passes from package protocol; every verdict and drop is counted (PubSub.Counters).
// docs/protocol.md is the wire spec. A PubSub is safe for concurrent use.
//
// The mesh (StartMesh, node.Options.Mesh) is the daemon's main loop in a network: it
// subscribes to the network's topics, feeds protocol's claim machine and carries out its
// actions (publish, run with package runner, abort), stores the submission and logs as
// blocks, gossips attestations, re-scores the runs protocol.RescorersDue assigns to its
// lab, recomputes the ledger from the store (debounced, off the ingestion path) and
// announces heads. One goroutine owns its state; everything else hands it closures.
//
// It holds no scoring or protocol logic; it calls into those packages and does their I/O.
package node

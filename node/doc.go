// Package node owns the wiring of a running evalmesh daemon: the libp2p host, the persistent
// blockstore and datastore, bitswap, pinning, bundle transfer, and the local HTTP API the CLI
// talks to.
//
// New starts a node for a home; Run is the daemon's main function (node plus HTTP API, the
// API address written to HOME/api, clean shutdown); Client is the API's Go client.
//
// Storage: blocks live one file per block under HOME/blocks (flatStore: 3x pebble's write
// and read speed for 256 KiB blocks, and a full disk fails a write cleanly); pins live in a
// pebble datastore under HOME/datastore that syncs every write. Blocks are flushed to disk
// (syncfs) before a pin that needs them is recorded.
//
// Transfer: Fetch gets a whole DAG from the connected peers over the streaming protocol of
// node/xfer (split across peers, each block verified against its CID), and falls back to
// bitswap when no peer speaks it or the streaming transfer fails. There is no content
// routing: only connected peers are asked.
//
// Network: the host listens where the config says (127.0.0.1 by default) and never turns
// on NAT port mapping, relays, hole punching or AutoNAT probes; mDNS and bootstrap peers only
// when configured; with a private-network key it runs TCP only (QUIC cannot carry a PSK).
//
// It holds no scoring or protocol logic; it calls into those packages and does their I/O.
package node

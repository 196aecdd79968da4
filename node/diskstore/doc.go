// Package diskstore owns the node's block stores on local disk: Pack (the default: blocks
// appended to 1 GiB segment files under HOME/blocks-pack with a checksummed index log; no
// inode per block, which cost the flat store half of a receiving daemon's CPU) and Flat
// (config `blockstore: flat`: one file per block under HOME/blocks, kubo's flatfs layout).
// Both beat pebble for 256 KiB blocks (BenchmarkBlockstore) and fail a write on a full
// disk cleanly: ErrDiskFull, and a free-space reserve (FreeSpace) kept for the node's
// metadata store. Open picks the kind a home's config names and refuses a home whose blocks
// are in the other kind.
//
// Durability: Put makes a block readable at once; Sync makes every block put so far durable
// (segments, then index; or the written files, then their folders). Callers Sync before they
// record anything that needs the blocks (the node, before a pin).
//
// Concurrency: both stores are safe for concurrent use. Writers are serialised (Pack: one
// appender; Flat: per-file temporary names and renames); reads take no lock on the data; one
// Sync runs at a time and returns only after every write before it is durable. Compact
// (Pack) runs beside readers and writers.
//
// The package is named for where blocks go (a disk), not blockstore, so that it does not
// shadow boxo's blockstore package, whose Blockstore interface both stores implement and
// which every caller imports beside it. It imports no other evalmesh package but
// internal/home.
package diskstore

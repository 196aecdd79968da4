// Package xfer moves a whole content-addressed DAG (a task bundle) between libp2p peers over
// the stream protocol /evalmesh/xfer/1.0.0 (specified in docs/transfer-protocol.md).
//
// Bitswap asks for blocks one message at a time and waits between messages, which caps a
// bundle of small files at a few MB/s. Here the requester names subtree roots once and the
// server streams every block of those subtrees back in a fixed depth-first order, so a
// transfer costs one round trip per batch instead of one per block. The requester walks the
// same order as blocks arrive, so it always knows the CID the next block must hash to: each
// block is verified against a CID that came from an already verified parent, and a peer
// cannot inject, reorder or substitute blocks.
//
// Fetch splits the DAG's top-level subtrees across several peers; a peer that errs, leaves or
// sends a block that does not match its CID is dropped for the transfer and the subtrees it
// still owed are fetched from the remaining peers.
package xfer

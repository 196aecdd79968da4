// Package vstore is the node's verified store: the two synced sets (attestations and
// campaigns) of signed envelopes this node accepted, each verified once on entry (gossip,
// sync, a local run, a file import) under the store's trust store, or taken with the value
// its caller verified it into (Set.AddVerified: a campaign the gossip validator verified, or
// an attestation it verified under the very trust store object the store verifies under),
// and kept with its ID,
// its verdict and an order key from its signed statement, and the verified value of each
// attestation (attest.Verified) kept in memory for the ledger, which recomputes from those
// values instead of the bytes. Refused envelopes are kept apart with their reason and never
// served or forwarded. It owns the pebble database under HOME/store and nothing else: it
// starts no host, reads no home file and does not import node.
//
// It is its own pebble database, not a prefix of HOME/datastore: that one belongs to the
// pinner behind go-datastore and syncs every single write, while the store commits a whole
// sync batch (a thousand envelopes) in one synced pebble batch and reads its order keys by
// raw prefix iteration when it opens.
//
// Keys, per set (set byte 'a' attestations, 'c' campaigns):
//
//	set 'e' ID(32)          → time(8, big-endian) source(1) envelope bytes   accepted
//	set 'o' time(8) ID(32)  → empty                                          order index
//	set 'r' ID(32)          → JSON refusedRecord                             refused
//
// Opening reads only the order index into memory (the reconciliation index): nothing is
// verified again after a restart. The verified value of each attestation is kept once made
// (on arrival, or restored from the bytes once after a restart: Store.Values) and is what
// OnNew hands on and the ledger recomputes from; values are shared and never modified.
//
// Concurrency: every method of Store and Set is safe for concurrent use. Adds to one set
// verify in parallel and commit one batch at a time (Set.addMu); readers (Get, GetMany, Has,
// Each, Len, Fingerprint, View) never wait for a verification. SetTrust may be called at
// any time: an Add already verifying finishes under the trust store it started with.
// Values and Ledger serialise on the kept values. OnNew callbacks run on the goroutine of
// the Add that committed the batch, after it is on disk and in the index, while that set's
// commit lock is held: they may read either set and the store, must return quickly (a sync
// session or a gossip handler waits on them) and must not Add to the same set (that Add
// would wait for the lock the callback's Add holds); hand the work to another goroutine
// instead, as the mesh does. Callbacks must not modify the envelopes or values they get.
package vstore

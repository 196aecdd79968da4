// Package tasks owns the task bundle (docs/bundle-format.md): its layout on disk
// (task.yaml, prompt.md, public/, private/, evaluate/, source/), the task.yaml schema and
// its validation (every bad field named, with what is expected), the import of upstream
// AIRS-Bench task folders, packing a folder into a UnixFS DAG (CIDv1, raw leaves,
// sha2-256, 256 KiB chunks, balanced layout, HAMT folders above 256 KiB — the root CID
// `ipfs add -r --cid-version=1` gives) and back, CAR files, the bundle check (gold
// submission scores the optimum, permuted gold strictly worse), sealed bundles (private/
// encrypted with age under a per-bundle data key, seal.go; the keys' grants are attest's),
// and safe unpacking of untrusted DAGs: everything is checked before a byte is written,
// and a refusal leaves nothing behind.
//
// It never talks to the network: DAGs are read from and written to whatever block store
// the caller hands in. It does not import package scoring; Check takes a ScoreFunc (the
// CLI passes scoring.ScoreCSV). Functions are safe for concurrent use on distinct inputs.
package tasks

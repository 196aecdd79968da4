// Package tasks owns the task bundle: its layout on disk (task.yaml, prompt.md, public/,
// private/, evaluate/, source/), the task.yaml schema and its validation, the import of
// upstream AIRS-Bench task folders, packing a folder into a UnixFS DAG (CIDv1, raw leaves,
// sha2-256, 256 KiB chunks — the same root CID kubo gives) and back, CAR files, and safe
// unpacking of untrusted DAGs.
//
// It never talks to the network: DAGs are read from and written to whatever block store the
// caller hands in. Functions are safe for concurrent use on distinct inputs.
package tasks

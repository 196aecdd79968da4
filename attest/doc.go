// Package attest owns attestations: in-toto Statements v1 inside DSSE envelopes signed with
// ed25519, the evalmesh run, re-score, witness, grant and audit predicates (an audit's VRF
// draw checked against its node's key, internal/ecvrf), lab keys, node certificates and
// revocations, the trust store, verification with a reason for every refusal, equivocation
// evidence, witness, claim and release records and the holder of each attempt they imply
// (AttemptHolders, a pure function of the claim records), and the verified-envelope cache. docs/attestation-format.md and
// docs/trust-format.md describe the formats.
//
// It knows nothing of pubsub or the network. Verify and Reconcile are functions of their
// inputs (the clock is a parameter; the ledger passes none, checking each certificate at the
// time its statement claims: VerifyOptions.AtClaimedTime); the trust store keeps only caches of work already done
// (checked certificates, expanded keys), and Cache remembers verdicts by envelope ID. Both
// are safe for concurrent readers.
//
// Verification is on the hot path of every node (each attestation of the federation passes
// through it), so the common shapes of envelope and statement are decoded by small
// reflection-free parsers that decline anything unusual to encoding/json; fuzz targets check
// the two always agree. Signatures are checked under ZIP-215 rules with curve25519-voi, the
// same in single and batch verification, so every node reaches the same verdict.
package attest

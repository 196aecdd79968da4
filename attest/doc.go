// Package attest owns attestations: in-toto Statements v1 inside DSSE envelopes signed with
// ed25519, the evalmesh run and re-score predicates, lab keys, node certificates and
// revocations, the trust store, verification with a reason for every refusal, equivocation
// evidence, and the verified-envelope cache.
//
// It knows nothing of pubsub or the network. Verification functions are pure over their
// inputs; the cache is safe for concurrent use.
package attest

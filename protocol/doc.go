// Package protocol owns what crosses between nodes over pubsub and streams: wire messages and
// their versions, topic names, message validators, the claim state machine and the
// Coordinator that wraps it with a node's other duties (who re-scores, witnessing,
// campaigns held until prepared or witnessed, sealed-key waits, capacity, its own failures
// stopping its claims, slots reopened when a revocation voids their runs): pure, inputs in,
// actions out, in the shape of etcd's raft, with time an input; anti-entropy
// reconciliation of attestation sets; and the audit rules (audit.go: draw thresholds, impact
// weights, the statistical test, the auditors' vote), pure functions every node evaluates alike.
//
// It never starts hosts or containers; the node package does the I/O the actions ask for.
package protocol

// Package mesh owns the daemon's loop in a network (docs/design.md, "The daemon's main
// loop"): it carries out protocol.Coordinator's actions — claims published, runs started
// and aborted on this node's capacity, re-scores, audits by re-execution, witness, claim
// and release records signed, sealed bundles' grants followed — and recomputes the ledger
// from the verified store. It decides nothing: the loop feeds the coordinator verified
// values (campaigns, claims, runs, re-scores, witness, claim and audit records, run
// outcomes, capacity, the time) and carries out the one CoordActions each returns; runner
// runs and re-scores, attest and scoring compute the ledger.
//
// It does not import package node, which wires it (node.StartMesh): the node is reached
// through Node (peers, gossip, reconciliation, heads, blocks, bundles, agent images), its
// verified store (node/vstore) is handed to Start, and its values (home, network name, the
// lab's agent policy, logs, metrics) come in Options.
// Time, timers, tickers and contexts' timeouts (clock.WithTimeout) come from Options.Clock.
//
// Concurrency. A Mesh's exported methods are safe for concurrent use. Mesh keeps the loop
// and its tables; each duty with a lock or goroutine of its own is a type of its own, held
// by Mesh. Who may touch what:
//
//   - shared (shared.go), set by Start and only read after (any goroutine): node, opts (the
//     runner swaps its certificate under its own lock), ps, store, lab, self, ctx, stop,
//     the events channel, and the coord pointer; wg counts every goroutine below. Mesh
//     and every duty embed it.
//   - Owned by the loop goroutine (loop), read and written nowhere else: the Coordinator
//     (shared.coord) and Mesh's tables that carry its actions out — campaigns, running (and
//     each activeRun's fields), runs, bySlot, rescores — and the wake timer. Every other
//     goroutine hands the loop a closure: do (fire and forget; false once stopped), query
//     (run and wait), decide (a coordinator call whose actions the loop carries out), or
//     peerSeen (dropped when the queue is full, never blocking a validator).
//   - objects (objects.go): its mu guards the per-CID fetch locks (any goroutine that
//     fetches a bundle).
//   - ledgerCalc (ledger.go): its mu guards the debounce and charge timers, the last
//     ledger and the count. The ledger is computed on the debounce timer's goroutine, off
//     the loop; its inputs are read on the loop (query) and its result handed back with do.
//   - grantIndex (sealed.go): its mu guards the grants by bundle (the store's hooks add,
//     runs read); a grant to this lab is followed on a goroutine of its own.
//   - docVote (netdoc.go): its mu guards the peers' labs (the loop writes, for each claim
//     heard; its watch goroutine reads); labs is set by Start.
//   - auditor, rescorer, recordSigner, capacity, certWatch, revocationPoller: no state
//     besides shared's; each runs on the goroutines named below.
//   - Mesh.closeOnce and closeErr: Close.
//
// Goroutines besides the loop: the publisher (owns the claim sequence number), one consumer
// per topic, the sync rounds, capacity's open and follow, docVote's watch, certWatch's and
// revocationPoller's pollers, and one per run, re-score, audit, bundle preparation and
// signing (witness, release records), each handing its outcome back to the loop. All are
// counted in wg and end when ctx does (Close).
package mesh

package mesh

import "github.com/evalmesh/evalmesh/protocol"

// A node whose own runs keep failing for reasons of its own stops claiming: the
// coordinator counts them (protocol/coordinator_health.go, Options.MaxInfraStreak) and
// says when (CoordActions.StoppedClaiming); the node says why at WARN, in /metrics
// (evalmesh_claiming_stopped) and in `ledger status` and `doctor`
// (LedgerStatus.ClaimingStopped), and claims again only after a restart.

// claimingStopped reports the coordinator's decision to stop claiming. On the loop.
func (m *Mesh) claimingStopped(a protocol.CoordActions) {
	if a.StoppedClaiming == "" {
		return
	}
	m.opts.Warnf("mesh: this node stops claiming: %s; it claims again once restarted — fix the node first (`evalmesh doctor`)", a.StoppedClaiming)
	m.opts.Metrics.ClaimingStopped(a.StoppedClaiming)
}

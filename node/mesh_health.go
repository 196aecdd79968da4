package node

import (
	"fmt"

	"github.com/evalmesh/evalmesh/protocol"
)

// A node whose own runs keep failing for reasons of its own (its executor cannot start
// them, its certificate or disk refuses them) would otherwise claim slot after slot and
// release each as an infrastructure failure within seconds, burning other labs' attempts
// and starving them of slots (issue 45: 8 of 12 slots failed within a second). After
// MeshOptions.MaxInfraStreak such failures in a row (default DefaultMaxInfraStreak) it
// stops claiming, says why at WARN, in /metrics (evalmesh_claiming_stopped) and in
// `ledger status` and `doctor` (LedgerStatus.ClaimingStopped), and claims again only
// after a restart: what broke is the operator's to fix. A run that produced a result (valid, or
// an agent failure, which is the agent's) resets the count; an aborted run counts nothing.

// DefaultMaxInfraStreak is how many of its own runs in a row may end by an infrastructure
// failure before a node stops claiming.
const DefaultMaxInfraStreak = 3

// infraStreak counts this node's consecutive infrastructure failures. Pure: the loop owns it.
type infraStreak struct {
	limit   int
	n       int
	last    string // the last failure's detail
	stopped string // why claiming stopped; "" while it goes on
}

// record counts one run's outcome and reports whether claiming stops now.
func (s *infraStreak) record(o protocol.RunOutcome, aborted bool) bool {
	switch {
	case s.stopped != "" || aborted:
		return false
	case o.Kind == protocol.RunInfraFailed:
		s.n++
		s.last = o.Detail
	default:
		s.n = 0
		return false
	}
	limit := s.limit
	if limit <= 0 {
		limit = DefaultMaxInfraStreak
	}
	if s.n < limit {
		return false
	}
	s.stopped = fmt.Sprintf("%d runs in a row failed on this node's side (the last: %s)", s.n, s.last)
	return true
}

// runOutcome feeds one of this node's run outcomes to the streak, on the loop, and stops
// claiming when it says so.
func (m *Mesh) runOutcome(o protocol.RunOutcome, aborted bool) {
	if !m.health.record(o, aborted) {
		return
	}
	m.n.opts.Warnf("mesh: this node stops claiming: %s; it claims again once restarted — fix the node first (`evalmesh doctor`)", m.health.stopped)
	m.n.metrics.claimingStopped.Set(1)
	m.n.metrics.stoppedWhy.Store(m.health.stopped)
	m.apply(m.coord.StopClaiming(m.opts.Now()))
}

// ClaimingStopped says why this node stopped claiming for failures of its own ("": it
// claims).
func (n *Node) ClaimingStopped() string {
	why, _ := n.metrics.stoppedWhy.Load().(string)
	return why
}

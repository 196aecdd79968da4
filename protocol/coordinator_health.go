package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// A node's own health, as the claim rules need it (issue 45 point 3; protocol-claims.md
// rules 4a and 6): signs of life from peers (dead-holder detection), the node's certificate
// (it claims only while the certificate outlasts a slot's hard limit plus a margin), and
// stopping claims once its own runs keep failing for reasons of its own.

// PeerSeen hands the claim machine a sign of life from peer (a head it accepted).
func (c *Coordinator) PeerSeen(peer string, now time.Time) { c.cm.PeerSeen(peer, now) }

// SetCertificate takes a node certificate renewed on disk: slots the old one could not
// cover may be claimed again.
func (c *Coordinator) SetCertificate(cert json.RawMessage, notAfter, now time.Time) CoordActions {
	var out CoordActions
	c.step(&out, c.cm.SetCertificate(cert, notAfter, now), now)
	return out
}

// A node whose own runs keep failing for reasons of its own (its executor cannot start
// them, its certificate or disk refuses them) would otherwise claim slot after slot and
// release each as an infrastructure failure within seconds, burning other labs' attempts
// and starving them of slots (issue 45: 8 of 12 slots failed within a second). After
// CoordinatorConfig.MaxInfraStreak such failures of its runs in a row (default
// DefaultMaxInfraStreak) it stops claiming until a restart (CoordActions.StoppedClaiming
// says why): what broke is the operator's to fix. A run that produced a result (valid, or an
// agent failure, which is the agent's) resets the count; an aborted run is not reported
// (RunEnded is not called for it) and counts nothing.
//
// A run given up to a better-ranked claim record (RunGivenUp) counts nothing either: the
// attempt was another node's, and nothing is wrong with this one. After a long partition
// both sides ran the same attempts; when it heals, several of a node's live runs are
// outranked at once, and counted as its own failures they would stop it claiming for good
// (testdata/coordinator/infra_streak.txt; a candidate cause of the hosts harness's "lab1 ran
// 0 runs after the 5-minute cut", which three later runs did not reproduce).

// DefaultMaxInfraStreak is how many of its own runs in a row may end by an infrastructure
// failure before a node stops claiming.
const DefaultMaxInfraStreak = 3

// infraStreak counts this node's consecutive infrastructure failures.
type infraStreak struct {
	n    int
	last string // the last failure's detail
}

// record counts one run's outcome (after givenUp) and returns why claiming stops now, or "".
func (s *infraStreak) record(o RunOutcome, limit int) string {
	switch o.Kind {
	case RunInfraFailed:
		s.n++
		s.last = o.Detail
	case RunGivenUp:
		return ""
	default:
		s.n = 0
		return ""
	}
	if limit <= 0 {
		limit = DefaultMaxInfraStreak
	}
	if s.n < limit {
		return ""
	}
	return fmt.Sprintf("%d runs in a row failed on this node's side (the last: %s)", s.n, s.last)
}

// countOutcome feeds one of this node's run outcomes to the streak and stops claiming when
// it says so.
func (c *Coordinator) countOutcome(out *CoordActions, o RunOutcome, now time.Time) {
	if c.stopped {
		return
	}
	if why := c.streak.record(o, c.cfg.MaxInfraStreak); why != "" {
		out.StoppedClaiming = why
		c.stopClaiming(out, now)
	}
}

// StopClaiming stops this node's claims for good (until a restart). Runs in progress go on.
func (c *Coordinator) StopClaiming(now time.Time) CoordActions {
	var out CoordActions
	c.stopClaiming(&out, now)
	return out
}

func (c *Coordinator) stopClaiming(out *CoordActions, now time.Time) {
	if c.stopped {
		return
	}
	c.stopped = true
	if c.capOpen {
		c.step(out, c.cm.SetCapacity(c.claimCapacity(), now), now)
	}
}

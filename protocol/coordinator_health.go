package protocol

import (
	"encoding/json"
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

// StopClaiming stops this node's claims for good (until a restart): its own runs failed on
// its side too many times in a row (the caller counts them, node/mesh_health.go). Runs in
// progress go on.
func (c *Coordinator) StopClaiming(now time.Time) CoordActions {
	var out CoordActions
	if c.stopped {
		return out
	}
	c.stopped = true
	if c.capOpen {
		c.step(&out, c.cm.SetCapacity(c.claimCapacity(), now), now)
	}
	return out
}

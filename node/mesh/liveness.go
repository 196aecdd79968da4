package mesh

// peerSeen hands the claim machine a sign of life from peer (a head it accepted), for
// dead-holder detection (protocol/claim_dead.go). Called by the heads validator, off the
// loop: it never blocks it (a full event queue drops the sign; the peer's next head, 5 s
// later, brings another, and dead-after is minutes).
func (m *Mesh) peerSeen(peer string) {
	select {
	case m.events <- func() { m.coord.PeerSeen(peer, m.opts.Now()) }:
	default:
	}
}

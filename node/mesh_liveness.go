package node

// peerSeen hands the claim machine a sign of life from peer (a head it accepted), for
// dead-holder detection (protocol/claim_dead.go). Called off the loop, by the validator.
func (m *Mesh) peerSeen(peer string) {
	m.do(func() { m.cm.PeerSeen(peer, m.opts.Now()) })
}

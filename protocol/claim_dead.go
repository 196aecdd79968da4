package protocol

import (
	"slices"
	"time"
)

// Dead holders (docs/protocol-claims.md rule 4a). A node that dies (kill -9, power, a host
// gone for good) holds its running slots until their leases lapse, 10 minutes by default,
// which stalls a campaign's tail. A shorter lease would catch it sooner but costs a renew
// per run per lease/3 (17 claim messages per slot at a 2-minute lease, against 3.8). So a
// reader tracks instead when it last heard each node — any claim message, of any slot, and
// whatever else the caller hears from it (PeerSeen: the daemon passes the signed heads every
// node gossips every few seconds, which cost no claim messages) — and lapses a running claim
// once its node has been silent for DeadAfter while others were heard after DeadAfter/2 of
// that silence: a node cut off from everyone suspects nobody, so its own isolation does not
// look like the others' death, and nor does a node that finds more than one in eight of the
// nodes it knows silent at once (a partition: its other side is alive and running). The
// lapse is the lease's: the slot is free again, and a
// claim heard running (renewed) counts its attempt as an infrastructure failure. A claim
// not yet renewed is lapsed too: a node that died just after claiming was never heard
// renewing it. What it costs is a duplicate run when a
// live holder is cut off from this node alone for longer than DeadAfter (a partial
// partition); the simulator's table gives the figures.

// PeerSeen records that peer was heard from at now (a message the caller authenticated as
// that peer's). It changes no claim by itself; a later input or Tick acts on it.
func (m *ClaimMachine) PeerSeen(peer string, now time.Time) {
	m.heard(peer, now)
}

func (m *ClaimMachine) heard(peer string, now time.Time) {
	if peer == "" || peer == m.cfg.Self || m.cfg.DeadAfter <= 0 {
		return
	}
	if t, ok := m.live[peer]; !ok || now.After(t) {
		m.live[peer] = now
	}
}

// lapseSilent lapses the claims (running or not) of nodes silent for DeadAfter, at most every
// DeadAfter/8 (its wake: nextWake).
func (m *ClaimMachine) lapseSilent(now time.Time) {
	d := m.cfg.DeadAfter
	if d <= 0 || now.Before(m.deadCheck) {
		return
	}
	m.deadCheck = now.Add(d / 8)
	if len(m.watched) == 0 {
		return
	}
	// The two most recently heard peers: "others heard" for a holder is the latest heard
	// peer that is not it.
	var first, second string
	for p, t := range m.live {
		switch {
		case first == "" || t.After(m.live[first]) || t.Equal(m.live[first]) && p < first:
			first, second = p, first
		case second == "" || t.After(m.live[second]) || t.Equal(m.live[second]) && p < second:
			second = p
		}
	}
	// Many nodes silent at once is a partition, not deaths: leave their claims to the
	// lease, or both sides would run each other's slots again. Only peers silent for less
	// than a lease count (one gone for longer lost its claims to the lease already).
	silent := 0
	for _, t := range m.live {
		if since := now.Sub(t); since >= d && since < m.cfg.Lease {
			silent++
		}
	}
	if silent > max(1, len(m.live)/8) {
		return
	}
	ids := make([]string, 0, len(m.watched))
	for id := range m.watched {
		ids = append(ids, id)
	}
	slices.Sort(ids) // map order must not reach the outputs
	for _, id := range ids {
		s := m.watched[id]
		h := s.holder
		last, ok := m.live[h.peer]
		if !ok || now.Sub(last) < d {
			continue
		}
		other := first
		if other == h.peer {
			other = second
		}
		if other == "" || !m.live[other].After(last.Add(d/2)) {
			continue // nobody heard since: this node may be the one cut off
		}
		if h.running {
			// As a lapsed lease: a run that went silent consumed its attempt.
			s.infraFailed(h.attempt, h.lab)
			if s.lapsedBy == nil {
				s.lapsedBy = map[int]string{}
			}
			s.lapsedBy[h.attempt] = h.peer
		}
		m.dropHolder(s)
	}
}

package node

import (
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/protocol"
)

// maxVotingPeers bounds the peers remembered for the network-document vote: a federation
// has hundreds of nodes; this holds them all.
const maxVotingPeers = 4096

// watchDocument applies the network-document rule (docs/protocol-sync.md §6): when more
// than half of the network's active labs announce, in the heads of their certified nodes
// (one vote per lab, protocol.DocumentMajority), a document other than this node's, the
// node says so at WARN and claims nothing until it runs the same one. Heads of peers whose
// certificate it has not checked (through their claims) have no vote.
func (m *Mesh) watchDocument() {
	defer m.wg.Done()
	every := m.opts.CapacityEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	ours := m.opts.NetworkDoc.Hash()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		now := m.opts.Now()
		var active []string
		for _, l := range m.labs {
			if r, retired := m.opts.Trust.LabRetired(l); !retired || now.Before(r) {
				active = append(active, l)
			}
		}
		heads := m.n.peerHeads()
		labOf := make(chan map[string]string, 1)
		if !m.do(func() {
			c := make(map[string]string, len(m.peerLab))
			for p, l := range m.peerLab {
				c[p] = l
			}
			labOf <- c
		}) {
			return
		}
		var lo map[string]string
		select {
		case lo = <-labOf:
		case <-m.ctx.Done():
			return
		}
		v := protocol.DocumentMajority(ours, m.lab, active, heads, lo)
		m.n.setDocumentVerdict(v)
		m.do(func() { m.setDocHalt(v, ours) })
	}
}

// setDocHalt stops or resumes claiming as the verdict says (on the loop).
func (m *Mesh) setDocHalt(v protocol.DocumentVerdict, ours string) {
	if v.Mismatch == m.docHalt {
		return
	}
	m.docHalt = v.Mismatch
	if v.Mismatch {
		m.n.opts.Warnf("mesh: network document mismatch: labs %s announce document %s, this node runs %s: claiming nothing until it runs the same (evalmesh network show; get the signed document from the labs)",
			strings.Join(v.Labs, ", "), v.Majority, ours)
	} else {
		m.n.opts.Logf("mesh: the network document matches a majority of the labs again (%s): claiming resumes", ours)
	}
	if m.capOpen {
		m.apply(m.cm.SetCapacity(m.claimCapacity(), m.opts.Now()))
	}
}

// claimCapacity is what the claim machine may hold: none while the network document
// differs from the majority's (on the loop).
func (m *Mesh) claimCapacity() int {
	if m.docHalt || m.health.stopped != "" {
		return 0 // (mesh_health.go: stopped for failures of its own)
	}
	return m.opts.Capacity
}

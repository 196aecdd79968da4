package mesh

import (
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/protocol"
)

// maxVotingPeers bounds the peers remembered for the network-document vote: a federation
// has hundreds of nodes; this holds them all.
const maxVotingPeers = 4096

// docVote counts the network-document vote (docs/protocol-sync.md §6) on a goroutine of
// its own (watch) and hands the coordinator its verdict with decide. labs is set by Start
// and only read; mu guards peerLab, which the loop writes (heard, for each claim heard).
type docVote struct {
	*shared
	labs []string // the trusted labs' IDs, sorted: the vote's members (attest.TrustStore.LabIDs)

	mu sync.Mutex
	// peerLab: the lab of each peer whose claims passed the validator (its node certificate
	// checked against the trust store): the only peers whose heads vote on the network
	// document.
	peerLab map[string]string
}

// heard records the lab of a peer whose claim passed the validator.
func (d *docVote) heard(peer, lab string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.peerLab) < maxVotingPeers || d.peerLab[peer] != "" {
		d.peerLab[peer] = lab
	}
}

// watch applies the network-document rule (docs/protocol-sync.md §6): when more
// than half of the network's active labs announce, in the heads of their certified nodes
// (one vote per lab, protocol.DocumentMajority), a document other than this node's, the
// node says so at WARN and claims nothing until it runs the same one. Heads of peers whose
// certificate it has not checked (through their claims) have no vote.
func (d *docVote) watch() {
	defer d.wg.Done()
	ours := d.opts.NetworkDoc.Hash()
	t := d.opts.Clock.NewTicker(d.opts.CapacityEvery)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.Chan():
		}
		now := d.opts.Now()
		var active []string
		for _, l := range d.labs {
			if r, retired := d.opts.Trust.LabRetired(l); !retired || now.Before(r) {
				active = append(active, l)
			}
		}
		heads := d.node.PeerHeads()
		d.mu.Lock()
		lo := maps.Clone(d.peerLab)
		d.mu.Unlock()
		v := protocol.DocumentMajority(ours, d.lab, active, heads, lo)
		d.node.SetDocumentVerdict(v)
		if !d.decide(func(c *protocol.Coordinator, now time.Time) protocol.CoordActions { return d.halt(c, v, ours, now) }) {
			return
		}
	}
}

// halt stops or resumes claiming as the verdict says (on the loop).
func (d *docVote) halt(c *protocol.Coordinator, v protocol.DocumentVerdict, ours string, now time.Time) protocol.CoordActions {
	a, changed := c.DocumentMismatch(v.Mismatch, now)
	if !changed {
		return a
	}
	if v.Mismatch {
		d.opts.Warnf("mesh: network document mismatch: labs %s announce document %s, this node runs %s: claiming nothing until it runs the same (evalmesh network show; get the signed document from the labs)",
			strings.Join(v.Labs, ", "), v.Majority, ours)
	} else {
		d.opts.Logf("mesh: the network document matches a majority of the labs again (%s): claiming resumes", ours)
	}
	return a
}

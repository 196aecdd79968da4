package node

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Heads: what this node announces on /heads and what it heard from peers. The node signs
// its head (SignedHead) for the daemon's pubsub code to publish, and hands each /heads
// message it receives to ObserveHead, which validates it, records it and starts a sync
// with a peer whose set differs under the same network document.

// LoadNetworkDoc reads HOME/network.json; a home without one has none (nil, nil).
func LoadNetworkDoc(h home.Home) (*protocol.NetworkDoc, error) {
	b, err := os.ReadFile(h.NetworkDocPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d, err := protocol.ParseNetworkDoc(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.NetworkDocPath(), err)
	}
	return d, nil
}

// HeadsStaleAfter is how many head intervals may pass without a head from a peer before
// its last one is reported stale (protocol.StatusStale): two lost announcements are
// tolerated, a third means the peer is gone or its heads no longer reach us.
const HeadsStaleAfter = 3

type headsState struct {
	once    sync.Once
	mu      sync.Mutex
	tracker *protocol.HeadsTracker
	seq     uint64
	// now is the clock heads are recorded and aged by; staleAfter the bound past which a
	// peer's head is stale (HeadsStaleAfter × the heads interval; the mesh sets both).
	now        func() time.Time
	staleAfter time.Duration
	doc        *protocol.NetworkDoc
	docErr     error
	verdict    *protocol.DocumentVerdict // the mesh's network-document vote, nil before it ran
	// root is the ledger root computed for the set whose fingerprint is rootFP.
	root   string
	rootFP recon.Fingerprint
	rootOK bool
}

func (n *Node) headsInit() *headsState {
	n.heads.once.Do(func() {
		n.heads.tracker = protocol.NewHeadsTracker()
		n.heads.now, n.heads.staleAfter = time.Now, HeadsStaleAfter*defaultHeadsInterval
		if n.opts.Network != nil {
			n.heads.doc = n.opts.Network
		} else {
			n.heads.doc, n.heads.docErr = LoadNetworkDoc(n.home)
		}
	})
	return &n.heads
}

// NetworkDoc is the network document this node runs (nil when the home has none).
func (n *Node) NetworkDoc() (*protocol.NetworkDoc, error) {
	hs := n.headsInit()
	return hs.doc, hs.docErr
}

// networkName is the document's network, else the config's.
func (n *Node) networkName() string {
	if d, _ := n.NetworkDoc(); d != nil {
		return d.Network
	}
	return n.cfg.Network
}

// OurHead is this node's current head. The ledger root is recomputed from the store (no
// signature checked again) only when the set changed since the last computation, and only
// when Options.LedgerInput says what the ledger is computed with; otherwise it is "".
func (n *Node) OurHead() protocol.OurHead {
	hs := n.headsInit()
	set := n.vstore.Attestations()
	fp := set.Fingerprint()
	o := protocol.OurHead{Network: n.networkName(), Attestations: set.Len(), Fingerprint: hex.EncodeToString(fp[:])}
	if hs.doc != nil {
		o.NetworkDoc = hs.doc.Hash()
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if n.opts.LedgerInput != nil && (!hs.rootOK || hs.rootFP != fp) {
		in, err := n.opts.LedgerInput()
		if err == nil {
			if l, _, lerr := n.vstore.Ledger(in); lerr == nil {
				hs.root, hs.rootFP, hs.rootOK = l.Root(), fp, true
			} else {
				n.opts.Logf("ledger root: %v", lerr)
			}
		} else {
			n.opts.Logf("ledger input: %v", err)
		}
	}
	if hs.rootOK && hs.rootFP == fp {
		o.LedgerRoot = hs.root
	}
	return o
}

// SignedHead is this node's head, signed with its key, for /heads. lab names the node's
// lab (informational).
func (n *Node) SignedHead(lab string) ([]byte, error) {
	o := n.OurHead()
	hs := n.headsInit()
	hs.mu.Lock()
	// Seq starts from the wall clock, not 0: a restarted node's heads must be newer than
	// the ones its peers kept from before (they keep the highest), or they are dropped
	// until the count catches up. Microseconds stay exact in any JSON reader (< 2^53).
	hs.seq = max(hs.seq+1, uint64(hs.now().UnixMicro()))
	seq := hs.seq
	hs.mu.Unlock()
	key, err := n.home.Identity()
	if err != nil {
		return nil, err
	}
	return protocol.SignHead(protocol.Head{Version: protocol.Version, Network: o.Network, NetworkDoc: o.NetworkDoc,
		PeerID: n.ID().String(), Lab: lab, LedgerRoot: o.LedgerRoot, Attestations: o.Attestations,
		Fingerprint: o.Fingerprint, Seq: seq}, key)
}

// ObserveHead validates a /heads message from sender, records it (heard at now) and, when
// it shows another set under our network document, starts a sync with that peer. The
// verdict is what the topic validator returns.
func (n *Node) ObserveHead(raw []byte, sender peer.ID, now time.Time) protocol.Validation {
	h, v := protocol.ValidateHead(raw, sender, n.networkName())
	if v.Verdict != protocol.Accept {
		return v
	}
	n.RecordHead(*h, now)
	return v
}

// RecordHead records a head already validated (ValidateHead) and syncs if it differs.
func (n *Node) RecordHead(h protocol.Head, now time.Time) {
	if h.PeerID == n.ID().String() {
		return
	}
	ours := n.OurHead()
	hs := n.headsInit()
	hs.mu.Lock()
	hs.tracker.Observe(h, now)
	needs := hs.tracker.NeedsSync(ours, h.PeerID)
	hs.mu.Unlock()
	if needs {
		if p, err := peer.Decode(h.PeerID); err == nil && len(n.host.Network().ConnsToPeer(p)) > 0 {
			n.syncer.Trigger(p)
		}
	}
}

// LedgerStatus is our head and every peer's, as `evalmesh ledger status --json` prints it.
type LedgerStatus struct {
	Network      string              `json:"network"`
	NetworkDoc   string              `json:"network_doc"`
	LedgerRoot   string              `json:"ledger_root"`
	Attestations int                 `json:"attestations"`
	Fingerprint  string              `json:"fingerprint"`
	Refused      int                 `json:"refused"`
	Campaigns    int                 `json:"campaigns"`
	Peers        []protocol.PeerHead `json:"peers"`
	// DocumentMajority is the network-document vote of the labs' certified nodes (set once
	// the mesh has run it): Mismatch means this node claims nothing until its document
	// matches the majority's.
	DocumentMajority *protocol.DocumentVerdict `json:"network_doc_majority,omitempty"`
	// ClaimingStopped: why this node stopped claiming after failures of its own runs
	// (mesh_health.go); empty while it claims.
	ClaimingStopped string `json:"claiming_stopped,omitempty"`
}

// LedgerStatus compares our head with every peer's latest; heads older than the staleness
// bound are reported stale, never as agreeing.
func (n *Node) LedgerStatus() LedgerStatus {
	o := n.OurHead()
	hs := n.headsInit()
	hs.mu.Lock()
	peers := hs.tracker.Compare(o, hs.now(), hs.staleAfter)
	hs.mu.Unlock()
	return LedgerStatus{Network: o.Network, NetworkDoc: o.NetworkDoc, LedgerRoot: o.LedgerRoot,
		Attestations: o.Attestations, Fingerprint: o.Fingerprint, Refused: n.vstore.Attestations().RefusedLen(),
		Campaigns: n.vstore.Campaigns().Len(), Peers: orEmpty(peers), DocumentMajority: n.documentVerdict(), ClaimingStopped: n.ClaimingStopped()}
}

// peerHeads is every peer's latest head, stale ones marked (the statuses compare with
// nothing: unused).
func (n *Node) peerHeads() []protocol.PeerHead {
	hs := n.headsInit()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.tracker.Compare(protocol.OurHead{}, hs.now(), hs.staleAfter)
}

func (n *Node) setDocumentVerdict(v protocol.DocumentVerdict) {
	hs := n.headsInit()
	hs.mu.Lock()
	hs.verdict = &v
	hs.mu.Unlock()
}

func (n *Node) documentVerdict() *protocol.DocumentVerdict {
	hs := n.headsInit()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.verdict
}

// setHeadsClock sets the clock heads are aged by and the heads interval they are
// announced at (the mesh's), which the staleness bound is a multiple of.
func (n *Node) setHeadsClock(now func() time.Time, interval time.Duration) {
	hs := n.headsInit()
	hs.mu.Lock()
	hs.now, hs.staleAfter = now, HeadsStaleAfter*interval
	hs.mu.Unlock()
}

// headAges returns, for each peer whose head we hold, how long ago it was heard, and the
// staleness bound.
func (n *Node) headAges() (map[string]time.Duration, time.Duration) {
	hs := n.headsInit()
	hs.mu.Lock()
	defer hs.mu.Unlock()
	now := hs.now()
	out := map[string]time.Duration{}
	for id, at := range hs.tracker.HeardAt() {
		out[id] = now.Sub(at)
	}
	return out, hs.staleAfter
}

// setHeadRoot records a ledger root computed elsewhere (the mesh's debounced ledger) for
// the set whose fingerprint is fp; heads announce it while the set is unchanged.
func (n *Node) setHeadRoot(root string, fp recon.Fingerprint) {
	hs := n.headsInit()
	hs.mu.Lock()
	hs.root, hs.rootFP, hs.rootOK = root, fp, true
	hs.mu.Unlock()
}

package syncer

import (
	"encoding/hex"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Heads: what this node announces on /heads and what it heard from peers. The node signs
// its head (Signed) for the daemon's pubsub code to publish, and hands each /heads message
// it receives to Observe, which validates it, records it and starts a sync with a peer
// whose set differs under the same network document.

// HeadsStaleAfter is how many head intervals may pass without a head from a peer before
// its last one is reported stale (protocol.StatusStale): two lost announcements are
// tolerated, a third means the peer is gone or its heads no longer reach us.
const HeadsStaleAfter = 3

// HeadsOptions are what Heads reads from the node.
type HeadsOptions struct {
	// Network is the network heads carry and are accepted for (the document's, else the
	// config's); Doc is the network document (nil when the home has none).
	Network string
	Doc     *protocol.NetworkDoc
	// Key signs our heads (the node's identity, read at each signing).
	Key func() (crypto.PrivKey, error)
	// LedgerInput, when set, says what the ledger is computed with, so that our head carries
	// its root; otherwise the root is the last SetRoot's.
	LedgerInput func() (attest.LedgerInput, error)
	// Now is the clock heads are aged by, and StaleAfter the bound past which a peer's
	// head is stale, until SetClock (the mesh's) replaces them.
	Now        func() time.Time
	StaleAfter time.Duration
	// Logf receives log lines (default: discard).
	Logf func(format string, args ...any)
}

// Heads tracks our head and every peer's latest. Safe for concurrent use.
type Heads struct {
	sy    *Syncer
	store *vstore.Store
	o     HeadsOptions

	mu         sync.Mutex
	tracker    *protocol.HeadsTracker
	seq        uint64
	now        func() time.Time
	staleAfter time.Duration
	verdict    *protocol.DocumentVerdict // the mesh's network-document vote, nil before it ran
	// root is the ledger root computed for the set whose fingerprint is rootFP.
	root   string
	rootFP recon.Fingerprint
	rootOK bool
}

// NewHeads tracks heads for the store sy syncs, and has sy sync with a connected peer
// whose head shows another set.
func NewHeads(sy *Syncer, o HeadsOptions) *Heads {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return &Heads{sy: sy, store: sy.store, o: o, tracker: protocol.NewHeadsTracker(), now: o.Now, staleAfter: o.StaleAfter}
}

// Ours is this node's current head. The ledger root is recomputed from the store (no
// signature checked again) only when the set changed since the last computation, and only
// when HeadsOptions.LedgerInput says what the ledger is computed with; otherwise it is the
// last SetRoot's while the set is unchanged, else "".
func (hs *Heads) Ours() protocol.OurHead {
	set := hs.store.Attestations()
	fp := set.Fingerprint()
	o := protocol.OurHead{Network: hs.o.Network, Attestations: set.Len(), Fingerprint: hex.EncodeToString(fp[:])}
	if hs.o.Doc != nil {
		o.NetworkDoc = hs.o.Doc.Hash()
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.o.LedgerInput != nil && (!hs.rootOK || hs.rootFP != fp) {
		in, err := hs.o.LedgerInput()
		if err == nil {
			if l, _, lerr := hs.store.Ledger(in); lerr == nil {
				hs.root, hs.rootFP, hs.rootOK = l.Root(), fp, true
			} else {
				hs.o.Logf("ledger root: %v", lerr)
			}
		} else {
			hs.o.Logf("ledger input: %v", err)
		}
	}
	if hs.rootOK && hs.rootFP == fp {
		o.LedgerRoot = hs.root
	}
	return o
}

// Signed is this node's head, signed with its key, for /heads. lab names the node's lab
// (informational).
func (hs *Heads) Signed(lab string) ([]byte, error) {
	o := hs.Ours()
	hs.mu.Lock()
	// Seq starts from the wall clock, not 0: a restarted node's heads must be newer than
	// the ones its peers kept from before (they keep the highest), or they are dropped
	// until the count catches up. Microseconds stay exact in any JSON reader (< 2^53).
	hs.seq = max(hs.seq+1, uint64(hs.now().UnixMicro()))
	seq := hs.seq
	hs.mu.Unlock()
	key, err := hs.o.Key()
	if err != nil {
		return nil, err
	}
	return protocol.SignHead(protocol.Head{Version: protocol.Version, Network: o.Network, NetworkDoc: o.NetworkDoc,
		PeerID: hs.sy.h.ID().String(), Lab: lab, LedgerRoot: o.LedgerRoot, Attestations: o.Attestations,
		Fingerprint: o.Fingerprint, Seq: seq}, key)
}

// Observe validates a /heads message from sender, records it (heard at now) and, when it
// shows another set under our network document, starts a sync with that peer. The verdict
// is what the topic validator returns.
func (hs *Heads) Observe(raw []byte, sender peer.ID, now time.Time) protocol.Validation {
	h, v := protocol.ValidateHead(raw, sender, hs.o.Network)
	if v.Verdict != protocol.Accept {
		return v
	}
	hs.record(*h, now)
	return v
}

// record records a head already validated (ValidateHead) and syncs if it differs.
func (hs *Heads) record(h protocol.Head, now time.Time) {
	if h.PeerID == hs.sy.h.ID().String() {
		return
	}
	ours := hs.Ours()
	hs.mu.Lock()
	hs.tracker.Observe(h, now)
	needs := hs.tracker.NeedsSync(ours, h.PeerID)
	hs.mu.Unlock()
	if needs {
		if p, err := peer.Decode(h.PeerID); err == nil && len(hs.sy.h.Network().ConnsToPeer(p)) > 0 {
			hs.sy.Trigger(p)
		}
	}
}

// Compare compares ours with every peer's latest head; heads older than the staleness
// bound are reported stale, never as agreeing.
func (hs *Heads) Compare(ours protocol.OurHead) []protocol.PeerHead {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.tracker.Compare(ours, hs.now(), hs.staleAfter)
}

// Peers is every peer's latest head, stale ones marked (the statuses compare with
// nothing: unused).
func (hs *Heads) Peers() []protocol.PeerHead { return hs.Compare(protocol.OurHead{}) }

// SetVerdict records the mesh's network-document vote.
func (hs *Heads) SetVerdict(v protocol.DocumentVerdict) {
	hs.mu.Lock()
	hs.verdict = &v
	hs.mu.Unlock()
}

// Verdict is the mesh's latest network-document vote, nil before it ran.
func (hs *Heads) Verdict() *protocol.DocumentVerdict {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.verdict
}

// SetClock sets the clock heads are aged by and the heads interval they are announced at
// (the mesh's), which the staleness bound is a multiple of.
func (hs *Heads) SetClock(now func() time.Time, interval time.Duration) {
	hs.mu.Lock()
	hs.now, hs.staleAfter = now, HeadsStaleAfter*interval
	hs.mu.Unlock()
}

// Ages returns, for each peer whose head we hold, how long ago it was heard, and the
// staleness bound.
func (hs *Heads) Ages() (map[string]time.Duration, time.Duration) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	now := hs.now()
	out := map[string]time.Duration{}
	for id, at := range hs.tracker.HeardAt() {
		out[id] = now.Sub(at)
	}
	return out, hs.staleAfter
}

// SetRoot records a ledger root computed elsewhere (the mesh's debounced ledger) for the
// set whose fingerprint is fp; heads announce it while the set is unchanged.
func (hs *Heads) SetRoot(root string, fp recon.Fingerprint) {
	hs.mu.Lock()
	hs.root, hs.rootFP, hs.rootOK = root, fp, true
	hs.mu.Unlock()
}

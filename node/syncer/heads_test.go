package syncer

import (
	"crypto/ed25519"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

var headsNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func ledgerInput() (attest.LedgerInput, error) {
	return attest.LedgerInput{Tasks: []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.9}}, Scoring: scoring.Options{BootstrapRounds: 10}}, nil
}

func networkDoc(t *testing.T, name string, replication int) *protocol.NetworkDoc {
	t.Helper()
	pub, _, _ := ed25519.GenerateKey(nil)
	d, err := protocol.ParseNetworkDoc([]byte(`{"version":1,"network":"` + name + `","labs":[{"name":"x","key":"` +
		base64.StdEncoding.EncodeToString(pub) + `"}],"ledger":{"replication":` + string(rune('0'+replication)) + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// heads wires Heads to p as node does: under doc, signed with p's key, the root computed
// with in when it is set, aged by a clock fixed at headsNow.
func (p *testPeer) heads(doc *protocol.NetworkDoc, in func() (attest.LedgerInput, error)) *Heads {
	return NewHeads(p.sy, HeadsOptions{Network: doc.Network, Doc: doc, Key: func() (crypto.PrivKey, error) { return p.key, nil },
		LedgerInput: in, Now: func() time.Time { return headsNow }, StaleAfter: HeadsStaleAfter * time.Minute})
}

func TestHeadsAgreementOtherDocumentAndRootMismatch(t *testing.T) {
	l := newSyncLabs(t)
	doc := networkDoc(t, "evalmesh", 0)
	a, b, other := l.startPeer(t, Options{}), l.startPeer(t, Options{}), l.startPeer(t, Options{})
	ha, hb, hother := a.heads(doc, ledgerInput), b.heads(doc, ledgerInput), other.heads(networkDoc(t, "evalmesh", 2), ledgerInput)
	// Heads are heard at headsNow (and a minute later): a reads them at that time, fresh.
	ha.SetClock(func() time.Time { return headsNow.Add(time.Minute) }, time.Minute)
	addLocal(t, a, vstoretest.SignRuns(t, l.a, 0, 20))
	addLocal(t, b, vstoretest.SignRuns(t, l.a, 0, 20))
	addLocal(t, other, vstoretest.SignRuns(t, l.a, 0, 20))

	rawB, err := hb.Signed("lab-a")
	if err != nil {
		t.Fatal(err)
	}
	if v := ha.Observe(rawB, b.ID(), headsNow); v.Verdict != protocol.Accept {
		t.Fatalf("b's head: %v", v)
	}
	rawOther, _ := hother.Signed("lab-a")
	ha.Observe(rawOther, other.ID(), headsNow)
	if v := ha.Observe(rawB, other.ID(), headsNow); v.Verdict != protocol.Reject {
		t.Fatalf("b's head relayed as other's: %v", v)
	}
	// A liar with the same set announcing another root.
	ours := ha.Ours()
	forgedRoot := strings.Repeat("0", 64)
	prev, err := protocol.DecodeHead(rawB)
	if err != nil {
		t.Fatal(err)
	}
	lie, err := protocol.SignHead(protocol.Head{Version: protocol.Version, Network: ours.Network, NetworkDoc: ours.NetworkDoc,
		PeerID: b.ID().String(), LedgerRoot: forgedRoot, Attestations: ours.Attestations, Fingerprint: ours.Fingerprint, Seq: prev.Seq + 1}, b.key)
	if err != nil {
		t.Fatal(err)
	}

	peers := ha.Compare(ours)
	if ours.LedgerRoot == "" || ours.NetworkDoc != doc.Hash() || len(peers) != 2 {
		t.Fatalf("ours %+v, peers %+v", ours, peers)
	}
	for _, p := range peers {
		switch p.PeerID {
		case b.ID().String():
			if !p.Agrees || p.LedgerRoot != ours.LedgerRoot || p.Lab != "lab-a" || !p.LastHeard.Equal(headsNow) {
				t.Fatalf("b: %+v", p)
			}
		case other.ID().String():
			if p.Agrees || p.Status != protocol.StatusOtherDocument {
				t.Fatalf("other document reported as %+v", p)
			}
		}
	}
	ha.Observe(lie, b.ID(), headsNow.Add(time.Minute))
	for _, p := range ha.Compare(ha.Ours()) {
		if p.PeerID == b.ID().String() && (p.Agrees || p.Status != protocol.StatusRootMismatch || p.LedgerRoot != forgedRoot) {
			t.Fatalf("lying head reported as %+v", p)
		}
	}
}

// A head showing another set under our document starts a sync with that peer.
func TestHeadThatDiffersStartsASync(t *testing.T) {
	l := newSyncLabs(t)
	doc := networkDoc(t, "evalmesh", 0)
	a, b := l.startPeer(t, Options{}), l.startPeer(t, Options{})
	ha, hb := a.heads(doc, nil), b.heads(doc, nil)
	connect(t, a, b)
	inSync(t, 0, a, b)
	testutil.WaitFor(t, 10*time.Second, "the connect session", func() bool { return len(a.sy.LastStats(b.ID())) == 2 })
	addLocal(t, b, vstoretest.SignRuns(t, l.b, 0, 30)) // no gossip here: only the head tells a
	raw, _ := hb.Signed("")
	ha.Observe(raw, b.ID(), headsNow)
	inSync(t, 30, a, b)
}

// A peer's head carries its clock's time; the receiver records that time minus when it
// heard the head as the peer's offset, both read from their injected clocks.
func TestHeadTimeGivesThePeersClockOffset(t *testing.T) {
	l := newSyncLabs(t)
	doc := networkDoc(t, "evalmesh", 0)
	a, b := l.startPeer(t, Options{}), l.startPeer(t, Options{})
	ha, hb := a.heads(doc, nil), b.heads(doc, nil)
	hb.SetClock(func() time.Time { return headsNow.Add(12*time.Second + 250*time.Millisecond) }, time.Minute)
	raw, err := hb.Signed("lab-b")
	if err != nil {
		t.Fatal(err)
	}
	if v := ha.Observe(raw, b.ID(), headsNow); v.Verdict != protocol.Accept {
		t.Fatalf("b's head: %v", v)
	}
	peers := ha.Peers()
	if len(peers) != 1 || peers[0].ClockOffsetSeconds == nil || *peers[0].ClockOffsetSeconds != 12.25 {
		t.Fatalf("b's clock runs 12.25 s ahead of a's; a recorded %+v", peers)
	}
}

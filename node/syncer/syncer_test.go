package syncer

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/node/vstore/vstoretest"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// syncLabs are two labs trusted by every peer of these tests.
type syncLabs struct {
	a, b  *attestgen.Fixture
	trust *attest.TrustStore
}

func newSyncLabs(t *testing.T) syncLabs {
	t.Helper()
	a, b, tr, err := attestgen.TrustedPair()
	if err != nil {
		t.Fatal(err)
	}
	return syncLabs{a, b, tr}
}

// testPeer is what node wires a Syncer to, and no more: a libp2p host on 127.0.0.1 and a
// verified store in a folder.
type testPeer struct {
	key   crypto.PrivKey
	dir   string
	h     host.Host
	store *vstore.Store
	sy    *Syncer
	once  sync.Once
}

// identity is a peer's key and store folder, kept across a restart.
type identity struct {
	key crypto.PrivKey
	dir string
}

func newIdentity(t *testing.T) identity {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return identity{key, t.TempDir()}
}

// startPeer starts a peer in a fresh identity; it is closed at test end.
func (l syncLabs) startPeer(t *testing.T, o Options) *testPeer {
	t.Helper()
	return l.startPeerAt(t, newIdentity(t), o)
}

// startPeerAt starts a peer with id's key and store, as node does: the store, the host,
// then the Syncer over both.
func (l syncLabs) startPeerAt(t *testing.T, id identity, o Options) *testPeer {
	t.Helper()
	store, err := vstore.Open(id.dir, vstore.Options{Trust: l.trust})
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.Identity(id.key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport), libp2p.DisableRelay(), libp2p.ForceReachabilityPrivate(), libp2p.DisableMetrics())
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	p := &testPeer{key: id.key, dir: id.dir, h: h, store: store, sy: New(h, store, "test", o)}
	t.Cleanup(p.Close)
	return p
}

func (p *testPeer) ID() peer.ID { return p.h.ID() }

// Close stops the peer in node's order: the host (resetting open streams), the Syncer,
// then the store.
func (p *testPeer) Close() {
	p.once.Do(func() {
		p.h.Close()
		p.sy.Close()
		p.store.Close()
	})
}

// connect dials b from a and waits until both see the connection.
func connect(t *testing.T, a, b *testPeer) {
	t.Helper()
	if err := a.h.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "connection", func() bool {
		return len(b.h.Network().ConnsToPeer(a.ID())) > 0
	})
}

func addLocal(t *testing.T, p *testPeer, envs [][]byte) {
	t.Helper()
	res, err := p.store.Attestations().Add(envs, vstore.SourceLocal, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != vstore.StatusNew {
			t.Fatalf("envelope %d of %d: %s, want new", i, len(envs), r.Status)
		}
	}
}

// inSync waits until every peer holds want attestations with one fingerprint.
func inSync(t *testing.T, want int, peers ...*testPeer) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "sets to converge", func() bool {
		for _, p := range peers {
			s := p.store.Attestations()
			if s.Len() != want || s.Fingerprint() != peers[0].store.Attestations().Fingerprint() {
				return false
			}
		}
		return true
	})
}

func TestSyncDisjointSetsConvergeToTheUnion(t *testing.T) {
	l := newSyncLabs(t)
	a, b := l.startPeer(t, Options{}), l.startPeer(t, Options{})
	addLocal(t, a, vstoretest.SignRuns(t, l.a, 0, 60))
	addLocal(t, b, vstoretest.SignRuns(t, l.b, 0, 45))
	connect(t, a, b) // a dialed: a reconciles, fetches b's and pushes its own
	inSync(t, 105, a, b)
}

func TestSyncLateJoinerGetsEverything(t *testing.T) {
	l := newSyncLabs(t)
	a, b := l.startPeer(t, Options{}), l.startPeer(t, Options{})
	addLocal(t, a, vstoretest.SignRuns(t, l.a, 0, 300))
	connect(t, a, b)
	inSync(t, 300, a, b)
	late := l.startPeer(t, Options{FetchBatch: 64})
	connect(t, late, b)
	inSync(t, 300, a, b, late)
	testutil.WaitFor(t, 10*time.Second, "the late joiner's stats", func() bool { return len(late.sy.LastStats(b.ID())) == 2 })
	st := late.sy.LastStats(b.ID())
	if len(st) != 2 || st[1].Need != 300 || st[1].New != 300 || st[1].Fetches < 5 {
		t.Fatalf("late joiner's session: %+v", st)
	}
}

func TestSyncHealedPartitionWithNewAttestationsOnBothSides(t *testing.T) {
	l := newSyncLabs(t)
	// Nothing re-dials here (node's redialer is not wired): the test heals by hand, from
	// the other side.
	a, b := l.startPeer(t, Options{}), l.startPeer(t, Options{})
	addLocal(t, a, vstoretest.SignRuns(t, l.a, 0, 100))
	connect(t, a, b)
	inSync(t, 100, a, b)

	// Partition: close the connection; nothing redials on its own.
	if err := a.h.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "disconnect", func() bool {
		return len(a.h.Network().ConnsToPeer(b.ID())) == 0 && len(b.h.Network().ConnsToPeer(a.ID())) == 0
	})
	addLocal(t, a, vstoretest.SignRuns(t, l.a, 100, 120))
	addLocal(t, b, vstoretest.SignRuns(t, l.b, 0, 25))
	if a.store.Attestations().Fingerprint() == b.store.Attestations().Fingerprint() {
		t.Fatal("partitioned sets have the same fingerprint")
	}
	connect(t, b, a) // heal, dialed from the other side this time
	inSync(t, 145, a, b)
	testutil.WaitFor(t, 10*time.Second, "the healing session's stats", func() bool { return len(b.sy.LastStats(a.ID())) == 2 })
	st := b.sy.LastStats(a.ID())
	if st[1].Need != 20 || st[1].Have != 25 {
		t.Fatalf("healing session: %+v", st[1])
	}
}

func TestSyncRefusesAForgedEnvelopeAndCompletesTheRest(t *testing.T) {
	l := newSyncLabs(t)
	var served atomic.Int32
	evil := Options{WrapServe: func(env []byte) ([]byte, error) {
		if served.Add(1) == 7 {
			return vstoretest.Mutate(env), nil
		}
		return env, nil
	}}
	honest := l.startPeer(t, Options{FetchBatch: 16})
	liar := l.startPeer(t, evil)
	addLocal(t, liar, vstoretest.SignRuns(t, l.a, 0, 50))
	connect(t, honest, liar)
	testutil.WaitFor(t, 30*time.Second, "the honest node's session to end", func() bool {
		return len(honest.sy.LastStats(liar.ID())) == 2
	})
	st := honest.sy.LastStats(liar.ID())[1]
	set := honest.store.Attestations()
	if st.New != 49 || st.Refused != 1 || set.Len() != 49 {
		t.Fatalf("session %+v, %d stored: want 49 new and 1 refused", st, set.Len())
	}
	refs, err := set.Refusals()
	if err != nil || len(refs) != 1 || refs[0].From != liar.ID().String() || refs[0].Source != vstore.SourceSync || refs[0].Reason != string(attest.ReasonBadSignature) {
		t.Fatalf("refusals: %+v %v", refs, err)
	}
	// The forgery is not forwarded: the honest node's set, which it serves, lacks it.
	if got, _ := set.Has(vstore.DigestOf(vstoretest.Mutate(vstoretest.SignRuns(t, l.a, 0, 1)[0]))); got {
		t.Fatal("forged envelope stored as accepted")
	}
}

func TestSyncInterruptedHalfWayResumesWithoutDuplicates(t *testing.T) {
	l := newSyncLabs(t)
	a := l.startPeer(t, Options{FetchBatch: 25, Logf: t.Logf})
	bID := newIdentity(t)
	b := l.startPeerAt(t, bID, Options{})
	addLocal(t, b, vstoretest.SignRuns(t, l.b, 0, 400))
	var killed, closed atomic.Bool
	a.store.Attestations().OnNew(func(vstore.Source, []vstore.Accepted) {
		if a.store.Attestations().Len() >= 100 && killed.CompareAndSwap(false, true) {
			go func() { b.Close(); closed.Store(true) }() // the peer dies half way
		}
	})
	if err := a.h.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the cut session to end", func() bool {
		return closed.Load() && len(a.sy.LastStats(b.ID())) > 0
	})
	first := a.store.Attestations().Len()
	if first < 100 || first >= 400 {
		t.Fatalf("after the kill %d stored; want part of 400", first)
	}

	b = l.startPeerAt(t, bID, Options{}) // restarted: same key and store, new port
	if err := a.h.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
	inSync(t, 400, a, b)
	testutil.WaitFor(t, 10*time.Second, "the resumed session's stats", func() bool {
		st := a.sy.LastStats(b.ID())
		return len(st) == 2 && st[1].Need != 400
	})
	st := a.sy.LastStats(b.ID())[1]
	if st.Need != 400-first || st.New != 400-first || st.Known != 0 {
		t.Fatalf("resumed session %+v: want exactly the %d missing fetched, none twice", st, 400-first)
	}
	n := 0
	if err := a.store.Attestations().Each(func(_ recon.ID, _ []byte) error { n++; return nil }); err != nil || n != 400 {
		t.Fatalf("%d records stored (%v), want 400", n, err)
	}
}

func TestSyncWithUnknownPeerFails(t *testing.T) {
	l := newSyncLabs(t)
	a, b := l.startPeer(t, Options{}), l.startPeer(t, Options{})
	b.Close()
	if _, err := a.sy.SyncWith(context.Background(), b.ID()); err == nil || errors.Is(err, ErrBusy) {
		t.Fatalf("sync with a closed peer: %v", err)
	}
}

// The interval loop syncs with a connected peer on its own (no connect session, no head).
func TestSyncRunLoopSyncsWithAPeerAtAnInterval(t *testing.T) {
	l := newSyncLabs(t)
	a, b := l.startPeer(t, Options{NoAutoSync: true}), l.startPeer(t, Options{NoAutoSync: true})
	connect(t, a, b)
	addLocal(t, b, vstoretest.SignRuns(t, l.b, 0, 12))
	if a.store.Attestations().Len() != 0 {
		t.Fatal("synced without a session")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.sy.Run(ctx, clock.Real(), 20*time.Millisecond); close(done) }()
	inSync(t, 12, a, b)
	cancel()
	<-done
}

package node

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// syncLabs are two labs trusted by every node of these tests.
type syncLabs struct {
	a, b  *attestgen.Fixture
	trust *attest.TrustStore
}

func newSyncLabs(t *testing.T) syncLabs {
	t.Helper()
	a, err := attestgen.New("lab-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := attestgen.New("lab-b")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := attestgen.Trust(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return syncLabs{a, b, tr}
}

func (l syncLabs) options(so SyncOptions) Options {
	o := testOptions()
	o.Trust, o.Sync = l.trust, so
	return o
}

func addLocal(t *testing.T, n *Node, envs [][]byte) {
	t.Helper()
	res, err := n.Store().Attestations().Add(envs, SourceLocal, "")
	if err != nil {
		t.Fatal(err)
	}
	if c := count(res, StatusNew); c != len(envs) {
		t.Fatalf("%d of %d new", c, len(envs))
	}
}

// inSync waits until every node holds want attestations with one fingerprint.
func inSync(t *testing.T, want int, nodes ...*Node) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "sets to converge", func() bool {
		for _, n := range nodes {
			s := n.Store().Attestations()
			if s.Len() != want || s.Fingerprint() != nodes[0].Store().Attestations().Fingerprint() {
				return false
			}
		}
		return true
	})
}

func TestSyncDisjointSetsConvergeToTheUnion(t *testing.T) {
	l := newSyncLabs(t)
	a, b := startNode(t, l.options(SyncOptions{})), startNode(t, l.options(SyncOptions{}))
	addLocal(t, a, signRuns(t, l.a, 0, 60))
	addLocal(t, b, signRuns(t, l.b, 0, 45))
	connect(t, a, b) // a dialed: a reconciles, fetches b's and pushes its own
	inSync(t, 105, a, b)
}

func TestSyncLateJoinerGetsEverything(t *testing.T) {
	l := newSyncLabs(t)
	a, b := startNode(t, l.options(SyncOptions{})), startNode(t, l.options(SyncOptions{}))
	addLocal(t, a, signRuns(t, l.a, 0, 300))
	connect(t, a, b)
	inSync(t, 300, a, b)
	late := startNode(t, l.options(SyncOptions{FetchBatch: 64}))
	connect(t, late, b)
	inSync(t, 300, a, b, late)
	testutil.WaitFor(t, 10*time.Second, "the late joiner's stats", func() bool { return len(late.Syncer().LastStats(b.ID())) == 2 })
	st := late.Syncer().LastStats(b.ID())
	if len(st) != 2 || st[1].Need != 300 || st[1].New != 300 || st[1].Fetches < 5 {
		t.Fatalf("late joiner's session: %+v", st)
	}
}

func TestSyncHealedPartitionWithNewAttestationsOnBothSides(t *testing.T) {
	l := newSyncLabs(t)
	// Re-dialling off: the test heals by hand, from the other side.
	o := l.options(SyncOptions{})
	o.Redial.Off = true
	a, b := startNode(t, o), startNode(t, o)
	addLocal(t, a, signRuns(t, l.a, 0, 100))
	connect(t, a, b)
	inSync(t, 100, a, b)

	// Partition: close the connection; nothing redials on its own.
	if err := a.host.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "disconnect", func() bool {
		return len(a.host.Network().ConnsToPeer(b.ID())) == 0 && len(b.host.Network().ConnsToPeer(a.ID())) == 0
	})
	addLocal(t, a, signRuns(t, l.a, 100, 120))
	addLocal(t, b, signRuns(t, l.b, 0, 25))
	if a.Store().Attestations().Fingerprint() == b.Store().Attestations().Fingerprint() {
		t.Fatal("partitioned sets have the same fingerprint")
	}
	connect(t, b, a) // heal, dialed from the other side this time
	inSync(t, 145, a, b)
	testutil.WaitFor(t, 10*time.Second, "the healing session's stats", func() bool { return len(b.Syncer().LastStats(a.ID())) == 2 })
	st := b.Syncer().LastStats(a.ID())
	if st[1].Need != 20 || st[1].Have != 25 {
		t.Fatalf("healing session: %+v", st[1])
	}
}

func TestSyncRefusesAForgedEnvelopeAndCompletesTheRest(t *testing.T) {
	l := newSyncLabs(t)
	var served atomic.Int32
	evil := SyncOptions{WrapServe: func(env []byte) ([]byte, error) {
		if served.Add(1) == 7 {
			return mutate(env), nil
		}
		return env, nil
	}}
	honest := startNode(t, l.options(SyncOptions{FetchBatch: 16}))
	liar := startNode(t, l.options(evil))
	addLocal(t, liar, signRuns(t, l.a, 0, 50))
	connect(t, honest, liar)
	testutil.WaitFor(t, 30*time.Second, "the honest node's session to end", func() bool {
		return len(honest.Syncer().LastStats(liar.ID())) == 2
	})
	st := honest.Syncer().LastStats(liar.ID())[1]
	set := honest.Store().Attestations()
	if st.New != 49 || st.Refused != 1 || set.Len() != 49 {
		t.Fatalf("session %+v, %d stored: want 49 new and 1 refused", st, set.Len())
	}
	refs, err := set.Refusals()
	if err != nil || len(refs) != 1 || refs[0].From != liar.ID().String() || refs[0].Source != SourceSync || refs[0].Reason != string(attest.ReasonBadSignature) {
		t.Fatalf("refusals: %+v %v", refs, err)
	}
	// The forgery is not forwarded: the honest node's set, which it serves, lacks it.
	if got, _ := set.Has(DigestOf(mutate(signRuns(t, l.a, 0, 1)[0]))); got {
		t.Fatal("forged envelope stored as accepted")
	}
}

func TestSyncInterruptedHalfWayResumesWithoutDuplicates(t *testing.T) {
	l := newSyncLabs(t)
	// Re-dialling off: the restarted b would dial a itself and run a session of its own
	// beside the one this test counts.
	noRedial := func(o Options) Options { o.Redial.Off = true; return o }
	a := startNode(t, noRedial(l.options(SyncOptions{FetchBatch: 25, Logf: t.Logf})))
	bHome := newHome(t)
	b := startNodeAt(t, bHome, noRedial(l.options(SyncOptions{})))
	addLocal(t, b, signRuns(t, l.b, 0, 400))
	var killed, closed atomic.Bool
	a.Store().Attestations().OnNew(func(Source, [][]byte) {
		if a.Store().Attestations().Len() >= 100 && killed.CompareAndSwap(false, true) {
			go func() { b.Close(); closed.Store(true) }() // the peer dies half way
		}
	})
	if err := a.Connect(context.Background(), b.Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "the cut session to end", func() bool {
		return closed.Load() && len(a.Syncer().LastStats(b.ID())) > 0
	})
	first := a.Store().Attestations().Len()
	if first < 100 || first >= 400 {
		t.Fatalf("after the kill %d stored; want part of 400", first)
	}

	b = startNodeAt(t, bHome, noRedial(l.options(SyncOptions{}))) // restarted: same home, new port
	if err := a.Connect(context.Background(), b.Addrs()[0]); err != nil {
		t.Fatal(err)
	}
	inSync(t, 400, a, b)
	testutil.WaitFor(t, 10*time.Second, "the resumed session's stats", func() bool {
		st := a.Syncer().LastStats(b.ID())
		return len(st) == 2 && st[1].Need != 400
	})
	st := a.Syncer().LastStats(b.ID())[1]
	if st.Need != 400-first || st.New != 400-first || st.Known != 0 {
		t.Fatalf("resumed session %+v: want exactly the %d missing fetched, none twice", st, 400-first)
	}
	n := 0
	if err := a.Store().Attestations().Each(func(_ recon.ID, _ []byte) error { n++; return nil }); err != nil || n != 400 {
		t.Fatalf("%d records stored (%v), want 400", n, err)
	}
}

func TestSyncWithUnknownPeerFails(t *testing.T) {
	l := newSyncLabs(t)
	a, b := startNode(t, l.options(SyncOptions{})), startNode(t, l.options(SyncOptions{}))
	b.Close()
	if _, err := a.Syncer().SyncWith(context.Background(), b.ID()); err == nil || errors.Is(err, errBusy) {
		t.Fatalf("sync with a closed peer: %v", err)
	}
}

// The interval loop syncs with a connected peer on its own (no connect session, no head).
func TestSyncRunLoopSyncsWithAPeerAtAnInterval(t *testing.T) {
	l := newSyncLabs(t)
	a, b := startNode(t, l.options(SyncOptions{NoAutoSync: true})), startNode(t, l.options(SyncOptions{NoAutoSync: true}))
	connect(t, a, b)
	addLocal(t, b, signRuns(t, l.b, 0, 12))
	if a.Store().Attestations().Len() != 0 {
		t.Fatal("synced without a session")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Syncer().Run(ctx, 20*time.Millisecond); close(done) }()
	inSync(t, 12, a, b)
	cancel()
	<-done
}

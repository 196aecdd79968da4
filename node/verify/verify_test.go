package verify

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
)

// fakeNode answers SyncWith with ErrSyncBusy busy[p] times before syncErr, and PeerHeads
// with heads; the rest is not reached by the steps under test.
type fakeNode struct {
	mu      sync.Mutex
	busy    map[peer.ID]int
	tries   map[peer.ID]int
	synced  []peer.ID
	syncErr error
	heads   []protocol.PeerHead
}

func (f *fakeNode) SyncWith(_ context.Context, p peer.ID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries[p]++
	if f.busy[p] > 0 {
		f.busy[p]--
		return ErrSyncBusy
	}
	if f.syncErr != nil {
		return f.syncErr
	}
	f.synced = append(f.synced, p)
	return nil
}

func (f *fakeNode) PeerHeads() []protocol.PeerHead {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]protocol.PeerHead(nil), f.heads...)
}

func (f *fakeNode) LabPeer(string) (peer.ID, error)       { return "", errors.New("not faked") }
func (f *fakeNode) Connect(context.Context, string) error { return errors.New("not faked") }
func (f *fakeNode) Store() *vstore.Store                  { return nil }
func (f *fakeNode) GetBlock(context.Context, cid.Cid) ([]byte, error) {
	return nil, errors.New("not faked")
}
func (f *fakeNode) Close() error { return nil }
func (f *fakeNode) BundleDir(context.Context, cid.Cid, time.Duration) (string, error) {
	return "", errors.New("not faked")
}

// advanceUntil moves fake on by step, each time something waits on it, until done closes.
func advanceUntil(t *testing.T, fake *clock.Fake, step time.Duration, done <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		select {
		case <-done:
			return
		default:
		}
		bctx, bcancel := context.WithTimeout(ctx, 10*time.Millisecond)
		if fake.BlockUntilContext(bctx, 1) == nil {
			fake.Advance(step)
		}
		bcancel()
		if ctx.Err() != nil {
			t.Fatal("the step did not finish within 10 s")
		}
	}
}

// unwaited is step's answer, which must come without a wait on the fake clock the test
// never moves: a step that waits fails the test instead of hanging it.
func unwaited(t *testing.T, step func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- step() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second): // a bound on a hang, not a wait for a condition
		t.Fatal("the step waited on the clock")
		return nil
	}
}

func TestOptionsRefusedWithoutDocBootstrapOrRunner(t *testing.T) {
	doc := &protocol.NetworkDoc{Network: "n"}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Bootstrap: []string{"a"}, Runner: &runner.Runner{}}, "network document"},
		{Options{Doc: doc, Runner: &runner.Runner{}}, "at least one lab node"},
		{Options{Doc: doc, Bootstrap: []string{"a"}}, "a runner"},
	} {
		if _, err := c.o.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("withDefaults(%+v) = %v, want an error about %q", c.o, err, c.want)
		}
	}
	o, err := Options{Doc: doc, Bootstrap: []string{"a"}, Runner: &runner.Runner{}}.withDefaults()
	if err != nil || o.HeadsWait != 15*time.Second || o.FetchTimeout != 30*time.Second || o.Clock == nil || o.Progress == nil ||
		len(o.Listen) != 1 || o.Listen[0] != "/ip4/127.0.0.1/tcp/0" {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
}

func TestSyncWaitsOutABusyPeer(t *testing.T) {
	fake := clock.NewFake(time.Unix(1e9, 0))
	a, b := peer.ID("lab-a"), peer.ID("lab-b")
	n := &fakeNode{busy: map[peer.ID]int{a: 2}, tries: map[peer.ID]int{}}
	var progress []int
	o := Options{Clock: fake, Progress: func(phase string, done, total int) { progress = append(progress, done) }}
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { errc <- syncWithLabs(context.Background(), n, o, []peer.ID{a, b}); close(done) }()
	advanceUntil(t, fake, 100*time.Millisecond, done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n.tries[a] != 3 || n.tries[b] != 1 || len(n.synced) != 2 || n.synced[0] != a || n.synced[1] != b {
		t.Fatalf("tries %v, synced %v: want lab-a tried 3 times (busy twice), then lab-b once", n.tries, n.synced)
	}
	if len(progress) != 3 || progress[2] != 2 {
		t.Fatalf("progress %v, want 0, 1, 2", progress)
	}
}

func TestSyncFailsOnAnotherError(t *testing.T) {
	boom := errors.New("stream reset")
	a := peer.ID("lab-a")
	n := &fakeNode{tries: map[peer.ID]int{}, syncErr: boom}
	err := unwaited(t, func() error {
		return syncWithLabs(context.Background(), n, Options{Clock: clock.NewFake(time.Unix(1e9, 0)), Progress: func(string, int, int) {}}, []peer.ID{a})
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "sync with") || n.tries[a] != 1 {
		t.Fatalf("err %v after %d tries, want the sync error, once", err, n.tries[a])
	}
}

func TestWaitForHeadsEndsOnceEveryLabAnnouncedOrAtTheDeadline(t *testing.T) {
	a, b := peer.ID("lab-a"), peer.ID("lab-b")
	rep := &Report{LedgerRoot: "r1", Attestations: 5}
	// lab-a announces our root; lab-b another root over the same set: both count.
	n := &fakeNode{heads: []protocol.PeerHead{{PeerID: a.String(), LedgerRoot: "r1"}, {PeerID: b.String(), LedgerRoot: "r2", Attestations: 5}}}
	fake := clock.NewFake(time.Unix(1e9, 0))
	o := Options{Clock: fake, HeadsWait: time.Minute, Progress: func(string, int, int) {}}
	if err := unwaited(t, func() error { return waitForHeads(context.Background(), n, o, []peer.ID{a, b}, rep) }); err != nil {
		t.Fatal(err)
	}

	// lab-b announces another root over fewer attestations (still syncing): waited for
	// until HeadsWait has passed on the clock.
	n.heads[1].Attestations = 4
	var last int
	o.Progress = func(_ string, have, _ int) { last = have }
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { errc <- waitForHeads(context.Background(), n, o, []peer.ID{a, b}, rep); close(done) }()
	advanceUntil(t, fake, 200*time.Millisecond, done)
	if err := <-errc; err != nil || last != 1 {
		t.Fatalf("err %v, last progress %d of 2: want the deadline to end the wait with 1", err, last)
	}
	if fake.Since(time.Unix(1e9, 0)) <= time.Minute {
		t.Fatalf("ended after %s on the clock, before HeadsWait", fake.Since(time.Unix(1e9, 0)))
	}
}

func TestCompareRootsJudgesTheNetworksAnnouncedRoots(t *testing.T) {
	heads := []protocol.PeerHead{
		{PeerID: "p3", Network: "n", LedgerRoot: "r1", Lab: "c"},
		{PeerID: "p1", Network: "n", LedgerRoot: "r1", Lab: "a"},
		{PeerID: "p2", Network: "n", LedgerRoot: ""},      // no root yet: not counted
		{PeerID: "p4", Network: "other", LedgerRoot: "x"}, // another network's: not counted
	}
	rep := &Report{LedgerRoot: "r1"}
	compareRoots(heads, "n", rep)
	if !rep.RootsAgree || !rep.OK || len(rep.Announced) != 2 || rep.Announced[0].PeerID != "p1" || rep.Announced[1].PeerID != "p3" {
		t.Fatalf("agree %v ok %v announced %+v: want p1, p3 agreeing", rep.RootsAgree, rep.OK, rep.Announced)
	}

	heads[0].LedgerRoot = "r2"
	rep = &Report{LedgerRoot: "r1"}
	compareRoots(heads, "n", rep)
	if rep.RootsAgree || rep.OK || rep.Announced[1].Agrees {
		t.Fatalf("agree %v ok %v announced %+v: want p3's other root to break agreement", rep.RootsAgree, rep.OK, rep.Announced)
	}

	rep = &Report{LedgerRoot: "r1", Disagreements: []RescoreDisagreement{{Attestation: "x"}}}
	compareRoots(heads[1:2], "n", rep)
	if !rep.RootsAgree || rep.OK {
		t.Fatalf("agree %v ok %v: want the roots agreeing but not ok with a re-score disagreeing", rep.RootsAgree, rep.OK)
	}

	rep = &Report{LedgerRoot: "r1"}
	compareRoots(nil, "n", rep)
	if rep.RootsAgree || rep.OK {
		t.Fatal("no root heard: want no agreement")
	}
}

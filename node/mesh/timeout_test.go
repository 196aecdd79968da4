package mesh

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
)

// stuckNode is a Node whose peer never answers: its first reconciliation, bundle fetch and
// block fetch each wait until their context ends, which only the mesh's budgets end.
type stuckNode struct {
	Node
	calls chan context.Context // each call's context, as it starts waiting
}

func (n *stuckNode) wait(ctx context.Context) error {
	n.calls <- ctx
	<-ctx.Done()
	return ctx.Err()
}

func (n *stuckNode) Peers() []peer.ID                              { return []peer.ID{"peer"} }
func (n *stuckNode) SyncWith(ctx context.Context, _ peer.ID) error { return n.wait(ctx) }
func (n *stuckNode) BundleDir(ctx context.Context, _ cid.Cid) (string, error) {
	return "", n.wait(ctx)
}
func (n *stuckNode) GetBlock(ctx context.Context, _ cid.Cid) (blocks.Block, error) {
	return nil, n.wait(ctx)
}

// logs keeps a mesh's log lines for a test to poll.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, format)
}

func (l *logs) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// stuckMesh is a mesh over a stuckNode on a fake clock, with no loop: what it hands the
// loop stays in its events channel.
func stuckMesh(t *testing.T, tm Timing) (*Mesh, *stuckNode, *clock.Fake, *logs) {
	t.Helper()
	fake := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
	n := &stuckNode{calls: make(chan context.Context, 4)}
	l := &logs{}
	sh := &shared{node: n, events: make(chan func(), 8),
		opts: Options{Clock: fake, Now: fake.Now, Timing: tm, Logf: l.Logf, Warnf: l.Logf}}
	sh.ctx, sh.stop = context.WithCancel(context.Background())
	m := &Mesh{shared: sh, objects: &objects{shared: sh, bundles: map[string]*sync.Mutex{}}}
	t.Cleanup(m.stop)
	return m, n, fake, l
}

// started waits for the stuck node's next call and for the fake clock to hold want
// waiters (the budget's timer among them), and returns the call's context.
func started(t *testing.T, n *stuckNode, fake *clock.Fake, want int) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the test's own bound, on the wall clock
	defer cancel()
	var call context.Context
	select {
	case call = <-n.calls:
	case <-ctx.Done():
		t.Fatal("the node was never called")
	}
	if err := fake.BlockUntilContext(ctx, want); err != nil {
		t.Fatalf("the budget made no timer on the mesh's clock: %v", err)
	}
	return call
}

// expire advances the fake clock to just before d (the call's context must still be
// live) and then past it (the context must end with DeadlineExceeded).
func expire(t *testing.T, fake *clock.Fake, call context.Context, d time.Duration, what string) {
	t.Helper()
	fake.Advance(d - time.Nanosecond)
	if err := call.Err(); err != nil {
		t.Fatalf("%s ended before its budget passed on the mesh's clock: %v", what, err)
	}
	fake.Advance(time.Nanosecond)
	testutil.WaitFor(t, 10*time.Second, what+" ended by its budget on the mesh's clock", func() bool {
		return errors.Is(call.Err(), context.DeadlineExceeded)
	})
}

// Timing.ObjectFetch bounds a submission's fetch on the mesh's clock: the fetch fails
// when the fake clock passes the budget, not before.
func TestObjectFetchBudgetOnTheMeshClock(t *testing.T) {
	m, n, fake, _ := stuckMesh(t, Timing{ObjectFetch: time.Minute})
	c := cid.NewCidV1(cid.Raw, []byte{0x00, 0x01, 0x00}) // identity multihash of one zero byte
	errc := make(chan error, 1)
	go func() { _, err := m.objects.fetchObject(context.Background(), c.String(), ""); errc <- err }()
	call := started(t, n, fake, 1)
	expire(t, fake, call, time.Minute, "the object fetch")
	if err := <-errc; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fetchObject: %v, want a context.DeadlineExceeded", err)
	}
}

// Timing.BundleFetch bounds each fetch of a campaign's bundle on the mesh's clock; the
// campaign is retried after it, on the same clock.
func TestBundleFetchBudgetOnTheMeshClock(t *testing.T) {
	m, n, fake, l := stuckMesh(t, Timing{BundleFetch: 2 * time.Minute, PrepareRetryBase: time.Second, PrepareRetryMax: time.Second})
	c := cid.NewCidV1(cid.Raw, []byte{0x00, 0x01, 0x00})
	v := &protocol.VerifiedCampaign{ID: "campaign", Campaign: &protocol.Campaign{Tasks: []string{c.String()}}}
	go m.prepareCampaign(v, 0)
	call := started(t, n, fake, 1)
	expire(t, fake, call, 2*time.Minute, "the bundle fetch")
	testutil.WaitFor(t, 10*time.Second, "the failed fetch logged", func() bool { return l.has("(retrying)") })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // the retry's wait
		t.Fatal(err)
	}
	fake.Advance(time.Second)
	if retry := started(t, n, fake, 1); retry.Err() != nil {
		t.Fatalf("the retry's fetch began with its budget spent: %v", retry.Err())
	}
}

// Timing.FirstSync bounds the first reconciliation on the mesh's clock: capacity opens
// when the fake clock passes it, though the peer never answered.
func TestFirstSyncWaitOnTheMeshClock(t *testing.T) {
	m, n, fake, l := stuckMesh(t, Timing{OpenGrace: time.Hour, OpenPoll: time.Hour, FirstSync: 10 * time.Second})
	m.wg.Add(1)
	go capacity{m.shared}.open()
	call := started(t, n, fake, 2) // the open poll's ticker and the budget's timer
	expire(t, fake, call, 10*time.Second, "the first reconciliation")
	testutil.WaitFor(t, 10*time.Second, "capacity opened after the first reconciliation's budget", func() bool {
		return len(m.events) == 1
	})
	if !l.has("first reconciliation") {
		t.Fatal("the failed first reconciliation was not logged")
	}
}

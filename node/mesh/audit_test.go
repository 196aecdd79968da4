package mesh

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// The test-only audit gate (Options.TestAuditGate) is polled on the mesh's clock: the
// poll's ticker is the fake clock's, the gate holds however far that clock moves while the
// file is there, and a removed gate is noticed at a tick of the fake clock.
func TestAuditGatePollsOnTheMeshClock(t *testing.T) {
	fake := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
	gate := filepath.Join(t.TempDir(), "gate")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a := &auditor{shared: &shared{opts: Options{Clock: fake, TestAuditGate: gate}}}
	a.ctx, a.stop = context.WithCancel(context.Background())
	t.Cleanup(a.stop)
	var opened atomic.Bool
	go func() { a.waitGate(); opened.Store(true) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // the poll ticker is made
		t.Fatalf("the gate's poll made no ticker on the mesh's clock: %v", err)
	}
	for range 10 {
		fake.Advance(100 * time.Millisecond) // polls with the gate still there
	}
	if opened.Load() {
		t.Fatal("the gate opened while its file was there")
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	// A tick the loop has not taken yet may be waiting (a fake ticker keeps one, as a real
	// one does): each advance hands it the next.
	testutil.WaitFor(t, 10*time.Second, "the removed gate noticed at a poll on the mesh's clock", func() bool {
		fake.Advance(100 * time.Millisecond)
		return opened.Load()
	})
}

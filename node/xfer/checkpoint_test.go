package xfer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	blocks "github.com/ipfs/go-block-format"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/xfer/xfertest"
)

// A fetch's checkpoint interval is measured on the clock it is given, not the wall clock:
// blocks stored while that clock stands still are not synced (the byte bound is far off),
// and the first batch stored once it has moved past the interval is.
func TestCheckpointsRunOnTheGivenClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	var syncs atomic.Int32
	var cfg fetchConfig
	WithCheckpoints(time.Hour, 1<<40, func() error { syncs.Add(1); return nil }, clk)(&cfg)
	bs := xfertest.MemBlockstore()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newStorer(ctx, cancel, bs, false, cfg.checkpoint)
	put := func(i int) {
		t.Helper()
		b := blocks.NewBlock(testutil.RandomBytes(uint64(i), 1024))
		s.ch <- b
		testutil.WaitFor(t, 10*time.Second, "the block stored", func() bool {
			has, err := bs.Has(ctx, b.Cid())
			return err == nil && has
		})
	}
	put(1)
	put(2)
	if n := syncs.Load(); n != 0 {
		t.Fatalf("%d checkpoints before the interval passed on the fetch's clock", n)
	}
	advance(time.Hour)
	put(3)
	testutil.WaitFor(t, 10*time.Second, "a checkpoint once the interval passed on the fetch's clock", func() bool { return syncs.Load() == 1 })
	close(s.ch)
	<-s.done
	if s.err != nil {
		t.Fatal(s.err)
	}
}

package pins

import (
	"context"
	"testing"
	"time"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
)

// silentExchange is an exchange that has no block and never says so: a fetch through it
// waits until its context ends.
type silentExchange struct{}

func (silentExchange) GetBlock(ctx context.Context, _ cid.Cid) (blocks.Block, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (silentExchange) GetBlocks(context.Context, []cid.Cid) (<-chan blocks.Block, error) {
	return make(chan blocks.Block), nil
}
func (silentExchange) NotifyNewBlocks(context.Context, ...blocks.Block) error { return nil }
func (silentExchange) Close() error                                           { return nil }

// A repair round's root prefetch stops once no root arrived for prefetchIdle on the node's
// clock: with holders that never send, it is still waiting just before, and over once the
// fake clock reaches it (on the wall clock it would wait 3 s; here no wall time passes).
func TestPrefetchIdleCancelFiresOnTheNodeClock(t *testing.T) {
	fake := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
	bs := blockstore.NewBlockstore(dssync.MutexWrap(datastore.NewMapDatastore()))
	k := New(Options{Clock: fake, BlockService: blockservice.New(bs, silentExchange{})})
	root := blocks.NewBlock(testutil.RandomBytes(7, 64)).Cid()
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.PrefetchRoots(context.Background(), []protocol.LedgerObject{{CID: root.String(), What: "bundle"}})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fake.BlockUntilContext(ctx, 1); err != nil { // the idle timer is set
		t.Fatalf("the prefetch set no timer on the keeper's clock: %v", err)
	}
	fake.Advance(prefetchIdle - time.Millisecond)
	select {
	case <-done:
		t.Fatal("the prefetch ended before prefetchIdle passed on the keeper's clock")
	default:
	}
	fake.Advance(time.Millisecond)
	testutil.WaitFor(t, 10*time.Second, "the prefetch to end once prefetchIdle passed on the keeper's clock", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
}

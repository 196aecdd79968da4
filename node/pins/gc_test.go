package pins

import (
	"context"
	"errors"
	"testing"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	offline "github.com/ipfs/boxo/exchange/offline"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/pinning/pinner/dspinner"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
)

// syncless is an in-memory blockstore as a diskstore.Store: nothing to sync.
type syncless struct{ blockstore.Blockstore }

func (syncless) Sync() error { return nil }

// memKeeper is a Keeper over in-memory stores and a pinner, with no host: what staging
// and garbage collection need and nothing more.
func memKeeper(t *testing.T) (*Keeper, blockstore.Blockstore) {
	t.Helper()
	bs := blockstore.NewBlockstore(dssync.MutexWrap(datastore.NewMapDatastore()))
	dag := merkledag.NewDAGService(blockservice.New(bs, offline.Exchange(bs)))
	p, err := dspinner.New(context.Background(), dssync.MutexWrap(datastore.NewMapDatastore()), dag)
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Home: home.Home{Dir: t.TempDir()}, Store: syncless{bs}, Blockstore: bs,
		GCLocker: blockstore.NewGCLocker(), Pinner: p, GuardMeta: func(f func() error) error { return f() },
		Clock: clock.Real(), Logf: t.Logf, Warnf: t.Logf}), bs
}

// A staged write that pins keeps its blocks; one that fails leaves none of the blocks it
// added; GC then removes a block nothing pins (a dry run only counts it) and keeps the
// pinned DAG whole.
func TestStagedAndGCKeepWhatIsPinned(t *testing.T) {
	ctx := context.Background()
	k, bs := memKeeper(t)
	leaf := merkledag.NewRawNode([]byte("a pinned leaf"))
	root := merkledag.NodeWithData([]byte{0x08, 0x01})
	if err := root.AddNodeLink("leaf", leaf); err != nil {
		t.Fatal(err)
	}
	err := k.Staged(ctx, func(b blockstore.Blockstore) error {
		if err := b.PutMany(ctx, []blocks.Block{leaf, root}); err != nil {
			return err
		}
		return k.o.Pinner.Pin(ctx, root, true, "kept")
	})
	if err != nil {
		t.Fatal(err)
	}
	refused := merkledag.NewRawNode([]byte("put by a refused operation"))
	refusal := errors.New("refused")
	if err := k.Staged(ctx, func(b blockstore.Blockstore) error {
		if err := b.Put(ctx, refused); err != nil {
			return err
		}
		return refusal
	}); !errors.Is(err, refusal) {
		t.Fatalf("staged: %v, want the operation's error", err)
	}
	if ok, _ := bs.Has(ctx, refused.Cid()); ok {
		t.Errorf("a refused operation's block %s stayed", refused.Cid())
	}
	stray := merkledag.NewRawNode([]byte("nothing pins or names this"))
	if err := bs.Put(ctx, stray); err != nil {
		t.Fatal(err)
	}
	dry, err := k.GC(ctx, GCOptions{DryRun: true})
	if err != nil || dry.Blocks != 1 {
		t.Fatalf("dry run: %+v (%v); want the one stray block counted", dry, err)
	}
	if ok, _ := bs.Has(ctx, stray.Cid()); !ok {
		t.Fatal("a dry run removed a block")
	}
	rep, err := k.GC(ctx, GCOptions{})
	if err != nil || rep.Blocks != 1 {
		t.Fatalf("GC: %+v (%v); want the one stray block removed", rep, err)
	}
	if ok, _ := bs.Has(ctx, stray.Cid()); ok {
		t.Errorf("GC kept %s, which nothing pins or names", stray.Cid())
	}
	if !k.HoldsWhole(ctx, root.Cid()) {
		t.Errorf("GC dropped part of the pinned DAG %s", root.Cid())
	}
}

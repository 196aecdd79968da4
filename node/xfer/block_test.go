package xfer

import (
	"context"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/node/xfer/xfertest"
)

// FetchBlock gets a block only from the peer that has it, verified, and stores nothing; a
// peer without it fails at once (a spot check must not wait out a timeout to say so).
func TestFetchBlockAsksThatPeerAlone(t *testing.T) {
	holder, empty, asker := newNode(t, nil), newNode(t, nil), newNode(t, nil)
	root := addFile(t, 7, 3<<20, holder.bs) // several leaves under a root
	connect(t, asker, holder, empty)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cids, err := xfertest.AllCIDs(ctx, holder.bs, root)
	if err != nil || len(cids) < 2 {
		t.Fatalf("DAG of %d blocks: %v", len(cids), err)
	}
	leaf := cids[len(cids)-1]
	data, err := FetchBlock(ctx, asker.h, holder.h.ID(), leaf)
	if err != nil || Verify(leaf, data) != nil {
		t.Fatalf("leaf from its holder: %v", err)
	}
	if ok, _ := asker.bs.Has(ctx, leaf); ok {
		t.Error("FetchBlock stored the block")
	}
	start := time.Now()
	if _, err := FetchBlock(ctx, asker.h, empty.h.ID(), leaf); err == nil {
		t.Fatal("a peer without the block passed")
	} else if time.Since(start) > 5*time.Second {
		t.Errorf("a peer without the block took %v to fail", time.Since(start))
	} else {
		t.Logf("peer without it: %v", err)
	}
}

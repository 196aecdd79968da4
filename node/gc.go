package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
)

// Garbage collection and the staging of writes share one rule, kubo's: a sequence of puts
// that ends in a pin (add, import, fetch) holds the GC locker's PinLock from its first put
// to its pin, and whatever deletes blocks (GC, or a refused operation removing what it put)
// holds GCLock, so it runs when no such sequence is half done and every block it keeps is
// either pinned or not there.

// recordingStore passes writes through and remembers the blocks that were not stored
// before, so a refused operation can remove exactly what it added.
type recordingStore struct {
	blockstore.Blockstore
	mu    sync.Mutex
	added []cid.Cid
}

func (s *recordingStore) Put(ctx context.Context, b blocks.Block) error {
	if has, err := s.Blockstore.Has(ctx, b.Cid()); err == nil && has {
		return nil
	}
	if err := s.Blockstore.Put(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	s.added = append(s.added, b.Cid())
	s.mu.Unlock()
	return nil
}

func (s *recordingStore) PutMany(ctx context.Context, bs []blocks.Block) error {
	for _, b := range bs {
		if err := s.Put(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// staged runs op, which puts blocks through the store it is given and pins at its end, under
// the PinLock. If op fails, the blocks it added that no pin holds are removed (newest first,
// so the pack store can cut its unsynced tail and give the space back at once).
func (n *Node) staged(ctx context.Context, op func(bs blockstore.Blockstore) error) error {
	rec := &recordingStore{Blockstore: n.bstore}
	unlock := n.gcl.PinLock(ctx)
	err := op(rec)
	unlock.Unlock(ctx)
	if err == nil || len(rec.added) == 0 {
		return err
	}
	if rerr := n.removeUnpinned(context.WithoutCancel(ctx), rec.added); rerr != nil {
		n.opts.Logf("removing the blocks of a refused operation: %v (`evalmesh repo gc` removes them)", rerr)
	}
	return err
}

// removeUnpinned deletes the blocks in cids (newest last) that no pin holds, under GCLock.
func (n *Node) removeUnpinned(ctx context.Context, cids []cid.Cid) error {
	unlock := n.gcl.GCLock(ctx)
	defer unlock.Unlock(ctx)
	keep, err := n.pinnedSet(ctx, nil)
	if err != nil {
		return err
	}
	for i := len(cids) - 1; i >= 0; i-- {
		if _, ok := keep[string(cids[i].Hash())]; ok {
			continue
		}
		if err := n.bstore.DeleteBlock(ctx, cids[i]); err != nil {
			return err
		}
	}
	return nil
}

// pinnedSet returns the multihashes (as strings) of every block under a recursive pin. Raw
// leaves are named by their parents and never read. progress, if set, gets the count so far.
func (n *Node) pinnedSet(ctx context.Context, progress func(blocks int)) (map[string]struct{}, error) {
	set := map[string]struct{}{}
	for sp := range n.pinner.RecursiveKeys(ctx, false) {
		if sp.Err != nil {
			return nil, sp.Err
		}
		stack := []cid.Cid{sp.Pin.Key}
		set[string(sp.Pin.Key.Hash())] = struct{}{}
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if c.Type() == cid.Raw {
				continue
			}
			b, err := n.bstore.Get(ctx, c)
			if err != nil {
				return nil, fmt.Errorf("pinned block %s (under %s): %w", c, sp.Pin.Key, err)
			}
			links, err := blockLinks(b)
			if err != nil {
				return nil, err
			}
			for _, l := range links {
				k := string(l.c.Hash())
				if _, ok := set[k]; ok {
					continue
				}
				set[k] = struct{}{}
				stack = append(stack, l.c)
			}
			if progress != nil {
				progress(len(set))
			}
		}
	}
	return set, nil
}

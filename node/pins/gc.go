package pins

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/diskstore"
	"github.com/evalmesh/evalmesh/runner"
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

// Staged runs op, which puts blocks through the store it is given and pins at its end, under
// the PinLock. If op fails, the blocks it added that no pin holds are removed (newest first,
// so the pack store can cut its unsynced tail and give the space back at once).
func (k *Keeper) Staged(ctx context.Context, op func(bs blockstore.Blockstore) error) error {
	rec := &recordingStore{Blockstore: k.o.Blockstore}
	unlock := k.o.GCLocker.PinLock(ctx)
	err := op(rec)
	unlock.Unlock(ctx)
	if err == nil || len(rec.added) == 0 {
		return err
	}
	if rerr := k.removeUnpinned(context.WithoutCancel(ctx), rec.added); rerr != nil {
		k.o.Logf("removing the blocks of a refused operation: %v (`evalmesh repo gc` removes them)", rerr)
	}
	return err
}

// removeUnpinned deletes the blocks in cids (newest last) that no pin holds, under GCLock.
func (k *Keeper) removeUnpinned(ctx context.Context, cids []cid.Cid) error {
	unlock := k.o.GCLocker.GCLock(ctx)
	defer unlock.Unlock(ctx)
	keep, err := k.pinnedSet(ctx, nil)
	if err != nil {
		return err
	}
	for i := len(cids) - 1; i >= 0; i-- {
		if _, ok := keep[string(cids[i].Hash())]; ok {
			continue
		}
		if err := k.o.Blockstore.DeleteBlock(ctx, cids[i]); err != nil {
			return err
		}
	}
	return nil
}

// pinnedSet returns the multihashes (as strings) of every block under a recursive pin, and
// of every block this node holds of the objects the ledger rests on (ledgerRoots: bundles,
// submissions, logs, verdicts, agent images named by the stored campaigns and attestations),
// pinned or not: garbage collection never drops those. Raw leaves are named by their
// parents and never read. progress, if set, gets the count so far.
func (k *Keeper) pinnedSet(ctx context.Context, progress func(blocks int)) (map[string]struct{}, error) {
	set := map[string]struct{}{}
	type root struct {
		c      cid.Cid
		pinned bool // a pin's blocks must all be here; a ledger object may be held in part or not at all
	}
	var roots []root
	for sp := range k.o.Pinner.RecursiveKeys(ctx, false) {
		if sp.Err != nil {
			return nil, sp.Err
		}
		roots = append(roots, root{sp.Pin.Key, true})
	}
	for _, c := range k.ledgerRoots() {
		roots = append(roots, root{c, false})
	}
	for _, r := range roots {
		if _, ok := set[string(r.c.Hash())]; ok && !r.pinned {
			continue
		}
		stack := []cid.Cid{r.c}
		set[string(r.c.Hash())] = struct{}{}
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if c.Type() == cid.Raw {
				continue
			}
			b, err := k.o.Blockstore.Get(ctx, c)
			if err != nil && !r.pinned {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("pinned block %s (under %s): %w", c, r.c, err)
			}
			links, err := Links(b)
			if err != nil {
				return nil, err
			}
			for _, l := range links {
				h := string(l.Cid.Hash())
				if _, ok := set[h]; ok {
					continue
				}
				set[h] = struct{}{}
				stack = append(stack, l.Cid)
			}
			if progress != nil {
				progress(len(set))
			}
		}
	}
	return set, nil
}

// GCOptions tune GC.
type GCOptions struct {
	// DryRun reports what GC would remove and removes nothing.
	DryRun bool
	// Progress, if set, gets each phase's progress: "mark" (pinned blocks found so far),
	// "sweep" (blocks examined of all), "compact" (segments done of those to compact).
	Progress func(phase string, done, total int64)
	// UnpackAge is how old an .unpack-* folder must be to count as abandoned (default 1h):
	// an unpack in flight, perhaps by another process, is younger.
	UnpackAge time.Duration
}

// GC removes what nothing needs: blocks under no pin (under GCLock, so no add, import or
// fetch is between its first put and its pin), then rewrites pack segments that hold dead
// bytes, removes abandoned .unpack-* folders in the home (a killed unpack's temporary
// folder) and the workspace/ scratch folders of finished runs (their submissions, logs and
// attestations stay).
func (k *Keeper) GC(ctx context.Context, opts GCOptions) (api.GCReport, error) {
	rep := api.GCReport{DryRun: opts.DryRun, UnpackFolders: []string{}, Workspaces: []string{}}
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int64, int64) {}
	}
	if opts.UnpackAge == 0 {
		opts.UnpackAge = time.Hour
	}
	if err := k.gcBlocks(ctx, opts.DryRun, progress, &rep); err != nil {
		return rep, err
	}
	if err := k.gcFolders(opts, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func (k *Keeper) gcBlocks(ctx context.Context, dryRun bool, progress func(string, int64, int64), rep *api.GCReport) error {
	unlock := k.o.GCLocker.GCLock(ctx)
	defer unlock.Unlock(ctx)
	var keep map[string]struct{}
	if err := k.o.GuardMeta(func() error {
		var err error
		keep, err = k.pinnedSet(ctx, func(c int) { progress("mark", int64(c), -1) })
		return err
	}); err != nil {
		return err
	}
	ch, err := k.o.Blockstore.AllKeysChan(ctx)
	if err != nil {
		return err
	}
	var all []cid.Cid
	for c := range ch {
		all = append(all, c)
	}
	for i, c := range all {
		if _, ok := keep[string(c.Hash())]; !ok {
			size, err := k.o.Blockstore.GetSize(ctx, c)
			if err == nil {
				rep.BlockBytes += int64(size)
			}
			rep.Blocks++
			if !dryRun {
				if err := k.o.Blockstore.DeleteBlock(ctx, c); err != nil {
					return fmt.Errorf("gc: delete block %s: %w", c, err)
				}
			}
		}
		progress("sweep", int64(i+1), int64(len(all)))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if ps, ok := k.o.Store.(*diskstore.Pack); ok {
		if !dryRun {
			if err := ps.Sync(); err != nil { // the tombstones, before segments are rewritten
				return err
			}
		}
		segs, bytes, err := ps.Compact(ctx, dryRun, func(d, t int) { progress("compact", int64(d), int64(t)) })
		rep.Segments, rep.SegmentBytes = segs, bytes
		if err != nil {
			return fmt.Errorf("gc: %w", err)
		}
	}
	return nil
}

// gcFolders removes abandoned .unpack-* folders under the home and finished runs' workspaces.
func (k *Keeper) gcFolders(opts GCOptions, rep *api.GCReport) error {
	skip := map[string]bool{k.o.Home.BlocksDir(): true, k.o.Home.PackBlocksDir(): true, k.o.Home.DatastoreDir(): true, k.o.Home.ObjectsDir(): true}
	cutoff := k.o.Clock.Now().Add(-opts.UnpackAge)
	err := filepath.WalkDir(k.o.Home.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if skip[p] {
			return filepath.SkipDir
		}
		if name := d.Name(); strings.HasPrefix(name, ".") && strings.Contains(name, ".unpack-") {
			if fi, err := d.Info(); err == nil && fi.ModTime().Before(cutoff) {
				rep.UnpackFolders = append(rep.UnpackFolders, p)
				if !opts.DryRun {
					if err := os.RemoveAll(p); err != nil {
						return fmt.Errorf("gc: %w", err)
					}
				}
			}
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return err
	}
	runs, err := runner.ListRuns(k.o.Home)
	if err != nil {
		return fmt.Errorf("gc: list runs: %w", err)
	}
	for _, st := range runs {
		if !st.Phase.Final() {
			continue
		}
		dir := runner.RunDir(k.o.Home, st.ID)
		for _, ws := range []string{filepath.Join(dir, "workspace"), filepath.Join(dir, "eval", "workspace")} {
			if _, err := os.Lstat(ws); err != nil {
				continue
			}
			rep.Workspaces = append(rep.Workspaces, ws)
			if !opts.DryRun {
				if err := os.RemoveAll(ws); err != nil {
					return fmt.Errorf("gc: %w", err)
				}
			}
		}
	}
	return nil
}

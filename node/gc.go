package node

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

// pinnedSet returns the multihashes (as strings) of every block under a recursive pin, and
// of every block this node holds of the objects the ledger rests on (ledgerRoots: bundles,
// submissions, logs, verdicts, agent images named by the stored campaigns and attestations),
// pinned or not: garbage collection never drops those. Raw leaves are named by their
// parents and never read. progress, if set, gets the count so far.
func (n *Node) pinnedSet(ctx context.Context, progress func(blocks int)) (map[string]struct{}, error) {
	set := map[string]struct{}{}
	type root struct {
		c      cid.Cid
		pinned bool // a pin's blocks must all be here; a ledger object may be held in part or not at all
	}
	var roots []root
	for sp := range n.pinner.RecursiveKeys(ctx, false) {
		if sp.Err != nil {
			return nil, sp.Err
		}
		roots = append(roots, root{sp.Pin.Key, true})
	}
	for _, c := range n.ledgerRoots() {
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
			b, err := n.bstore.Get(ctx, c)
			if err != nil && !r.pinned {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("pinned block %s (under %s): %w", c, r.c, err)
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

// GCReport says what GC removed (or, in a dry run, would remove).
type GCReport struct {
	DryRun        bool     `json:"dry_run"`
	Blocks        int      `json:"blocks"`
	BlockBytes    int64    `json:"block_bytes"`
	Segments      int      `json:"segments"`
	SegmentBytes  int64    `json:"segment_bytes"`
	UnpackFolders []string `json:"unpack_folders"`
	Workspaces    []string `json:"workspaces"`
}

// GC removes what nothing needs: blocks under no pin (under GCLock, so no add, import or
// fetch is between its first put and its pin), then rewrites pack segments that hold dead
// bytes, removes abandoned .unpack-* folders in the home (a killed unpack's temporary
// folder) and the workspace/ scratch folders of finished runs (their submissions, logs and
// attestations stay).
func (n *Node) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	rep := GCReport{DryRun: opts.DryRun, UnpackFolders: []string{}, Workspaces: []string{}}
	progress := opts.Progress
	if progress == nil {
		progress = func(string, int64, int64) {}
	}
	if opts.UnpackAge == 0 {
		opts.UnpackAge = time.Hour
	}
	if err := n.gcBlocks(ctx, opts.DryRun, progress, &rep); err != nil {
		return rep, err
	}
	if err := n.gcFolders(opts, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

func (n *Node) gcBlocks(ctx context.Context, dryRun bool, progress func(string, int64, int64), rep *GCReport) error {
	unlock := n.gcl.GCLock(ctx)
	defer unlock.Unlock(ctx)
	var keep map[string]struct{}
	if err := n.guardMeta(func() error {
		var err error
		keep, err = n.pinnedSet(ctx, func(c int) { progress("mark", int64(c), -1) })
		return err
	}); err != nil {
		return err
	}
	ch, err := n.bstore.AllKeysChan(ctx)
	if err != nil {
		return err
	}
	var all []cid.Cid
	for c := range ch {
		all = append(all, c)
	}
	for i, c := range all {
		if _, ok := keep[string(c.Hash())]; !ok {
			size, err := n.bstore.GetSize(ctx, c)
			if err == nil {
				rep.BlockBytes += int64(size)
			}
			rep.Blocks++
			if !dryRun {
				if err := n.bstore.DeleteBlock(ctx, c); err != nil {
					return fmt.Errorf("gc: delete block %s: %w", c, err)
				}
			}
		}
		progress("sweep", int64(i+1), int64(len(all)))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if ps, ok := n.store.(*packStore); ok {
		if !dryRun {
			if err := ps.Sync(); err != nil { // the tombstones, before segments are rewritten
				return err
			}
		}
		segs, bytes, err := ps.compact(ctx, dryRun, func(d, t int) { progress("compact", int64(d), int64(t)) })
		rep.Segments, rep.SegmentBytes = segs, bytes
		if err != nil {
			return fmt.Errorf("gc: %w", err)
		}
	}
	return nil
}

// gcFolders removes abandoned .unpack-* folders under the home and finished runs' workspaces.
func (n *Node) gcFolders(opts GCOptions, rep *GCReport) error {
	skip := map[string]bool{n.home.BlocksDir(): true, n.home.PackBlocksDir(): true, n.home.DatastoreDir(): true, n.home.ObjectsDir(): true}
	cutoff := time.Now().Add(-opts.UnpackAge)
	err := filepath.WalkDir(n.home.Dir, func(p string, d fs.DirEntry, err error) error {
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
	runs, err := runner.ListRuns(n.home)
	if err != nil {
		return fmt.Errorf("gc: list runs: %w", err)
	}
	for _, st := range runs {
		if !st.Phase.Final() {
			continue
		}
		dir := runner.RunDir(n.home, st.ID)
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

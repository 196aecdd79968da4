package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	carv2 "github.com/ipld/go-car/v2"

	"github.com/evalmesh/evalmesh/tasks"
)

// AddOptions tune Add.
type AddOptions struct {
	// Unchecked packs any folder, not only a valid bundle.
	Unchecked bool
	// Progress, if set, gets the file bytes read so far.
	Progress func(done int64)
}

// Add packs the folder dir into a UnixFS DAG (the CID `ipfs add -r --cid-version=1` gives),
// stores its blocks, pins it under the folder's name, and returns the root CID.
func (n *Node) Add(ctx context.Context, dir string, opts AddOptions) (cid.Cid, error) {
	var root cid.Cid
	err := n.pins.Staged(ctx, func(bs blockstore.Blockstore) error {
		dag := merkledag.NewDAGService(blockservice.New(bs, n.bswap))
		var err error
		if root, err = tasks.Pack(ctx, dir, dag, tasks.PackOptions{Unchecked: opts.Unchecked, Progress: opts.Progress}); err != nil {
			return err
		}
		return n.pinLocal(ctx, root, filepath.Base(dir), true)
	})
	if err != nil {
		return cid.Undef, err
	}
	return root, nil
}

// GetOptions tune Get.
type GetOptions struct {
	// Progress, if set, gets the bytes fetched so far and the DAG's declared size.
	Progress func(done, total int64)
	// Unpacking, if set, is called once the fetch is done and unpacking starts.
	Unpacking func()
	// Timeout, when positive, replaces the node's StallTimeout for this fetch: Get fails
	// (wrapping ErrNotFound, naming the CID and the peers asked) once no block has arrived
	// for this long, the root included.
	Timeout time.Duration
	// Fetched, if set, gets what the fetch kept of an interrupted earlier one, once the fetch
	// is done (before pinning and unpacking).
	Fetched func(FetchReport)
}

// Get fetches the bundle root from connected peers (every block verified against its CID),
// pins it, and unpacks it into dir with the safe unpacker (no absolute paths, no "..", no
// links leaving the bundle, nothing over max_bundle_size). dir must not exist or be empty.
func (n *Node) Get(ctx context.Context, root cid.Cid, dir string, opts GetOptions) error {
	unlock := n.gcl.PinLock(ctx) // until pinned: GC must not take what was fetched
	defer func() {
		if unlock != nil {
			unlock.Unlock(ctx)
		}
	}()
	t0 := time.Now() // wall clock: measured for the log line below
	var size int64
	stall := n.opts.StallTimeout
	if opts.Timeout > 0 {
		stall = opts.Timeout
	}
	rep, err := n.fetch(ctx, root, func(d, t int64) {
		size = t
		if opts.Progress != nil {
			opts.Progress(d, t)
		}
	}, stall)
	if err != nil {
		return err
	}
	if opts.Fetched != nil {
		opts.Fetched(rep)
	}
	t1 := time.Now() // wall clock: measured for the log line below
	if err := n.pinLocal(ctx, root, "", true); err != nil {
		return err
	}
	unlock.Unlock(ctx)
	unlock = nil
	t2 := time.Now() // wall clock: measured for the log line below
	if opts.Unpacking != nil {
		opts.Unpacking()
	}
	if err := tasks.Unpack(ctx, n.local, root, dir, tasks.UnpackOptions{MaxSize: n.cfg.MaxBundleSize, Leaves: n.writes}); err != nil {
		return err
	}
	t3 := time.Now() // wall clock: measured for the log line below
	n.opts.Logf("get %s: %d bytes fetched in %s (%.0f MB/s), pinned in %s, unpacked in %s",
		root, size, t1.Sub(t0).Round(time.Millisecond), float64(size)/t1.Sub(t0).Seconds()/1e6,
		t2.Sub(t1).Round(time.Millisecond), t3.Sub(t2).Round(time.Millisecond))
	return nil
}

// ExportCAR writes the DAG under root, which must be local, to w as a CARv1 with root as
// its only root (the format `ipfs dag export` writes and `ipfs dag import` reads).
func (n *Node) ExportCAR(ctx context.Context, root cid.Cid, w io.Writer) error {
	if ok, err := n.bstore.Has(ctx, root); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%s is not in this node's blockstore: fetch it first with `evalmesh pin add %s`", root, root)
	}
	if err := tasks.WriteCAR(ctx, n.local, root, w); err != nil {
		return fmt.Errorf("export %s: %w", root, err)
	}
	return nil
}

// ImportCAR stores every block of a CAR (v1 or v2) read from r, each checked against its CID,
// then pins each of its roots; every root's DAG must be complete. It returns the roots.
func (n *Node) ImportCAR(ctx context.Context, r io.Reader) ([]cid.Cid, error) {
	var roots []cid.Cid
	err := n.pins.Staged(ctx, func(bs blockstore.Blockstore) error {
		var err error
		if roots, err = readCAR(r, func(b blocks.Block) error { return bs.Put(ctx, b) }); err != nil {
			return err
		}
		for _, root := range roots {
			if err := n.pinLocal(ctx, root, "import-car", false); err != nil {
				return fmt.Errorf("CAR root %s is incomplete: %w", root, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return roots, nil
}

// readCAR passes every block of a CAR to put, each checked against its CID, and returns the
// CAR's roots (at least one).
func readCAR(r io.Reader, put func(blocks.Block) error) ([]cid.Cid, error) {
	br, err := carv2.NewBlockReader(r)
	if err != nil {
		return nil, fmt.Errorf("not a CAR file: %w", err)
	}
	if len(br.Roots) == 0 {
		return nil, errors.New("CAR has no roots: nothing to pin")
	}
	for {
		blk, err := br.Next()
		if errors.Is(err, io.EOF) {
			return br.Roots, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read CAR: %w", err)
		}
		if err := put(blk); err != nil {
			return nil, err
		}
	}
}

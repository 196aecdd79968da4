package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/diskstore"
)

// quotaStore fails writes with ENOSPC past a byte budget, through the block stores' own
// error (diskstore.WriteErr); used only where a small tmpfs cannot be mounted (not root).
type quotaStore struct {
	blockstore.Blockstore
	mu   sync.Mutex
	left int
}

func (q *quotaStore) Put(ctx context.Context, b blocks.Block) error {
	q.mu.Lock()
	q.left -= len(b.RawData())
	full := q.left < 0
	q.mu.Unlock()
	if full {
		return diskstore.WriteErr("quota", b.Cid(), &os.PathError{Op: "write", Path: "quota", Err: syscall.ENOSPC})
	}
	return q.Blockstore.Put(ctx, b)
}

func (q *quotaStore) PutMany(ctx context.Context, bs []blocks.Block) error {
	for _, b := range bs {
		if err := q.Put(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// blocksOnSmallDisk puts h's blocks on a 2 MiB tmpfs; where this process may not mount one
// (not root), opts' blockstore fails writes with ENOSPC past 2 MiB instead.
func blocksOnSmallDisk(t *testing.T, h home.Home, opts *Options) {
	t.Helper()
	if err := os.MkdirAll(testBlocksDir(h), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", testBlocksDir(h), "tmpfs", 0, "size=2m"); err != nil {
		t.Logf("cannot mount a tmpfs (%v): injecting ENOSPC past 2 MiB instead", err)
		opts.WrapBlockstore = func(bs blockstore.Blockstore) blockstore.Blockstore {
			return &quotaStore{Blockstore: bs, left: 2 << 20}
		}
		return
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(testBlocksDir(h), 0); err != nil {
			t.Errorf("unmount %s: %v", testBlocksDir(h), err)
		}
	})
}

// tmpfsHome is an initialised home whose whole folder is a tmpfs of size (mount's size=
// option), unmounted at the end of the test; the test is skipped where it cannot be mounted.
func tmpfsHome(t *testing.T, size string) home.Home {
	t.Helper()
	h := home.Home{Dir: filepath.Join(t.TempDir(), "home")}
	if err := os.Mkdir(h.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", h.Dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(h.Dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", h.Dir, err)
		}
	})
	if _, err := h.Init(); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFetchDiskFull puts the getter's blockstore on a 2 MiB tmpfs: a bundle that fits
// arrives, a bigger one fails with an error that says the disk is full, and what was
// stored before stays readable and pinned.
func TestFetchDiskFull(t *testing.T) {
	forEachPath(t, func(t *testing.T, testOptions func() Options) {
		h := newHome(t)
		opts := testOptions()
		blocksOnSmallDisk(t, h, &opts)
		b := startNodeAt(t, h, opts)
		a := startNode(t, testOptions())
		small := testFiles(600 << 10)
		big := map[string][]byte{"big.bin": randomBytes(99, 4<<20)}
		smallRoot := seed(t, small, a)
		bigRoot := seed(t, big, a)
		connect(t, b, a)

		if err := b.Pin(context.Background(), smallRoot, "small", nil); err != nil {
			t.Fatal(err)
		}
		err := b.Pin(context.Background(), bigRoot, "big", nil)
		if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free space") {
			t.Fatalf("fetch onto a full disk: err = %v, want ErrDiskFull saying to free space", err)
		}
		t.Logf("error shown: %v", err)
		if ok, _ := b.IsPinned(context.Background(), bigRoot); ok {
			t.Fatal("a bundle that did not fit was pinned")
		}
		checkFiles(t, b, smallRoot, small)
		pins, err := b.Pins(context.Background())
		if err != nil || len(pins) != 1 || pins[0].CID != smallRoot.String() {
			t.Fatalf("pins after disk full = %v, %v; want only %s", pins, err, smallRoot)
		}
	})
}

// TestAddDiskFull: adding a folder that does not fit in the blockstore fails with the
// disk-full error, pins nothing, and the bundle added before stays readable and pinned.
func TestAddDiskFull(t *testing.T) {
	h := newHome(t)
	opts := testOptions()
	blocksOnSmallDisk(t, h, &opts)
	n := startNodeAt(t, h, opts)
	ctx := context.Background()
	small := map[string][]byte{"s.bin": randomBytes(5, 500<<10)}
	smallDir, bigDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(smallDir, "s.bin"), small["s.bin"], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bigDir, "big.bin"), randomBytes(6, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	smallRoot, err := n.Add(ctx, smallDir, AddOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Add(ctx, bigDir, AddOptions{Unchecked: true})
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("add onto a full disk: err = %v, want ErrDiskFull saying to free space", err)
	}
	pins, err := n.Pins(ctx)
	if err != nil || len(pins) != 1 || pins[0].CID != smallRoot.String() {
		t.Fatalf("pins after a failed add = %v, %v; want only %s", pins, err, smallRoot)
	}
	checkFiles(t, n, smallRoot, small)
}

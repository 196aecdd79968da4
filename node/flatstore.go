package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/multiformats/go-base32"
	"github.com/multiformats/go-multihash"
	"golang.org/x/sys/unix"
)

// flatStore keeps one file per block, named by the base32 multihash and sharded by its
// next-to-last two characters (the flatfs "next-to-last/2" layout kubo uses). Measured against
// pebble for 256 KiB blocks it writes and reads faster (see BenchmarkBlockstore), and a full
// disk fails one Put with a clean error instead of putting a database into a failed state.
//
// Put writes a temporary file and renames it, so a crash never leaves a torn block under its
// final name. Files are not fsynced one by one: Sync flushes the whole filesystem once, and
// the node calls it before it records a pin, so a pinned DAG is on stable storage.
type flatStore struct {
	dir string
}

var _ blockstore.Blockstore = (*flatStore)(nil)

func openFlatStore(dir string) (*flatStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("blockstore %s: %w", dir, err)
	}
	return &flatStore{dir: dir}, nil
}

func (s *flatStore) path(h multihash.Multihash) (string, string) {
	name := base32.RawStdEncoding.EncodeToString(h)
	shard := name[len(name)-3 : len(name)-1]
	return filepath.Join(s.dir, shard), name + ".data"
}

func (s *flatStore) file(c cid.Cid) string {
	d, n := s.path(c.Hash())
	return filepath.Join(d, n)
}

func (s *flatStore) Has(_ context.Context, c cid.Cid) (bool, error) {
	_, err := os.Stat(s.file(c))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

func (s *flatStore) Get(_ context.Context, c cid.Cid) (blocks.Block, error) {
	data, err := os.ReadFile(s.file(c))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ipld.ErrNotFound{Cid: c}
	}
	if err != nil {
		return nil, fmt.Errorf("blockstore: read %s: %w", c, err)
	}
	return blocks.NewBlockWithCid(data, c)
}

func (s *flatStore) GetSize(_ context.Context, c cid.Cid) (int, error) {
	fi, err := os.Stat(s.file(c))
	if errors.Is(err, fs.ErrNotExist) {
		return -1, ipld.ErrNotFound{Cid: c}
	}
	if err != nil {
		return -1, err
	}
	return int(fi.Size()), nil
}

func (s *flatStore) Put(_ context.Context, b blocks.Block) error {
	dir, name := s.path(b.Cid().Hash())
	final := filepath.Join(dir, name)
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return s.writeErr(b.Cid(), err)
	}
	tmp, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return s.writeErr(b.Cid(), err)
	}
	_, werr := tmp.Write(b.RawData())
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), final)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return s.writeErr(b.Cid(), werr)
	}
	return nil
}

// ErrDiskFull is wrapped by blockstore writes that failed for lack of space.
var ErrDiskFull = errors.New("disk full")

func (s *flatStore) writeErr(c cid.Cid, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("blockstore %s: %w writing block %s: free space on that filesystem (or move the home with --home) and retry; blocks already stored are intact: %v", s.dir, ErrDiskFull, c, err)
	}
	return fmt.Errorf("blockstore %s: write block %s: %w", s.dir, c, err)
}

func (s *flatStore) PutMany(ctx context.Context, bs []blocks.Block) error {
	for _, b := range bs {
		if err := s.Put(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

func (s *flatStore) DeleteBlock(_ context.Context, c cid.Cid) error {
	err := os.Remove(s.file(c))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (s *flatStore) AllKeysChan(ctx context.Context) (<-chan cid.Cid, error) {
	ch := make(chan cid.Cid, 64)
	go func() {
		defer close(ch)
		_ = filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			name := d.Name()
			if !strings.HasSuffix(name, ".data") {
				return nil
			}
			raw, err := base32.RawStdEncoding.DecodeString(strings.TrimSuffix(name, ".data"))
			if err != nil {
				return nil
			}
			h, err := multihash.Cast(raw)
			if err != nil {
				return nil
			}
			select {
			case ch <- cid.NewCidV1(cid.Raw, h):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return ch, nil
}

// Sync flushes every block written so far to stable storage (one syncfs for the whole
// filesystem, far cheaper than an fsync per block).
func (s *flatStore) Sync() error {
	f, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("blockstore %s: sync: %w", s.dir, err)
	}
	return nil
}

package diskstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/ipfs/go-datastore"
	pebbleds "github.com/ipfs/go-ds-pebble"
	"github.com/multiformats/go-multihash"
)

// BenchmarkBlockstore compares the two blockstores considered for bundle blocks: boxo's
// blockstore over go-ds-pebble, and Flat (one file per block). It writes then reads
// 64 MiB in 256 KiB raw blocks, the size the bundle chunker makes, and ends with the sync
// each does before a pin is recorded.
func BenchmarkBlockstore(b *testing.B) {
	const blockSize, n = 256 << 10, 256
	blks := make([]blocks.Block, n)
	for i := range blks {
		data := make([]byte, blockSize)
		rand.Read(data)
		h, _ := multihash.Sum(data, multihash.SHA2_256, -1)
		blks[i], _ = blocks.NewBlockWithCid(data, cid.NewCidV1(cid.Raw, h))
	}
	type store struct {
		bs   blockstore.Blockstore
		sync func() error
		stop func() error
	}
	stores := []struct {
		name string
		open func(dir string) store
	}{
		{"pebble", func(dir string) store {
			d, err := pebbleds.NewDatastore(dir)
			if err != nil {
				b.Fatal(err)
			}
			return store{blockstore.NewBlockstore(d, blockstore.NoPrefix()), func() error { return d.Sync(context.Background(), dsKey("/")) }, d.Close}
		}},
		{"flat", func(dir string) store {
			s, err := OpenFlat(dir)
			if err != nil {
				b.Fatal(err)
			}
			return store{s, s.Sync, func() error { return nil }}
		}},
		{"pack", func(dir string) store {
			s, err := OpenPack(dir)
			if err != nil {
				b.Fatal(err)
			}
			return store{s, s.Sync, s.Close}
		}},
	}
	ctx := context.Background()
	for _, st := range stores {
		b.Run(st.name+"/write", func(b *testing.B) {
			b.SetBytes(blockSize * n)
			for b.Loop() {
				s := st.open(b.TempDir())
				for _, blk := range blks {
					if err := s.bs.Put(ctx, blk); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.sync(); err != nil {
					b.Fatal(err)
				}
				s.stop()
			}
		})
		b.Run(st.name+"/read", func(b *testing.B) {
			s := st.open(b.TempDir())
			defer s.stop()
			for _, blk := range blks {
				if err := s.bs.Put(ctx, blk); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(blockSize * n)
			b.ResetTimer()
			for b.Loop() {
				for _, blk := range blks {
					if _, err := s.bs.Get(ctx, blk.Cid()); err != nil {
						b.Fatal(fmt.Errorf("get: %w", err))
					}
				}
			}
		})
	}
}

func dsKey(s string) datastore.Key { return datastore.NewKey(s) }

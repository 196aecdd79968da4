package diskstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/exchange/offline"
	"github.com/ipfs/boxo/ipld/merkledag"

	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/tasks"
)

// BenchmarkUnpackFromStore is the unpack at the end of `evalmesh task get`: a bundle's
// shape (4 × 100 MiB and 2,000 × 4 KiB files) packed into a pack store, then unpacked into
// a new folder, every block re-hashed. "dagreader" reads the files with boxo's DagReader
// (a fresh slice per leaf), "pooled" as the node does, the raw leaves through the store's
// GetPooled in reused buffers (tasks.UnpackOptions.Leaves). Compare cpuMB/s of the two in
// one run; TMPDIR=/dev/shm keeps the disk out of it.
func BenchmarkUnpackFromStore(b *testing.B) {
	dir := b.TempDir()
	folder := filepath.Join(dir, "folder")
	if err := os.MkdirAll(filepath.Join(folder, "small"), 0o755); err != nil {
		b.Fatal(err)
	}
	var key [32]byte
	r := rand.NewChaCha8(key)
	var total int64
	write := func(name string, buf []byte) {
		r.Read(buf)
		if err := os.WriteFile(filepath.Join(folder, name), buf, 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(len(buf))
	}
	for i := 0; i < 4; i++ {
		write(fmt.Sprintf("large-%d.bin", i), make([]byte, 100<<20))
	}
	small := make([]byte, 4<<10)
	for i := 0; i < 2000; i++ {
		write(fmt.Sprintf("small/f%05d.dat", i), small)
	}
	ps, err := OpenPack(filepath.Join(dir, "store"))
	if err != nil {
		b.Fatal(err)
	}
	defer ps.Close()
	dag := merkledag.NewDAGService(blockservice.New(ps, offline.Exchange(ps)))
	ctx := context.Background()
	root, err := tasks.Pack(ctx, folder, dag, tasks.PackOptions{Unchecked: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name   string
		leaves tasks.LeafGetter
	}{{"dagreader", nil}, {"pooled", ps}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(total)
			defer testutil.ReportPeakRSS(b)()
			defer testutil.ReportCPURate(b, total)()
			for i := 0; i < b.N; i++ {
				out := filepath.Join(dir, "out")
				if err := tasks.Unpack(ctx, dag, root, out, tasks.UnpackOptions{Leaves: mode.leaves}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.RemoveAll(out); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

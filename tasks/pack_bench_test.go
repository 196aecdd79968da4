package tasks

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// Sizes of the pack benchmark (bench/pack.sh runs it at full size). The shapes:
// a 1 GiB file; a folder of 2,000 small files plus 4 x 100 MiB.
var (
	benchBigMiB   = flag.Int("pack.bigmib", 1024, "pack benchmark: size of the single file, MiB")
	benchLargeMiB = flag.Int("pack.largemib", 100, "pack benchmark: size of each of the folder's 4 large files, MiB")
	benchSmall    = flag.Int("pack.small", 2000, "pack benchmark: number of small files in the folder")
)

const benchSmallSize = 4 << 10

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// writeStream writes n pseudo-random bytes cheaply: ChaCha8 fills one 4 MiB buffer, then
// each further buffer is the previous one with a counter stamped every 256 KiB, so no two
// chunks repeat (no dedup shortcut) and generation costs next to nothing.
func writeStream(p string, n int64, seed byte) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	var key [32]byte
	key[0] = seed
	rand.NewChaCha8(key).Read(buf)
	var ctr uint64
	for n > 0 {
		for off := 0; off < len(buf); off += ChunkSize {
			ctr++
			for i := 0; i < 8; i++ {
				buf[off+i] = byte(ctr >> (8 * i))
			}
			buf[off+8] = seed
		}
		w := int64(len(buf))
		if w > n {
			w = n
		}
		if _, err := f.Write(buf[:w]); err != nil {
			f.Close()
			return err
		}
		n -= w
	}
	return f.Close()
}

func benchData(b *testing.B) (file, folder string, fileBytes, folderBytes int64) {
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "evalmesh-packbench-")
		if benchErr != nil {
			return
		}
		if benchErr = writeStream(filepath.Join(benchDir, "big.bin"), int64(*benchBigMiB)<<20, 1); benchErr != nil {
			return
		}
		folder := filepath.Join(benchDir, "folder")
		small := filepath.Join(folder, "small")
		if benchErr = os.MkdirAll(small, 0o755); benchErr != nil {
			return
		}
		for i := 0; i < 4; i++ {
			if benchErr = writeStream(filepath.Join(folder, fmt.Sprintf("large-%d.bin", i)), int64(*benchLargeMiB)<<20, byte(10+i)); benchErr != nil {
				return
			}
		}
		var key [32]byte
		r := rand.NewChaCha8(key)
		buf := make([]byte, benchSmallSize)
		for i := 0; i < *benchSmall; i++ {
			r.Read(buf)
			if benchErr = os.WriteFile(filepath.Join(small, fmt.Sprintf("f%05d.dat", i)), buf, 0o644); benchErr != nil {
				return
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return filepath.Join(benchDir, "big.bin"), filepath.Join(benchDir, "folder"),
		int64(*benchBigMiB) << 20, 4*int64(*benchLargeMiB)<<20 + int64(*benchSmall)*benchSmallSize
}

// sha256Tree is the floor: read every file and sha256 it in 256 KiB pieces, as the
// importer hashes each leaf.
func sha256Tree(root string) error {
	buf := make([]byte, ChunkSize)
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		for {
			n, err := io.ReadFull(f, buf)
			if n > 0 {
				sha256.Sum256(buf[:n])
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
}

// BenchmarkPack compares packing (root CID only; and streaming every block into a CAR)
// with plain crypto/sha256 over the same bytes, read from the page cache alike. A CPU
// profile of it with -benchtime Nx holds N+1 runs of each row (the testing package runs
// each benchmark once with b.N = 1 first), and the data generation.
func BenchmarkPack(b *testing.B) {
	file, folder, fileBytes, folderBytes := benchData(b)
	ctx := context.Background()
	for _, in := range []struct {
		name  string
		path  string
		bytes int64
	}{{"file", file, fileBytes}, {"folder", folder, folderBytes}} {
		b.Run(in.name+"/sha256", func(b *testing.B) {
			b.SetBytes(in.bytes)
			defer testutil.ReportPeakRSS(b)()
			defer testutil.ReportCPURate(b, in.bytes)()
			for i := 0; i < b.N; i++ {
				if err := sha256Tree(in.path); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/pack", func(b *testing.B) {
			b.SetBytes(in.bytes)
			defer testutil.ReportPeakRSS(b)()
			defer testutil.ReportCPURate(b, in.bytes)()
			for i := 0; i < b.N; i++ {
				if _, err := Pack(ctx, in.path, NewHashOnlyDAG(), PackOptions{Unchecked: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/pack-car", func(b *testing.B) {
			b.SetBytes(in.bytes)
			car := filepath.Join(benchDir, "out.car")
			defer testutil.ReportPeakRSS(b)()
			defer testutil.ReportCPURate(b, in.bytes)()
			for i := 0; i < b.N; i++ {
				packCAR(b, in.path, car)
			}
			os.Remove(car)
		})
	}
}

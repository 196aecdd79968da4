package tasks

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// BenchmarkUnpack unpacks the pack benchmark's folder (4 large files and many small ones) from
// a CAR, as `evalmesh task unpack` does: every block read from the CAR, re-hashed against its
// CID and written into a new folder (removed after each round, so the writes land on pages
// the last round freed). The sha256 row hashes the same bytes from the page cache, the least
// the re-hashing costs; compare cpuMB/s of the two.
func BenchmarkUnpack(b *testing.B) {
	_, folder, _, folderBytes := benchData(b)
	ctx := context.Background()
	car := filepath.Join(benchDir, "unpack.car")
	packCAR(b, folder, car)
	defer os.Remove(car)
	b.Run("folder/sha256", func(b *testing.B) {
		b.SetBytes(folderBytes)
		defer testutil.ReportPeakRSS(b)()
		defer testutil.ReportCPURate(b, folderBytes)()
		for i := 0; i < b.N; i++ {
			if err := sha256Tree(folder); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("folder/unpack", func(b *testing.B) {
		b.SetBytes(folderBytes)
		defer testutil.ReportPeakRSS(b)()
		defer testutil.ReportCPURate(b, folderBytes)()
		for i := 0; i < b.N; i++ {
			dir := filepath.Join(benchDir, "unpacked")
			if _, err := UnpackCAR(ctx, car, dir, UnpackOptions{}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/evalmesh/evalmesh/internal/sha256x2"
)

// floorRows measures the work a verifying fetch must do beyond moving the bytes, and prints
// the floor it sets on this machine (issue 18):
//
//	sha256, 2 blocks a pass,   every 256 KiB block hashed once, two at a time as the receiver
//	in cache, 1 core           does (internal/sha256x2); the receiver must verify each block,
//	                           and hashing bytes already in cache is the cheapest it can be
//	write into homes' fs       the same byte count written into a new file in the daemons'
//	                           homes filesystem (2 MiB writes, fsync), as the receiving
//	                           store must, after a first untimed copy (the sender's store)
//	floor: stream+sha256+write the sum of the stream's, the hash's and the write's CPU, spread
//	                           over every core: wall = max(stream wall, CPU / cores)
//
// On a VM whose host backs guest memory lazily (this machine: free pages are reported back to
// the host), writing into pages the guest has not touched lately costs far more than writing
// into recycled ones, so the write row moves with the machine's memory state just as the
// receiving daemon's pwrites do; both are measured in the same run.
// It returns the floor in MB/s.
func floorRows(tw *tabwriter.Writer, dir, set, src string, size int64, raw float64, stream result) (float64, error) {
	pieces := make([]byte, 512<<10)
	if f, err := os.Open(sampleFile(src)); err == nil {
		_, _ = io.ReadFull(f, pieces)
		f.Close()
	}
	a, b := pieces[:256<<10], pieces[256<<10:]
	h := measure(func() error {
		n := int64(0)
		for ; n+int64(len(pieces)) <= size; n += int64(len(pieces)) {
			sha256x2.Sum256(a, b)
		}
		if n < size {
			sha256.Sum256(pieces[:size-n])
		}
		return nil
	})
	h.set, h.path, h.store, h.bytes, h.raw = set, "sha256, 2 blocks a pass, in cache, 1 core", "-", size, raw
	print(tw, h.row)

	homes := homesFor(dir)
	if err := os.MkdirAll(homes, 0o755); err != nil {
		return 0, err
	}
	// Each run first writes the bytes once untimed (as the sending daemon's task add stores
	// them before the fetch), then the timed copy into a new file; every file stays until
	// all runs are done, so no run writes into pages another just freed. On this VM that
	// matters: the first GiB or so of new pages comes cheap (pages the guest freed lately),
	// later ones cost several times more (docs/transfer-protocol.md, "The floor").
	var w result
	var made []string
	for i := 0; i < max(runs, 1); i++ {
		pre, timed := filepath.Join(homes, fmt.Sprintf("floor-probe-%d-store", i)), filepath.Join(homes, fmt.Sprintf("floor-probe-%d", i))
		made = append(made, pre, timed)
		if err := writeNew(pre, size); err != nil {
			w.err = err
			break
		}
		c0, t0 := cpuTime(), time.Now()
		err := writeNew(timed, size)
		r := result{row: row{wall: time.Since(t0), cpu: cpuTime() - c0}, err: err}
		if err != nil || i == 0 || r.wall < w.wall {
			w = r
		}
		if err != nil {
			break
		}
	}
	for _, p := range made {
		os.Remove(p)
	}
	if w.err != nil {
		return 0, fmt.Errorf("write probe in %s: %w", homes, w.err)
	}
	w.set, w.path, w.store, w.bytes, w.raw = set, "write into homes' fs, new pages", "-", size, raw
	print(tw, w.row)

	cpu := stream.cpu + h.cpu + w.cpu
	wall := max(stream.wall, cpu/time.Duration(runtime.NumCPU()))
	f := row{set: set, path: fmt.Sprintf("floor: stream+sha256+write, %d cores", runtime.NumCPU()), store: "-",
		bytes: size, raw: raw, wall: wall, cpu: cpu, stream: mbps(size, stream.wall)}
	print(tw, f)
	return mbps(size, wall), nil
}

// sampleFile is the file under dir the sha256 row takes its bytes from, the last in files' order:
// the 1g set's only file, the bundle's last 100 MiB one (random bytes, as every data set's).
func sampleFile(dir string) string {
	fs, err := files(dir)
	if err != nil || len(fs) == 0 {
		return ""
	}
	return fs[len(fs)-1]
}

// writeNew writes size bytes into a new file at path in 2 MiB writes and fsyncs it.
func writeNew(path string, size int64) error {
	buf := make([]byte, 2<<20)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			return err
		}
	}
	return f.Sync()
}

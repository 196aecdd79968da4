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
//	write into homes' fs,      the same byte count written into a new file in the daemons'
//	new pages                  homes filesystem (2 MiB writes, fsync), as the receiving
//	                           store must, after a first untimed copy (the sender's store),
//	                           every earlier copy kept: pages no one freed a moment before
//	write into homes' fs,      the same again right after that file is removed: pages the
//	recycled pages             guest freed a moment before, the cheapest a write can be
//	floor: stream+sha256+write the sum of the stream's, the hash's and the recycled write's CPU,
//	                           spread over every core: wall = max(stream wall, CPU / cores)
//	floor, new pages           the same with the new-pages write
//
// On a VM whose host backs guest memory lazily (this machine: free pages are reported back to
// the host), writing into pages the guest has not touched lately costs far more than writing
// into recycled ones (0.35 against 1.2-2.3 CPU-s per GiB here), and which kind the receiving
// daemon's pwrites get moves with the machine's memory state from run to run. The floor the
// fetch row's x floor divides by is the recycled one, so that it is a true least: a fetch
// above it would be a fault in the probe (the new-pages floor alone put fetches at 1.5x
// their "floor" when the daemon's pages came recycled). The new-pages floor shows how far
// the same machine's floor falls when they do not.
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
	// them before the fetch), then the timed copy into a new file; that file stays until all
	// runs are done, so no run's new-pages copy writes into pages another just freed. The
	// recycled copies follow at once, each into the pages of a file just removed.
	var fresh, recycled result
	var made []string
	// best keeps the faster of w and r; the first sample always.
	best := func(w *result, r result) error {
		if w.wall == 0 || r.wall < w.wall {
			*w = r
		}
		return r.err
	}
	err := func() error {
		for i := 0; i < max(runs, 1); i++ {
			pre := filepath.Join(homes, fmt.Sprintf("floor-probe-%d-store", i))
			timed := filepath.Join(homes, fmt.Sprintf("floor-probe-%d", i))
			scratch := filepath.Join(homes, fmt.Sprintf("floor-probe-%d-scratch", i))
			again := filepath.Join(homes, fmt.Sprintf("floor-probe-%d-recycled", i))
			made = append(made, pre, timed)
			if err := writeNew(pre, size); err != nil {
				return err
			}
			if err := best(&fresh, timedWrite(timed, size)); err != nil {
				return err
			}
			if err := writeNew(scratch, size); err != nil {
				return err
			}
			os.Remove(scratch)
			// Twice, each into the pages the write before it freed: one sample missed the
			// cheap pages in a -runs 1 run (a fetch then printed 1.89x its floor).
			for j := 0; j < 2; j++ {
				err := best(&recycled, timedWrite(again, size))
				os.Remove(again)
				if err != nil {
					return err
				}
			}
		}
		return nil
	}()
	for _, p := range made {
		os.Remove(p)
	}
	if err != nil {
		return 0, fmt.Errorf("write probe in %s: %w", homes, err)
	}
	fresh.set, fresh.path, fresh.store, fresh.bytes, fresh.raw = set, "write into homes' fs, new pages", "-", size, raw
	print(tw, fresh.row)
	recycled.set, recycled.path, recycled.store, recycled.bytes, recycled.raw = set, "write into homes' fs, recycled pages", "-", size, raw
	print(tw, recycled.row)

	floor := func(name string, w result) row {
		cpu := stream.cpu + h.cpu + w.cpu
		wall := max(stream.wall, cpu/time.Duration(runtime.NumCPU()))
		return row{set: set, path: fmt.Sprintf("%s, %d cores", name, runtime.NumCPU()), store: "-",
			bytes: size, raw: raw, wall: wall, cpu: cpu, stream: mbps(size, stream.wall)}
	}
	least := floor("floor: stream+sha256+write", recycled)
	print(tw, least)
	print(tw, floor("floor, new pages", fresh))
	return mbps(size, least.wall), nil
}

// timedWrite times writeNew into path, in wall and this process's CPU.
func timedWrite(path string, size int64) result {
	c0, t0 := cpuTime(), time.Now()
	err := writeNew(path, size)
	return result{row: row{wall: time.Since(t0), cpu: cpuTime() - c0}, err: err}
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

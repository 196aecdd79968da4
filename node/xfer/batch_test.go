package xfer

import (
	"fmt"
	"testing"
)

// simulateBatches hands q's batches to streams that move bytes at the given rates (bytes per
// unit of time), each taking the next batch the moment it is idle, as pool does, and returns
// the batches cut and how long the first stream to finish waits for the last.
func simulateBatches(q *batchQueue, rates []float64) (batches [][]pend, tail float64) {
	free := make([]float64, len(rates)) // when each stream is next idle
	for len(q.items) > 0 {
		s := 0
		for i := range free {
			if free[i] < free[s] {
				s = i
			}
		}
		b := q.next()
		batches = append(batches, b)
		var bytes int64
		for _, p := range b {
			bytes += estimate(p)
		}
		free[s] += float64(bytes) / rates[s]
	}
	first, last := free[0], free[0]
	for _, f := range free {
		first, last = min(first, f), max(last, f)
	}
	return batches, last - first
}

func items(sizes ...uint64) []pend {
	out := make([]pend, len(sizes))
	for i, s := range sizes {
		out[i] = pend{mode: ModeDAG, size: s}
	}
	return out
}

func repeat(n int, size uint64) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = size
	}
	return out
}

// TestBatchesShrinkSoStreamsFinishTogether checks that the streams of a split fetch end within
// one small batch of each other. bench/transfer's bundle (4 x 100 MiB files, then 20 folders of
// small files, 3.4 MiB each) cut into fixed batches of a quarter of each stream's share left
// one stream 54 MiB of small files to fetch alone at the end.
func TestBatchesShrinkSoStreamsFinishTogether(t *testing.T) {
	const MiB = 1 << 20
	bundle := append(repeat(4, 100*MiB), repeat(20, 3565158)...)
	file := append(repeat(23, 45613056), 24*MiB) // a 1 GiB file's root: 174 leaves a link
	for _, tc := range []struct {
		name  string
		sizes []uint64
		rates []float64
		// the longest the last stream may run alone, in time units (a unit moves one byte
		// at rate 1)
		maxTail float64
	}{
		{"bundle, 2 streams", bundle, []float64{1, 1}, 8 * MiB},
		{"1 GiB file, 2 streams", file, []float64{1, 1}, 45613056},
		{"many small subtrees, one stream half as fast", repeat(1000, MiB), []float64{1, 0.5}, 8 * MiB / 0.5},
		{"bundle, 4 streams", bundle, []float64{1, 1, 1, 1}, 100 * MiB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var total uint64
			for _, s := range tc.sizes {
				total += s
			}
			batches, tail := simulateBatches(newBatchQueue(items(tc.sizes...), len(tc.rates), 0), tc.rates)
			var got uint64
			var cut []string
			for _, b := range batches {
				var sum uint64
				for _, p := range b {
					sum += p.size
				}
				got += sum
				cut = append(cut, fmt.Sprintf("%d:%.1fMiB", len(b), float64(sum)/MiB))
			}
			if got != total {
				t.Fatalf("batches cover %d bytes, want all %d", got, total)
			}
			if tail > tc.maxTail {
				t.Errorf("the last stream ran alone for %.1f Mi units (MiB at rate 1), want at most %.1f; batches %v", tail/MiB, tc.maxTail/MiB, cut)
			}
		})
	}
}

// TestBatchQueueFixedSizeAndGiveBack checks WithBatchBytes's fixed size, that a batch always
// takes at least one item however large, and that what a failed stream owed is cut first.
func TestBatchQueueFixedSizeAndGiveBack(t *testing.T) {
	q := newBatchQueue(items(5, 5, 5, 20, 5), 2, 10)
	if b := q.next(); len(b) != 2 {
		t.Fatalf("first batch has %d items, want 2 (5+5 fit 10)", len(b))
	}
	if b := q.next(); len(b) != 1 || b[0].size != 5 {
		t.Fatalf("second batch %v, want the third item alone (5+20 exceeds 10)", b)
	}
	if b := q.next(); len(b) != 1 || b[0].size != 20 {
		t.Fatalf("third batch %v, want the 20 alone (larger than the target)", b)
	}
	q.pushFront(items(7, 1))
	if q.queued != 7+1+5 {
		t.Fatalf("queued %d bytes after the give-back, want 13", q.queued)
	}
	if b := q.next(); len(b) != 2 || b[0].size != 7 || b[1].size != 1 {
		t.Fatalf("batch after the give-back %v, want the returned 7 and 1 first", b)
	}
	one := newBatchQueue(items(5, 5, 5), 1, 0)
	if b := one.next(); len(b) != 3 {
		t.Fatalf("with one stream the batch has %d items, want the whole queue", len(b))
	}
}

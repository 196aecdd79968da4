package runner

import (
	"slices"
	"testing"
	"time"
)

// sampleTimes lists when waitAgent samples an agent during its first span: the early samples
// (nextEarlySample) and the poll interval's ticks.
func sampleTimes(interval, span time.Duration) []time.Duration {
	var at []time.Duration
	for t := interval; t <= span; t += interval {
		at = append(at, t)
	}
	early := min(earlyFirstSample, interval)
	for t := early; early > 0 && t <= span; {
		at = append(at, t)
		if early = nextEarlySample(early, t, interval); early > 0 {
			t += early
		}
	}
	return at
}

// In its first seconds an agent is sampled at least every earlyMaxGap, so a misbehaviour
// that lasts longer than that (a fork bomb held at its pids limit for a second) is seen
// before the container, and its cgroup, are gone; later only the poll interval samples it.
func TestEarlySamplesLeaveNoLongGap(t *testing.T) {
	for _, interval := range []time.Duration{2 * time.Second, 30 * time.Second} {
		at := sampleTimes(interval, earlyWindow)
		slices.Sort(at)
		last := time.Duration(0)
		for _, t0 := range at {
			if gap := t0 - last; gap > earlyMaxGap {
				t.Fatalf("interval %s: a gap of %s before the sample at %s (want at most %s); samples %v", interval, gap, t0, earlyMaxGap, at)
			}
			last = t0
		}
		if earlyWindow-last > earlyMaxGap {
			t.Fatalf("interval %s: no sample in the last %s of the early window", interval, earlyWindow-last)
		}
		if len(at) > 30+int(earlyWindow/interval) {
			t.Fatalf("interval %s: %d samples in the first %s, want about 20 early ones", interval, len(at), earlyWindow)
		}
	}
	// Past the window only the ticker samples.
	if next := nextEarlySample(earlyMaxGap, earlyWindow, 2*time.Second); next != 0 {
		t.Fatalf("an early sample %s after the window", next)
	}
	// A poll as frequent as the early gaps needs no early samples beyond the first.
	if at := sampleTimes(100*time.Millisecond, time.Second); len(at) != 11 {
		t.Fatalf("at a 100 ms poll: %d samples in 1 s, want the 10 ticks and the first early one", len(at))
	}
}

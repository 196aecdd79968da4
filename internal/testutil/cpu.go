package testutil

import (
	"syscall"
	"testing"
)

// CPUSeconds is the user+system CPU time this process has used so far.
func CPUSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// ReportCPURate starts counting CPU time; the func it returns reports bytes×b.N per
// CPU-second of the whole process as "cpuMB/s", the figure that a shared machine's
// other jobs do not move (wall MB/s does). Call it deferred around the timed loop.
func ReportCPURate(b *testing.B, bytes int64) func() {
	start := CPUSeconds()
	return func() {
		if d := CPUSeconds() - start; d > 0 {
			b.ReportMetric(float64(bytes)*float64(b.N)/d/1e6, "cpuMB/s")
		}
	}
}

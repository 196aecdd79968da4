package testutil

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// PeakRSS is a process's peak resident set so far in bytes (VmHWM in /proc/PID/status;
// pid 0 is this process), or 0 where /proc cannot say.
func PeakRSS(pid int) int64 {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// ReportPeakRSS starts a new peak-RSS window for this process; the func it returns
// reports the peak since then as "peak-MiB". Call it deferred around the timed loop, before
// ReportCPURate (the reset runs a GC, outside the timer and then outside the CPU count). The heap that earlier benchmarks of the process left is handed back to
// the OS first, and on Linux "5" to /proc/self/clear_refs resets VmHWM to the pages now
// resident, so the figure is this benchmark's own plus the process's live base. Where the
// window cannot be reset it is the process's peak since it started (getrusage's Maxrss).
func ReportPeakRSS(b *testing.B) func() {
	b.StopTimer()
	debug.FreeOSMemory()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	b.StartTimer()
	return func() {
		peak := PeakRSS(0)
		if peak == 0 {
			var ru syscall.Rusage
			if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
				peak = ru.Maxrss << 10 // KiB on Linux
			}
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
	}
}

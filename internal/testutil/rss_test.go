package testutil

import (
	"os"
	"runtime"
	"testing"
)

func TestPeakRSSCountsTouchedPages(t *testing.T) {
	if PeakRSS(0) == 0 {
		t.Skip("no /proc/self/status here: PeakRSS reports 0 by design")
	}
	const size = 64 << 20
	buf := make([]byte, size)
	for i := 0; i < size; i += os.Getpagesize() {
		buf[i] = 1
	}
	self, byPID := PeakRSS(0), PeakRSS(os.Getpid())
	runtime.KeepAlive(buf)
	if self < size {
		t.Fatalf("peak RSS %d bytes after touching %d", self, size)
	}
	if byPID < size {
		t.Fatalf("peak RSS by pid %d bytes after touching %d", byPID, size)
	}
}

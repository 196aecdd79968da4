package testutil

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// FailureLog returns a log function for the nodes, meshes and daemons a test starts: lines
// are kept (safe from any goroutine, also after the test has returned) and printed only if
// the test fails, so a multi-node test that times out in CI shows what each node did.
// Call it before starting what logs to it: its cleanup then runs after theirs.
func FailureLog(t testing.TB, prefix string) func(format string, args ...any) {
	t.Helper()
	l := &failureLog{start: time.Now()}
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
		if t.Failed() && len(l.lines) > 0 {
			t.Logf("%s log (%d lines):\n%s", prefix, len(l.lines), strings.Join(l.lines, "\n"))
		}
	})
	return func(format string, args ...any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closed || len(l.lines) >= maxFailureLogLines {
			return
		}
		l.lines = append(l.lines, fmt.Sprintf("%8.3fs %s", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...)))
	}
}

// maxFailureLogLines bounds what a chatty node keeps for a test that may run minutes.
const maxFailureLogLines = 5000

type failureLog struct {
	mu     sync.Mutex
	start  time.Time
	lines  []string
	closed bool
}

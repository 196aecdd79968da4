// Package testutil holds the helpers every package's tests share. It owns one job each:
// WaitFor is the only poller tests use to wait for a condition (never a bare sleep);
// FailureLog keeps what nodes log and shows it only when the test fails.
//
// It imports no other evalmesh package, so any test may use it.
package testutil

import (
	"testing"
	"time"
)

// PollInterval is how often WaitFor re-checks its condition.
const PollInterval = 5 * time.Millisecond

// WaitFor polls cond until it holds, failing the test with what it waited for once timeout
// has passed. The timeout is a deadline for a condition, not a duration to sleep: a
// condition that holds at once returns at once.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// errTimeout is what Poll returns when cond never held.
type errTimeout struct{ after time.Duration }

func (e errTimeout) Error() string { return "condition did not hold within " + e.after.String() }

// Poll is WaitFor without a test: it returns an error when cond has not held by timeout.
// For helpers (benchmarks, end-to-end drivers) that report failure themselves.
func Poll(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errTimeout{timeout}
		}
		time.Sleep(PollInterval)
	}
	return nil
}

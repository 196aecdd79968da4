package clock

import (
	"context"
	"testing"
	"time"
)

// A fake clock's timers fire when, and only when, it is advanced past them.
func TestFakeTimersFireOnAdvance(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(t0)
	timer := c.NewTimer(time.Second)
	fired := make(chan struct{})
	c.AfterFunc(2*time.Second, func() { close(fired) })
	c.Advance(999 * time.Millisecond)
	select {
	case <-timer.Chan():
		t.Fatal("timer fired before its time")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case at := <-timer.Chan():
		if !at.Equal(t0.Add(time.Second)) {
			t.Fatalf("fired at %s, want %s", at, t0.Add(time.Second))
		}
	default:
		t.Fatal("timer did not fire at its time")
	}
	c.Advance(time.Second)
	<-fired // AfterFunc runs its function on its own goroutine
	if got := c.Now(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("now %s", got)
	}
}

// A context from WithTimeout on a fake clock ends with DeadlineExceeded when the clock is
// advanced past its timeout, not before, and a context made from it ends with it.
func TestWithTimeoutFiresOnAdvance(t *testing.T) {
	c := NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := WithTimeout(context.Background(), c, time.Minute)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("a fake clock's deadline reported as a wall-clock deadline")
	}
	c.Advance(time.Minute - time.Nanosecond)
	if err := ctx.Err(); err != nil {
		t.Fatalf("ended before its timeout: %v", err)
	}
	c.Advance(time.Nanosecond)
	<-ctx.Done()
	if err := ctx.Err(); err != context.DeadlineExceeded {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	<-child.Done()
	if err := child.Err(); err != context.DeadlineExceeded {
		t.Fatalf("child's err %v, want context.DeadlineExceeded", err)
	}
}

// Cancelling it, or its parent ending, ends it with their error, and its timer no longer
// counts as a waiter on the fake clock.
func TestWithTimeoutCancel(t *testing.T) {
	c := NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := WithTimeout(context.Background(), c, time.Minute)
	cancel()
	if err := ctx.Err(); err != context.Canceled {
		t.Fatalf("err %v after cancel, want context.Canceled", err)
	}
	c.Advance(time.Hour)
	if err := ctx.Err(); err != context.Canceled {
		t.Fatalf("err %v after the timeout passed, want it to stay context.Canceled", err)
	}

	parent, stop := context.WithCancel(context.Background())
	ctx, cancel = WithTimeout(parent, c, time.Minute)
	defer cancel()
	stop()
	<-ctx.Done()
	if err := ctx.Err(); err != context.Canceled {
		t.Fatalf("err %v after the parent's cancel, want context.Canceled", err)
	}
	ctx, cancel = WithTimeout(parent, c, time.Minute)
	defer cancel()
	if err := ctx.Err(); err != context.Canceled {
		t.Fatalf("made from an ended parent: err %v, want context.Canceled", err)
	}
}

// On the wall clock it is context.WithTimeout: the deadline is there for a dial to honour.
func TestWithTimeoutRealKeepsDeadline(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), Real(), time.Hour)
	defer cancel()
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("no deadline on the wall clock")
	}
}

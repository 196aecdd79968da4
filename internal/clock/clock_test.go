package clock

import (
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

// Package clock is the one clock of a daemon: the time it reads and the timers and tickers
// it makes, injected wherever time decides something, so tests move time on instead of
// waiting for it. It is github.com/jonboulle/clockwork (a real clock, and a fake one whose
// time moves only when a test advances it) under one spelling; it imports no evalmesh
// package. Both clocks, and the contexts WithTimeout makes on them, are safe for concurrent
// use.
package clock

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock reads the time and makes timers and tickers on it.
type Clock = clockwork.Clock

// Timer and Ticker are a Clock's timers and tickers (Chan instead of time.Timer's C).
type (
	Timer  = clockwork.Timer
	Ticker = clockwork.Ticker
)

// Fake is a clock whose time moves only by Advance; its timers fire then.
type Fake = clockwork.FakeClock

// Real is the wall clock (time.Now, time.NewTimer, ...).
func Real() Clock { return clockwork.NewRealClock() }

// NewFake returns a fake clock at t.
func NewFake(t time.Time) *Fake { return clockwork.NewFakeClockAt(t) }

// WithTimeout is context.WithTimeout on clock c: the context ends with
// context.DeadlineExceeded once d has passed on c. On the wall clock it is
// context.WithTimeout itself, so the network code below it still sees the deadline. On a
// fake clock it ends when the test advances c past d (shortly after: a fake clock's
// AfterFunc runs on its own goroutine); its Deadline is its parent's, since a time on a
// fake clock is no wall-clock time a dial or a socket could honour, and context.Cause
// reports its parent's cause until the parent ends.
//
// clockwork's own WithTimeout (v0.5.0) is not used: its fake context's Err blocks until
// the context ends, where callers poll Err to ask whether it has.
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	f, fake := c.(*Fake)
	if !fake {
		return context.WithTimeout(parent, d)
	}
	ctx := &fakeTimeout{parent: parent, done: make(chan struct{})}
	if err := parent.Err(); err != nil {
		ctx.end(err)
		return ctx, func() {}
	}
	timer := f.AfterFunc(d, func() { ctx.end(context.DeadlineExceeded) })
	stopParent := context.AfterFunc(parent, func() { ctx.end(parent.Err()) })
	return ctx, func() {
		timer.Stop()
		stopParent()
		ctx.end(context.Canceled)
	}
}

// fakeTimeout is WithTimeout's context on a fake clock: done closes once, with err set
// first, by the timer, the parent's end or the cancel func, whichever comes first.
type fakeTimeout struct {
	parent context.Context
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

func (c *fakeTimeout) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

func (c *fakeTimeout) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *fakeTimeout) Done() <-chan struct{}       { return c.done }
func (c *fakeTimeout) Value(key any) any           { return c.parent.Value(key) }

func (c *fakeTimeout) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

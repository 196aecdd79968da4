// Package clock is the one clock of a daemon: the time it reads and the timers and tickers
// it makes, injected wherever time decides something, so tests move time on instead of
// waiting for it. It is github.com/jonboulle/clockwork (a real clock, and a fake one whose
// time moves only when a test advances it) under one spelling; it imports no evalmesh
// package. Both clocks are safe for concurrent use.
package clock

import (
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

// Package progress is the CLI's one byte-progress printer: a Bar that draws bytes, rate and
// ETA on a terminal and nothing anywhere else (a pipe, a CI log, a test buffer), so output
// that is read by programs stays clean. The drawing is github.com/schollz/progressbar; this
// package only decides where and how, in one place. A Bar is safe for concurrent use by the
// callbacks of one job.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// IsTerminal reports whether fd is a terminal (a variable so tests can pretend).
var IsTerminal = term.IsTerminal

// Bar is one job's progress line. The zero of a Bar from New on a non-terminal draws
// nothing; every method is a no-op then.
type Bar struct {
	mu   sync.Mutex
	w    io.Writer
	what string
	// counts: the job counts items (blocks, segments, slots), not bytes.
	counts bool
	bar    *progressbar.ProgressBar
}

// On reports whether w is a terminal a Bar would draw on.
func On(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && IsTerminal(int(f.Fd()))
}

// New returns a Bar labelled what that draws on w only when w is a terminal.
func New(w io.Writer, what string) *Bar {
	if !On(w) {
		return &Bar{}
	}
	return &Bar{w: w, what: what}
}

// NewCount is New for a job that counts items instead of bytes.
func NewCount(w io.Writer, what string) *Bar {
	b := New(w, what)
	b.counts = true
	return b
}

// Set moves the bar to done of total bytes (total < 0: unknown).
func (b *Bar) Set(done, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return
	}
	if b.bar == nil {
		b.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionSetDescription(b.what),
			progressbar.OptionShowBytes(!b.counts),
			progressbar.OptionShowTotalBytes(!b.counts),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
		)
	}
	b.bar.Set64(done)
}

// Finish draws the line at 100 % (the job's last state stays on screen) and ends it; later
// calls do nothing.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Finish()
		fmt.Fprintln(b.w)
	}
	b.bar, b.w = nil, nil
}

package mesh

import (
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/node/api"
)

// ledgerCalc recomputes the ledger from the verified store, debounced: a burst of new
// attestations costs one computation. The computation runs on its timer's goroutine, off
// the loop; its inputs besides the attestations are read on the loop (input) and what the
// loop does with its result is handed back with do (held). Its fields below mu are
// guarded by mu; the rest are set by Start and only read.
type ledgerCalc struct {
	*shared
	input func() (attest.LedgerInput, bool) // Mesh.ledgerInput
	held  func(*attest.LedgerReport)        // Mesh.auditHeld, on the loop

	mu    sync.Mutex
	dirty bool
	timer clock.Timer
	// chargeTimer computes the ledger again when a campaign's deadline passes (chargeAt).
	chargeTimer clock.Timer
	last        *api.MeshLedger
	count       int // computations, for tests
}

// changed schedules a ledger computation after the debounce.
func (l *ledgerCalc) changed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirty = true
	if l.timer == nil {
		l.timer = l.opts.Clock.AfterFunc(l.opts.LedgerDebounce, l.compute)
	}
}

func (l *ledgerCalc) compute() {
	l.mu.Lock()
	l.dirty = false
	l.mu.Unlock()
	if l.ctx.Err() != nil {
		return
	}
	in, ok := l.input()
	var ml *api.MeshLedger
	if ok {
		fp := l.store.Attestations().Fingerprint()
		began := l.opts.Clock.Now()
		led, rep, err := l.store.Ledger(in)
		l.opts.Metrics.LedgerSeconds(l.opts.Clock.Since(began).Seconds())
		if err == nil {
			l.node.SetHeadRoot(led.Root(), fp)
		}
		if err != nil {
			l.opts.Logf("mesh: ledger: %v", err)
		} else {
			ml = &api.MeshLedger{Ledger: led, Report: rep, Root: led.Root(), Attestations: l.store.Attestations().Len(), At: l.opts.Now()}
		}
	}
	if ml != nil {
		l.do(l.announceHead)
		l.chargeAt(ml.Report, ml.At)
		l.do(func() { l.held(ml.Report) }) // audit.go
	}
	l.mu.Lock()
	if ml != nil {
		l.last = ml
		l.count++
	}
	l.timer = nil
	if l.dirty {
		l.timer = l.opts.Clock.AfterFunc(l.opts.LedgerDebounce, l.compute)
	}
	l.mu.Unlock()
}

// chargeAt schedules a ledger computation just after the earliest deadline, later than now,
// of an attempt rep lists as unanswered and not yet charged: the report charges it to its
// holder's lab only from then (attest.LedgerInput.Now), and in a quiet network no new
// input would recompute the ledger, so `charged_attempts` would never show it.
func (l *ledgerCalc) chargeAt(rep *attest.LedgerReport, now time.Time) {
	var next time.Time
	for _, u := range rep.Unanswered {
		if !u.Charged && u.Deadline.After(now) && (next.IsZero() || u.Deadline.Before(next)) {
			next = u.Deadline
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chargeTimer != nil {
		l.chargeTimer.Stop()
		l.chargeTimer = nil
	}
	if !next.IsZero() && l.ctx.Err() == nil {
		// Charged means strictly after the deadline; a second's margin covers clock rounding.
		l.chargeTimer = l.opts.Clock.AfterFunc(next.Sub(now)+time.Second, l.changed)
	}
}

// current returns the last computed ledger, or nil before the first.
func (l *ledgerCalc) current() *api.MeshLedger {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// stopTimers stops the pending computations (Close, once the mesh's goroutines are done).
func (l *ledgerCalc) stopTimers() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.chargeTimer != nil {
		l.chargeTimer.Stop()
	}
}

package protocol

import (
	"slices"
	"time"
)

// claimClock measures claim→start per run exactly as the simulator (protocol/sim) defines
// it: from when this node had a free capacity unit while the slot was free, to the run's
// start. Each capacity unit carries the time it became free; a claim takes the oldest free
// unit; a pending claim the machine dropped without starting (a lost tie, a slot finished
// elsewhere) hands its unit's time on to the next claim, so a lost tie counts as protocol
// overhead, never as waiting for capacity; a run's end frees its unit at that moment.
// Owned by the Coordinator (no locking).
type claimClock struct {
	free    []time.Time          // ready times of free units, oldest first
	pending map[string]time.Time // slot ID → ready time of the unit its pending claim holds
	samples []time.Duration      // claim→start of every run started
}

// reset gives the clock capacity free units, free from now (the node's start).
func (c *claimClock) reset(capacity int, now time.Time) {
	c.free = c.free[:0]
	for range capacity {
		c.free = append(c.free, now)
	}
	c.pending = map[string]time.Time{}
}

// observe follows one step of the claim machine: heldNow returns the machine's held slots
// after it (sorted, ClaimMachine.Held; asked only when a pending or new claim needs it, since
// it allocates), a its actions, freeSince the slot's free time.
func (c *claimClock) observe(heldNow func() []string, a Actions, freeSince func(string) time.Time, now time.Time) {
	if c.pending == nil {
		c.reset(0, now)
	}
	var held []string
	if len(c.pending) > 0 || slices.ContainsFunc(a.Publish, func(m ClaimMessage) bool { return m.Kind == ClaimKindClaim }) {
		held = heldNow()
	}
	started := map[string]bool{}
	for _, st := range a.Start {
		started[st.Slot.ID] = true
	}
	var inherit []time.Time
	for id, t := range c.pending {
		if _, ok := slices.BinarySearch(held, id); !ok && !started[id] {
			inherit = append(inherit, t)
			delete(c.pending, id)
		}
	}
	slices.SortFunc(inherit, time.Time.Compare)
	for _, msg := range a.Publish {
		if msg.Kind != ClaimKindClaim {
			continue
		}
		if _, ok := c.pending[msg.Slot]; ok {
			continue // a pending claim published again (told a loser, re-announced)
		}
		if _, ok := slices.BinarySearch(held, msg.Slot); !ok && !started[msg.Slot] {
			continue
		}
		ready := now
		switch {
		case len(inherit) > 0:
			ready, inherit = inherit[0], inherit[1:]
		case len(c.free) > 0:
			ready, c.free = c.free[0], c.free[1:]
		}
		if f := freeSince(msg.Slot); f.After(ready) {
			ready = f
		}
		c.pending[msg.Slot] = ready
	}
	if len(inherit) > 0 {
		c.free = append(c.free, inherit...)
		slices.SortFunc(c.free, time.Time.Compare)
	}
}

// started records the claim→start of the slot's run starting now.
func (c *claimClock) started(slotID string, now time.Time) {
	if ready, ok := c.pending[slotID]; ok {
		c.samples = append(c.samples, now.Sub(ready))
		delete(c.pending, slotID)
	}
}

// resize adds delta free units (the capacity grew) free from now, or takes away -delta of
// the most recently freed ones (it shrank; units held by claims or runs go back when
// those end, and the next resize or end settles the count).
func (c *claimClock) resize(delta int, now time.Time) {
	for ; delta > 0; delta-- {
		c.free = append(c.free, now)
	}
	if delta < 0 {
		c.free = c.free[:max(0, len(c.free)+delta)]
	}
}

// unitFreed returns a run's unit (it ended or was aborted) at now.
func (c *claimClock) unitFreed(now time.Time) { c.free = append(c.free, now) }

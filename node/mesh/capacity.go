package mesh

import (
	"time"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/protocol"
)

// capacity gives the claim machine this node's capacity: once the node has caught up
// (open), then as a shared cluster's free capacity changes (follow). Each runs on a
// goroutine of its own, off the loop, and hands the coordinator what it found with decide;
// it has no state of its own besides shared's.
type capacity struct{ *shared }

// follow re-reads Options.FreeCapacity (which may do I/O: it runs here, off
// the loop) and hands the coordinator what is free (protocol.Coordinator.FreeCapacity: the
// capacity becomes the runs this node holds plus the free ones).
func (c capacity) follow() {
	defer c.wg.Done()
	t := c.opts.Clock.NewTicker(c.opts.CapacityEvery)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.Chan():
		}
		free, err := c.opts.FreeCapacity()
		if err != nil {
			c.opts.Logf("mesh: capacity: %v (keeping %d)", err, c.now())
			continue
		}
		c.decide(func(co *protocol.Coordinator, now time.Time) protocol.CoordActions { return co.FreeCapacity(free, now) })
	}
}

// now reads the capacity on the loop (for a log line).
func (c capacity) now() int {
	ch := make(chan int, 1)
	if !c.do(func() { ch <- c.coord.Capacity() }) {
		return 0
	}
	select {
	case n := <-ch:
		return n
	case <-c.ctx.Done():
		return 0
	}
}

// open gives the claim machine its capacity once this node has reconciled with a
// peer (so it knows what finished while it was away), or after a grace period when no peer
// is connected (a node alone).
func (c capacity) open() {
	defer c.wg.Done()
	clk, tm := c.opts.Clock, c.opts.Timing
	deadline := clk.Now().Add(tm.OpenGrace)
	t := clk.NewTicker(tm.OpenPoll)
	defer t.Stop()
	for {
		if peers := c.node.Peers(); len(peers) > 0 || !clk.Now().Before(deadline) {
			if len(peers) > 0 {
				ctx, cancel := clock.WithTimeout(c.ctx, clk, tm.FirstSync)
				err := c.node.SyncWith(ctx, peers[0])
				cancel()
				if err != nil && c.ctx.Err() == nil {
					c.opts.Logf("mesh: first reconciliation with %s: %v (claiming anyway)", peers[0], err)
				}
			}
			break
		}
		select {
		case <-c.ctx.Done():
			return
		case <-t.Chan():
		}
	}
	c.decide(func(co *protocol.Coordinator, now time.Time) protocol.CoordActions {
		return co.OpenCapacity(c.opts.Capacity, now)
	})
}

package node

import "time"

// followCapacity re-reads MeshOptions.FreeCapacity (which may do I/O: it runs here, off
// the loop) and hands the claim machine the changed capacity: the runs this node holds plus
// the free ones. Before openCapacity has opened claiming it changes nothing; lowering
// capacity aborts no run, it only stops new claims until runs end.
func (m *Mesh) followCapacity() {
	defer m.wg.Done()
	every := m.opts.CapacityEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		free, err := m.opts.FreeCapacity()
		if err != nil {
			m.n.opts.Logf("mesh: capacity: %v (keeping %d)", err, m.capacityNow())
			continue
		}
		m.do(func() {
			c := len(m.running) + max(free, 0)
			if !m.capOpen || c == m.opts.Capacity {
				return
			}
			now := m.opts.Now()
			m.clock.resize(c-m.opts.Capacity, now)
			m.opts.Capacity = c
			m.apply(m.cm.SetCapacity(m.claimCapacity(), now))
		})
	}
}

// capacityNow reads the capacity on the loop (for a log line).
func (m *Mesh) capacityNow() int {
	c := make(chan int, 1)
	if !m.do(func() { c <- m.opts.Capacity }) {
		return 0
	}
	select {
	case n := <-c:
		return n
	case <-m.ctx.Done():
		return 0
	}
}

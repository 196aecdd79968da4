package node

// followCapacity re-reads MeshOptions.FreeCapacity (which may do I/O: it runs here, off
// the loop) and hands the coordinator what is free (protocol.Coordinator.FreeCapacity: the
// capacity becomes the runs this node holds plus the free ones).
func (m *Mesh) followCapacity() {
	defer m.wg.Done()
	t := m.opts.Clock.NewTicker(m.opts.CapacityEvery)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.Chan():
		}
		free, err := m.opts.FreeCapacity()
		if err != nil {
			m.n.opts.Logf("mesh: capacity: %v (keeping %d)", err, m.capacityNow())
			continue
		}
		m.do(func() { m.apply(m.coord.FreeCapacity(free, m.opts.Now())) })
	}
}

// capacityNow reads the capacity on the loop (for a log line).
func (m *Mesh) capacityNow() int {
	c := make(chan int, 1)
	if !m.do(func() { c <- m.coord.Capacity() }) {
		return 0
	}
	select {
	case n := <-c:
		return n
	case <-m.ctx.Done():
		return 0
	}
}

package sim

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkSim runs the goal network (20 nodes, 5 labs, 2,000 slots, 5 % loss, 30 %
// of the nodes cut off for 10 minutes, 2 crashes) and larger ones with the same slots per
// node, and reports the protocol's figures beside its bounds: lost slots (bound 0),
// duplicate runs as % of slots (bound 0.5), claim->start p99 in virtual ms (bound 1000),
// and virtual seconds simulated per CPU second (bound 1000). bench/sim.sh prints the table.
func BenchmarkSim(b *testing.B) {
	for _, n := range []int{20, 50, 200} {
		c := Defaults
		c.Nodes, c.Slots, c.Seed = n, 100*n, 7
		if testing.Short() && n > 20 {
			continue
		}
		b.Run(fmt.Sprintf("nodes=%d/slots=%d", c.Nodes, c.Slots), func(b *testing.B) {
			var r Result
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			for b.Loop() {
				r = Run(c)
			}
			wall := time.Since(start).Seconds() / float64(b.N)
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(r.LostSlots), "lost_slots")
			b.ReportMetric(100*float64(r.DuplicateRuns)/float64(r.Slots), "dup_%")
			b.ReportMetric(r.ClaimToStart.P50, "c2s_p50_ms")
			b.ReportMetric(r.ClaimToStart.P99, "c2s_p99_ms")
			b.ReportMetric(r.MessagesPerSlot, "msgs/slot")
			b.ReportMetric(r.DeliveriesPerSlot, "deliveries/slot")
			b.ReportMetric(r.VirtualSeconds/wall, "x_realtime")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "alloc_MiB")
		})
	}
}

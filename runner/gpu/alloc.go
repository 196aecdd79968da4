package gpu

import (
	"fmt"
	"sort"
)

// Allocate picks n GPUs for a run from those the lab allows (allowed; empty = all of inv)
// that no live run holds (busy), lowest index first so that runs pack predictably. It
// fails, naming the counts, when not enough are free; n == 0 always succeeds with none.
func Allocate(inv Inventory, allowed []string, busy map[string]bool, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	gpus := append([]Info(nil), inv.GPUs...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	var free []string
	usable := 0
	for _, g := range gpus {
		if len(allowed) > 0 && !contains(allowed, g.UUID) {
			continue
		}
		usable++
		if !busy[g.UUID] {
			free = append(free, g.UUID)
		}
	}
	if len(free) < n {
		if usable == 0 {
			return nil, fmt.Errorf("the task needs %d GPU(s) but this node has none it may use (CPU-only, or runner.gpus in config.yaml lists none that NVML reports)", n)
		}
		return nil, fmt.Errorf("the task needs %d GPU(s); %d of this node's %d are free (wait for a run to end)", n, len(free), usable)
	}
	return free[:n], nil
}

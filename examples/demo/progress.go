package demo

import "fmt"

// progress is what the demo's progress line shows: the first node's slots done and runs
// counted, as it last answered. A reading that does not come keeps the last value: a
// campaign status call that fails, or no ledger computed yet. Read as zero, those made the
// line flicker "0 runs counted" between real figures. The runs counted are the latest
// ledger's, which may lag the runs that arrived since (it is recomputed on a debounce).
type progress struct {
	done map[string]int // campaign ID -> its slots done, at the last answer
	runs int            // runs counted by the latest ledger
}

func newProgress() *progress { return &progress{done: map[string]int{}} }

// campaignDone records an answered status of campaign id.
func (p *progress) campaignDone(id string, done int) { p.done[id] = done }

// counted records the runs counted by the node's latest ledger.
func (p *progress) counted(runs int) { p.runs = runs }

// slotsDone is the slots done over every campaign answered so far.
func (p *progress) slotsDone() int {
	n := 0
	for _, d := range p.done {
		n += d
	}
	return n
}

// line is the progress line for a network of slots slots, read on node.
func (p *progress) line(slots int, node string) string {
	return fmt.Sprintf("%d/%d slots done, %d runs counted on %s", p.slotsDone(), slots, p.runs, node)
}

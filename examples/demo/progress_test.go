package demo

import "testing"

// The progress line keeps the last answered figures: a round whose ledger is not yet
// recomputed over the whole set, or whose status call failed, reports nothing new, and the
// line shows the figures before it, never zero.
func TestProgressKeepsTheLastAnsweredReading(t *testing.T) {
	p := newProgress()
	if got, want := p.line(42, "lab1"), "0/42 slots done, 0 runs counted on lab1"; got != want {
		t.Fatalf("before any answer: %q, want %q", got, want)
	}
	p.campaignDone("c1", 5)
	p.campaignDone("c2", 2)
	p.counted(6)
	if got, want := p.line(42, "lab1"), "7/42 slots done, 6 runs counted on lab1"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	// Next round: c2's status call failed and the ledger is being recomputed (neither
	// reported); c1 moved on.
	p.campaignDone("c1", 6)
	if got, want := p.line(42, "lab1"), "8/42 slots done, 6 runs counted on lab1"; got != want {
		t.Fatalf("after a round with unanswered readings: %q, want %q (the last values kept)", got, want)
	}
	p.counted(8)
	if got, want := p.line(42, "lab1"), "8/42 slots done, 8 runs counted on lab1"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

package protocol

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestSpotCheckObjectsIsSeededAndVaries(t *testing.T) {
	var claimed []string
	for i := range 20 {
		claimed = append(claimed, fmt.Sprintf("obj%02d", i))
	}
	a := SpotCheckObjects([]byte("seed-1"), "lab1", claimed, 2)
	if len(a) != 2 || !slices.Equal(a, SpotCheckObjects([]byte("seed-1"), "lab1", claimed, 2)) {
		t.Fatalf("same seed gave %v then another pick", a)
	}
	for _, c := range a {
		if !slices.Contains(claimed, c) {
			t.Errorf("picked %s, which lab1 does not claim", c)
		}
	}
	seen := map[string]bool{}
	for i := range 50 {
		for _, c := range SpotCheckObjects([]byte(fmt.Sprint("seed", i)), "lab1", claimed, 2) {
			seen[c] = true
		}
	}
	if len(seen) < 15 {
		t.Errorf("50 seeds checked only %d of 20 objects: every claim must be checked in time", len(seen))
	}
	if got := SpotCheckObjects([]byte("s"), "lab1", []string{"x", "x"}, 5); !slices.Equal(got, []string{"x"}) {
		t.Errorf("two claims of one object, k 5: %v, want it once", got)
	}
	if got := SpotCheckObjects([]byte("s"), "lab1", nil, 2); len(got) != 0 {
		t.Errorf("no claims: %v", got)
	}
}

func TestSpotCheckChildReachesEveryLink(t *testing.T) {
	seen := map[int]bool{}
	for i := range 200 {
		c := SpotCheckChild([]byte(fmt.Sprint(i)), "root", 1, 7)
		if c < 0 || c >= 7 {
			t.Fatalf("child %d of 7", c)
		}
		seen[c] = true
	}
	if len(seen) != 7 {
		t.Errorf("200 seeds followed %d of 7 links", len(seen))
	}
	if SpotCheckChild([]byte("s"), "root", 0, 0) != 0 {
		t.Error("a leaf (no links) must give 0")
	}
	first := SpotCheckChild([]byte("s"), "root", 3, 5)
	for range 10 {
		if SpotCheckChild([]byte("s"), "root", 3, 5) != first {
			t.Fatal("one seed, object and depth followed different links")
		}
	}
}

func TestHoldingsDiscounts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := HoldingsDiscounts{}
	if d.Discounted("lab1", t0) {
		t.Fatal("nobody checked: discounted")
	}
	d.Record("lab1", true, t0, time.Minute)
	if d.Discounted("lab1", t0) {
		t.Fatal("a pass discounts")
	}
	d.Record("lab1", false, t0, time.Minute)
	if !d.Discounted("lab1", t0.Add(59*time.Second)) || d.Discounted("lab2", t0) {
		t.Fatal("a failure must discount lab1 alone for the period")
	}
	d.Record("lab1", true, t0.Add(30*time.Second), time.Minute)
	if !d.Discounted("lab1", t0.Add(59*time.Second)) {
		t.Fatal("a pass within the period lifted the discount")
	}
	if d.Discounted("lab1", t0.Add(time.Minute)) {
		t.Fatal("still discounted after the period")
	}
	d.Record("lab1", false, t0.Add(50*time.Second), time.Minute)
	d.Record("lab1", false, t0.Add(40*time.Second), time.Minute) // an older result arriving late
	if !d.Discounted("lab1", t0.Add(109*time.Second)) {
		t.Fatal("a later failure must extend the discount, an earlier one not shorten it")
	}
}

package api

import (
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// Progress events of one phase are spaced by progressEvery on the clock the API is given,
// not the wall clock: events sent while that clock stands still are dropped after the first
// (the last of a phase and the final event always go), and one sent after it has moved on
// by progressEvery goes out.
func TestProgressEventsAreSpacedOnTheGivenClock(t *testing.T) {
	now := time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC)
	rec := httptest.NewRecorder()
	stream(rec, func() time.Time { return now }, func(send func(Event)) (string, error) {
		send(Event{Phase: "fetch", Bytes: 1, Total: 10})
		send(Event{Phase: "fetch", Bytes: 2, Total: 10}) // the clock has not moved: dropped
		now = now.Add(progressEvery - time.Millisecond)
		send(Event{Phase: "fetch", Bytes: 3, Total: 10}) // still within the spacing: dropped
		now = now.Add(time.Millisecond)
		send(Event{Phase: "fetch", Bytes: 4, Total: 10})  // progressEvery later: sent
		send(Event{Phase: "fetch", Bytes: 10, Total: 10}) // the phase's last: sent
		return "bafy", nil
	})
	var got []int64
	for _, line := range strings.Split(strings.TrimSpace(rec.Body.String()), "\n") {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if e.Done {
			if e.CID != "bafy" {
				t.Fatalf("final event %+v", e)
			}
			continue
		}
		got = append(got, e.Bytes)
	}
	if want := []int64{1, 4, 10}; !slices.Equal(got, want) {
		t.Fatalf("progress events sent at bytes %v, want %v (spaced by %s on the given clock)", got, want, progressEvery)
	}
}

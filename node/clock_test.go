package node

import (
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// The clock-driven duties of the node run on Options.Clock (internal/clock), so these
// tests move a fake clock past a duty's time instead of waiting for it. Each would time out
// on the wall clock: its period is far longer than the test waits.

// A bootstrap peer down at start is dialled again after its backoff on the node's clock:
// scheduled from the fake time, not dialled while the fake time is before it (though the
// peer is back), and dialled once the fake clock passes it.
func TestRedialBackoffRunsOnTheNodeClock(t *testing.T) {
	t0 := time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC) // far from the wall clock
	fake := clock.NewFake(t0)
	cfg, _, restart := bootstrapPeerDown(t)
	o := testOptions()
	o.Config, o.Clock = &cfg, fake
	o.Redial = RedialOptions{Min: 30 * time.Second, Max: 30 * time.Second}
	a := startNode(t, o)
	kp := a.KnownPeers()
	if len(kp) != 1 || kp[0].Failures != 1 {
		t.Fatalf("known peers after the failed bootstrap dial: %+v", kp)
	}
	// Backoff 30 s jittered by ±20%, from the fake now.
	lo, hi := t0.Add(24*time.Second), t0.Add(36*time.Second)
	if next := kp[0].NextDial; next.Before(lo) || next.After(hi) {
		t.Fatalf("next dial at %s, want between %s and %s (the fake clock's time plus the backoff)", next, lo, hi)
	}
	b := restart()

	fake.Advance(23 * time.Second) // before the earliest jittered backoff: nothing is due
	if kp := a.KnownPeers(); len(a.host.Network().ConnsToPeer(b.ID())) > 0 || kp[0].Failures != 1 {
		t.Fatalf("dialled before its backoff ran out on the node's clock: %+v", kp)
	}
	fake.Advance(14 * time.Second) // past the latest
	testutil.WaitFor(t, 10*time.Second, "a to dial its bootstrap peer once the fake clock passed the backoff", func() bool {
		return len(a.host.Network().ConnsToPeer(b.ID())) > 0
	})
}

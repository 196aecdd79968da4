package node

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
)

// lineLog keeps log lines for a test to look into.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *lineLog) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func fastRedial() Options {
	o := testOptions()
	o.Redial = RedialOptions{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	return o
}

// A connection that drops is dialled again by the side that knows the peer, with no
// Connect; both sides log the disconnect and the connect at warning level, and the side
// left with no peer says it runs alone.
func TestRedialReconnectsADroppedConnection(t *testing.T) {
	var warnA lineLog
	oa := fastRedial()
	oa.Warnf = warnA.logf
	a := startNode(t, oa)
	ob := fastRedial()
	ob.Redial.Off = true // the connection can only come back from a
	b := startNode(t, ob)
	connect(t, a, b)
	old := a.host.Network().ConnsToPeer(b.ID())[0]
	if err := a.host.Network().ClosePeer(b.ID()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "a new connection from a to b", func() bool {
		cs := a.host.Network().ConnsToPeer(b.ID())
		return len(cs) > 0 && cs[0] != old
	})
	for _, want := range []string{"peer disconnected " + b.ID().String(), "running alone: no peers connected", "peer connected " + b.ID().String()} {
		testutil.WaitFor(t, 5*time.Second, "warning "+want, func() bool { return warnA.has(want) })
	}
	// b learned a from the inbound connection (identify, same network): on the address a
	// listens on, not the connection's ephemeral port.
	var k []KnownPeer
	testutil.WaitFor(t, 5*time.Second, "b knows a", func() bool {
		k = b.KnownPeers()
		return len(k) == 1 && k[0].ID == a.ID().String()
	})
	if !strings.HasPrefix(a.Addrs()[0], k[0].Addrs[0]) {
		t.Fatalf("b keeps a at %v; a listens on %v", k[0].Addrs, a.Addrs())
	}
}

// A node restarted in the same home, with nothing under bootstrap, connects again to the
// peer it was connected to before (HOME/peers.json).
func TestKnownPeersSurviveRestart(t *testing.T) {
	ob := fastRedial()
	ob.Redial.Off = true // b cannot find the restarted a on its new port anyway; be sure
	b := startNode(t, ob)
	ha := newHome(t)
	a, err := New(context.Background(), ha, fastRedial())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	connect(t, a, b)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(ha.PeersPath())
	if err != nil {
		t.Fatal(err)
	}
	var f knownPeersFile
	if err := json.Unmarshal(raw, &f); err != nil || len(f.Peers) != 1 || f.Peers[0].PeerID != b.ID().String() {
		t.Fatalf("%s after a closed: %s (%v)", ha.PeersPath(), raw, err)
	}
	a2 := startNodeAt(t, ha, fastRedial())
	if len(a2.Config().Bootstrap) != 0 {
		t.Fatal("the test's config has bootstrap peers")
	}
	testutil.WaitFor(t, 10*time.Second, "the restarted node connected to b", func() bool {
		return len(a2.host.Network().ConnsToPeer(b.ID())) > 0
	})
}

func TestJitteredBackoff(t *testing.T) {
	for _, c := range []struct {
		failures int
		u        float64
		want     time.Duration
	}{
		{0, 0.5, time.Second},
		{1, 0.5, 2 * time.Second},
		{3, 0.5, 8 * time.Second},
		{6, 0.5, time.Minute},
		{60, 0.5, time.Minute}, // no overflow
		{0, 0, 800 * time.Millisecond},
		{6, 0.999999, 72 * time.Second},
	} {
		got := jitteredBackoff(time.Second, time.Minute, c.failures, c.u).Round(time.Millisecond)
		if got != c.want {
			t.Errorf("backoff after %d failures, u=%v: %v, want %v", c.failures, c.u, got, c.want)
		}
	}
}

// bootstrapPeerDown starts a node and stops it: cfg names it as the only bootstrap peer, at
// addr, and restart starts it again in the same home on the same port, dialling nothing by
// itself (a peer down when the node under test starts, back later).
func bootstrapPeerDown(t *testing.T) (cfg home.Config, addr string, restart func() *Node) {
	t.Helper()
	hb := newHome(t)
	b, err := New(context.Background(), hb, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	addr, id := b.Addrs()[0], b.ID()
	b.Close()
	cfg = DefaultTestConfig()
	cfg.Bootstrap = []string{addr}
	return cfg, addr, func() *Node {
		o := testOptions()
		o.Listen = []string{strings.TrimSuffix(addr, "/p2p/"+id.String())}
		o.Redial.Off = true
		return startNodeAt(t, hb, o)
	}
}

// A bootstrap peer that is down when the node starts is dialled again until it is up (it
// used to be dialled once, its failure logged and forgotten), and the warning says so.
func TestBootstrapPeerDownAtStartIsRetried(t *testing.T) {
	cfg, addr, restart := bootstrapPeerDown(t)
	var warn lineLog
	o := fastRedial()
	o.Config, o.Warnf = &cfg, warn.logf
	a := startNode(t, o)
	if !warn.has("bootstrap peer " + addr + " unreachable") {
		t.Fatalf("no warning for the bootstrap peer down at start: %q", warn.lines)
	}
	b := restart()
	// Within 3 s, though the swarm's own dial backoff for b (5 s after a failed dial, more
	// after each next one) has not run out: the redialer's schedule overrides it.
	testutil.WaitFor(t, 3*time.Second, "a connected to its bootstrap peer once it is up", func() bool {
		return len(a.host.Network().ConnsToPeer(b.ID())) > 0
	})
}

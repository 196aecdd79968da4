package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	lp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
)

// Connectivity that heals (docs/protocol.md, "Connections"): the node remembers the peers of
// its network it has been connected to (HOME/peers.json, with the bootstrap peers of its
// config) and dials each of them again, with exponential backoff and jitter, while it is
// not connected to it. A partition, a peer's restart or this node's restart therefore heals
// without `evalmesh connect`. Peers connecting and leaving, and the node running alone, are
// logged as warnings.
//
// A peer is learned only from a connection: one this node dialled on purpose (Connect:
// bootstrap, `evalmesh connect`), or one that completed identify and speaks this network's
// sync protocol. Of the addresses such a peer announces, only those on the IP address its
// connection came from are kept, so a peer cannot make this node dial third parties.
//
// Concurrency: the redialer's state is under its mutex; one goroutine (run) takes the
// host's connectedness and identify events and starts the dials that are due, each in its
// own goroutine; it alone writes the file.

// RedialOptions tune re-dialling (zero value: on, 1 s doubling to 60 s).
type RedialOptions struct {
	// Min is the wait before re-dialling a peer that went away; each failed dial doubles it,
	// up to Max. Every wait is jittered by ±20% so that peers cut off together do not all
	// dial at the same instant.
	Min, Max time.Duration
	// Off dials nothing by itself: bootstrap peers once at start, as before (tests that
	// need a connection to stay closed).
	Off bool
}

const (
	defaultRedialMin = time.Second
	defaultRedialMax = time.Minute
	// maxKnownPeers bounds the file: past it the learned peer connected longest ago goes.
	maxKnownPeers = 256
	// maxKnownAddrs bounds the addresses kept per peer.
	maxKnownAddrs = 8
	// stableConn: a connection that closed sooner than this counts as a failed dial for
	// the backoff, so a peer that accepts and drops at once is not dialled every second.
	stableConn = 10 * time.Second
	// redialTimeout bounds one dial.
	redialTimeout = 10 * time.Second
)

type knownPeer struct {
	id            peer.ID
	addrs         []ma.Multiaddr
	bootstrap     bool // from the config: never evicted
	lastConnected time.Time

	connectedAt time.Time // zero while not connected
	failures    int       // dials failed (or connections that did not last) in a row
	next        time.Time // when to dial it next (while not connected)
	dialing     bool
	lastErr     string
}

type redialer struct {
	h     host.Host
	path  string
	proto lp2pproto.ID // the network's sync protocol: a peer speaking it is of our network
	o     RedialOptions
	clk   clock.Clock // the node's: backoffs and the dial schedule are on it
	logf  func(string, ...any)
	warnf func(string, ...any)

	mu      sync.Mutex
	peers   map[peer.ID]*knownPeer
	dirty   bool
	alone   bool // "running alone" was logged and no peer has connected since
	pending int  // dials of the first round still running; -1 once it is over
	rnd     *rand.Rand

	wake   chan struct{}
	sub    event.Subscription
	cancel context.CancelFunc
	done   chan struct{}
}

// knownPeersFile is HOME/peers.json.
type knownPeersFile struct {
	Peers []knownPeerEntry `json:"peers"`
}

type knownPeerEntry struct {
	PeerID        string    `json:"peer_id"`
	Addrs         []string  `json:"addrs"`
	LastConnected time.Time `json:"last_connected"`
}

// newRedialer loads the known peers of h and subscribes to the host's events; start runs it.
func newRedialer(h host.Host, hm home.Home, proto lp2pproto.ID, o RedialOptions, clk clock.Clock, logf, warnf func(string, ...any)) (*redialer, error) {
	if o.Min <= 0 {
		o.Min = defaultRedialMin
	}
	if o.Max < o.Min {
		o.Max = max(defaultRedialMax, o.Min)
	}
	r := &redialer{h: h, path: hm.PeersPath(), proto: proto, o: o, clk: clk, logf: logf, warnf: warnf,
		peers: map[peer.ID]*knownPeer{}, rnd: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	if err := r.load(); err != nil {
		return nil, err
	}
	// A buffer that absorbs bursts: the event bus blocks the swarm while it is full.
	sub, err := h.EventBus().Subscribe([]any{new(event.EvtPeerConnectednessChanged), new(event.EvtPeerIdentificationCompleted)}, eventbus.BufSize(1024))
	if err != nil {
		return nil, err
	}
	r.sub = sub
	return r, nil
}

// load reads the known peers; a missing file is none, an unreadable one an error naming it.
func (r *redialer) load() error {
	b, err := os.ReadFile(r.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var f knownPeersFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s: %w (delete it to forget the known peers)", r.path, err)
	}
	for _, e := range f.Peers {
		id, err := peer.Decode(e.PeerID)
		if err != nil || id == r.h.ID() {
			continue
		}
		var addrs []ma.Multiaddr
		for _, s := range e.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) > 0 {
			r.peers[id] = &knownPeer{id: id, addrs: addrs, lastConnected: e.LastConnected}
		}
	}
	return nil
}

// save writes the known peers when they changed (the run goroutine only).
func (r *redialer) save() {
	r.mu.Lock()
	if !r.dirty {
		r.mu.Unlock()
		return
	}
	r.dirty = false
	var f knownPeersFile
	for _, p := range r.peers {
		e := knownPeerEntry{PeerID: p.id.String(), LastConnected: p.lastConnected.UTC()}
		for _, a := range p.addrs {
			e.Addrs = append(e.Addrs, a.String())
		}
		f.Peers = append(f.Peers, e)
	}
	r.mu.Unlock()
	sort.Slice(f.Peers, func(i, j int) bool { return f.Peers[i].PeerID < f.Peers[j].PeerID })
	b, err := json.MarshalIndent(f, "", "  ")
	if err == nil {
		err = home.WriteFileAtomic(r.path, append(b, '\n'), 0o644)
	}
	if err != nil {
		r.logf("net: keep known peers: %v", err)
	}
}

// addBootstrap adds a peer from the config whose dial at start failed; it is re-dialled.
func (r *redialer) addBootstrap(pi peer.AddrInfo, err error) {
	r.mu.Lock()
	p := r.learnLocked(pi.ID, pi.Addrs, false)
	if p != nil {
		p.bootstrap = true
		p.failures, p.lastErr = 1, err.Error()
		p.next = r.clk.Now().Add(r.backoff(p.failures))
	}
	r.mu.Unlock()
	r.poke()
}

// learn records a peer this node connected to on purpose, with the addresses it dialled.
func (r *redialer) learn(pi peer.AddrInfo, bootstrap bool) {
	r.mu.Lock()
	if p := r.learnLocked(pi.ID, pi.Addrs, true); p != nil && bootstrap {
		p.bootstrap = true
	}
	r.mu.Unlock()
	r.poke()
}

// learnLocked adds or updates a known peer with addrs (put first, deduplicated, bounded).
func (r *redialer) learnLocked(id peer.ID, addrs []ma.Multiaddr, connected bool) *knownPeer {
	if id == r.h.ID() || len(addrs) == 0 {
		return nil
	}
	p, ok := r.peers[id]
	if !ok {
		p = &knownPeer{id: id}
		r.peers[id] = p
		r.dirty = true
	}
	merged := slices.Clone(addrs)
	for _, a := range p.addrs {
		if !slices.ContainsFunc(merged, a.Equal) {
			merged = append(merged, a)
		}
	}
	if len(merged) > maxKnownAddrs {
		merged = merged[:maxKnownAddrs]
	}
	if !slices.EqualFunc(merged, p.addrs, func(a, b ma.Multiaddr) bool { return a.Equal(b) }) {
		p.addrs, r.dirty = merged, true
	}
	if connected && r.h.Network().Connectedness(id) == network.Connected {
		now := r.clk.Now()
		if p.connectedAt.IsZero() {
			p.connectedAt = now
		}
		p.lastConnected, r.dirty = now, true
	}
	r.evictLocked()
	return p
}

// evictLocked drops learned, unconnected peers connected longest ago past maxKnownPeers.
func (r *redialer) evictLocked() {
	for len(r.peers) > maxKnownPeers {
		var oldest *knownPeer
		for _, p := range r.peers {
			if p.bootstrap || !p.connectedAt.IsZero() || p.dialing {
				continue
			}
			if oldest == nil || p.lastConnected.Before(oldest.lastConnected) {
				oldest = p
			}
		}
		if oldest == nil {
			return
		}
		delete(r.peers, oldest.id)
		r.dirty = true
	}
}

// backoff is the wait before the next dial after failures failed ones in a row.
func (r *redialer) backoff(failures int) time.Duration {
	return jitteredBackoff(r.o.Min, r.o.Max, failures, r.rnd.Float64())
}

// jitteredBackoff is lo doubled failures times, at most hi, times 0.8 + 0.4u (u in [0,1)).
func jitteredBackoff(lo, hi time.Duration, failures int, u float64) time.Duration {
	d := lo
	for i := 0; i < failures && d < hi; i++ {
		d *= 2
	}
	return time.Duration(float64(min(d, hi)) * (0.8 + 0.4*u))
}

func (r *redialer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// start runs the loop and the first round of dials (every known peer not connected).
func (r *redialer) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.mu.Lock()
	r.pending = 0
	now := r.clk.Now()
	for _, p := range r.peers {
		if p.next.IsZero() {
			p.next = now
		}
	}
	r.mu.Unlock()
	go r.run(ctx)
}

// close stops the loop and writes what changed.
func (r *redialer) close() {
	if r.cancel == nil {
		r.sub.Close()
		return
	}
	r.cancel()
	<-r.done
}

func (r *redialer) run(ctx context.Context) {
	defer close(r.done)
	defer r.sub.Close()
	defer r.save()
	timer := r.clk.NewTimer(0)
	defer timer.Stop()
	first := true
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-r.sub.Out():
			r.handle(e)
		case <-r.wake:
		case <-timer.Chan():
		}
		r.save()
		next := r.dialDue(ctx, first)
		first = false
		timer.Stop()
		select { // drain a fire that raced with Stop, so Reset starts clean
		case <-timer.Chan():
		default:
		}
		if !next.IsZero() {
			timer.Reset(max(next.Sub(r.clk.Now()), 0))
		}
	}
}

// handle takes one host event.
func (r *redialer) handle(e any) {
	now := r.clk.Now()
	switch e := e.(type) {
	case event.EvtPeerConnectednessChanged:
		connected := len(r.h.Network().Peers())
		r.mu.Lock()
		defer r.mu.Unlock()
		p := r.peers[e.Peer]
		switch e.Connectedness {
		case network.Connected:
			r.alone = false
			addr := "?"
			if cs := r.h.Network().ConnsToPeer(e.Peer); len(cs) > 0 {
				addr = cs[0].RemoteMultiaddr().String()
			}
			r.warnf("net: peer connected %s at %s (%d connected)", e.Peer, addr, connected)
			if p != nil {
				p.connectedAt, p.lastConnected, p.lastErr, r.dirty = now, now, "", true
			}
		case network.NotConnected:
			r.warnf("net: peer disconnected %s (%d connected)", e.Peer, connected)
			if p != nil {
				if !p.connectedAt.IsZero() && now.Sub(p.connectedAt) >= stableConn {
					p.failures = 0
				} else {
					p.failures++
				}
				p.connectedAt = time.Time{}
				p.next = now.Add(r.backoff(p.failures))
			}
			if connected == 0 {
				r.logAloneLocked()
			}
		}
	case event.EvtPeerIdentificationCompleted:
		if !slices.ContainsFunc(e.Protocols, func(p lp2pproto.ID) bool { return p == r.proto }) || e.Conn == nil {
			return
		}
		addrs := sameHostAddrs(e.Conn, e.ListenAddrs)
		r.mu.Lock()
		r.learnLocked(e.Peer, addrs, true)
		r.mu.Unlock()
	}
}

// logAloneLocked says, once per time it happens, that no peer is connected.
func (r *redialer) logAloneLocked() {
	if r.alone {
		return
	}
	r.alone = true
	if len(r.peers) == 0 {
		r.warnf("net: running alone: no peers connected and none known (list some under bootstrap in config.yaml, or `evalmesh connect ADDR`)")
		return
	}
	r.warnf("net: running alone: no peers connected; re-dialling %d known peer(s) with backoff", len(r.peers))
}

// sameHostAddrs is what a peer's connection says to dial it again: the address dialled
// (outbound), and of the addresses it announces those on the IP its connection came from.
func sameHostAddrs(c network.Conn, announced []ma.Multiaddr) []ma.Multiaddr {
	remote := c.RemoteMultiaddr()
	var out []ma.Multiaddr
	if c.Stat().Direction == network.DirOutbound {
		out = append(out, remote)
	}
	rip, err := manet.ToIP(remote)
	if err != nil {
		return out
	}
	for _, a := range announced {
		if ip, err := manet.ToIP(a); err == nil && ip.Equal(rip) && !ip.Equal(net.IPv4zero) && !slices.ContainsFunc(out, a.Equal) {
			out = append(out, a)
		}
	}
	return out
}

// dialDue starts a dial to every known peer that is not connected and whose time has come,
// and returns when the next one is due (zero: none). first marks the round at start: once
// all its dials are over with no peer connected, the node says it runs alone.
func (r *redialer) dialDue(ctx context.Context, first bool) time.Time {
	now := r.clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	for _, p := range r.peers {
		if p.dialing || r.h.Network().Connectedness(p.id) == network.Connected {
			continue
		}
		if r.o.Off {
			continue
		}
		if p.next.After(now) {
			if next.IsZero() || p.next.Before(next) {
				next = p.next
			}
			continue
		}
		p.dialing = true
		if first {
			r.pending++
		}
		go r.dial(ctx, p.id, slices.Clone(p.addrs), first)
	}
	if first && r.pending == 0 && len(r.h.Network().Peers()) == 0 {
		r.pending = -1
		r.logAloneLocked()
	}
	return next
}

// dial dials one known peer and schedules the next try when it fails.
func (r *redialer) dial(ctx context.Context, id peer.ID, addrs []ma.Multiaddr, first bool) {
	// The swarm's own dial backoff (5 s plus 1 s × failures², up to 5 minutes) would refuse
	// this dial for minutes after a long outage: our schedule replaces it for known peers.
	if sw, ok := r.h.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(id)
	}
	dctx, cancel := context.WithTimeout(ctx, redialTimeout) // wall clock: bounds a dial
	err := r.h.Connect(dctx, peer.AddrInfo{ID: id, Addrs: addrs})
	cancel()
	if err == nil {
		// Like Connect: a peer of the network is kept whatever the connection manager thinks.
		r.h.ConnManager().Protect(id, "evalmesh-connect")
	}
	r.mu.Lock()
	if p := r.peers[id]; p != nil {
		p.dialing = false
		if err != nil && ctx.Err() == nil {
			p.failures++
			p.lastErr = err.Error()
			wait := r.backoff(p.failures)
			p.next = r.clk.Now().Add(wait)
			r.logf("net: re-dial %s failed (%d in a row; next in %s): %v", id, p.failures, wait.Round(100*time.Millisecond), err)
		}
	}
	if first && r.pending > 0 {
		if r.pending--; r.pending == 0 && len(r.h.Network().Peers()) == 0 {
			r.logAloneLocked()
		}
	}
	r.mu.Unlock()
	r.poke()
}

// known lists the known peers, sorted by ID.
func (r *redialer) known() []KnownPeer {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]KnownPeer, 0, len(r.peers))
	for _, p := range r.peers {
		k := KnownPeer{ID: p.id.String(), Connected: r.h.Network().Connectedness(p.id) == network.Connected,
			LastConnected: p.lastConnected, Failures: p.failures, LastError: p.lastErr}
		if !k.Connected {
			k.NextDial = p.next
		}
		for _, a := range p.addrs {
			k.Addrs = append(k.Addrs, a.String())
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

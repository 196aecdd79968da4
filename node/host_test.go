package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/xfer/xfertest"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

func writeSwarmKey(t *testing.T, hexKey string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "swarm.key")
	if err := os.WriteFile(p, []byte("/key/swarm/psk/1.0.0/\n/base16/\n"+hexKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func pskOptions(t *testing.T, keyPath string) Options {
	cfg := home.DefaultConfig()
	cfg.PrivateNetworkKey = keyPath
	o := testOptions()
	o.Listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	o.Config = &cfg
	return o
}

// TestPrivateNetwork: nodes sharing a pre-shared key connect and move a bundle; a node with
// another key or none cannot connect; QUIC (which cannot carry a PSK) is not listened on.
func TestPrivateNetwork(t *testing.T) {
	key1 := writeSwarmKey(t, strings.Repeat("ab", 32))
	key2 := writeSwarmKey(t, strings.Repeat("cd", 32))
	a, b := startNode(t, pskOptions(t, key1)), startNode(t, pskOptions(t, key1))
	for _, addr := range a.Addrs() {
		if strings.Contains(addr, "quic") {
			t.Fatalf("private-network node listens on QUIC: %s", addr)
		}
	}
	files := testFiles(700 << 10)
	root := seed(t, files, a)
	connect(t, b, a)
	if err := b.Fetch(context.Background(), root, nil); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, b, root, files)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	other := startNode(t, pskOptions(t, key2))
	if err := other.Connect(ctx, a.Addrs()[0]); err == nil {
		t.Fatal("a node with another network key connected")
	}
	public := startNode(t, testOptions())
	if err := public.Connect(ctx, a.Addrs()[0]); err == nil {
		t.Fatal("a node without the network key connected")
	}
}

func TestBadSwarmKeyNamesFile(t *testing.T) {
	p := writeSwarmKey(t, "nothex")
	_, err := New(context.Background(), newHome(t), pskOptions(t, p))
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want it to name %s", err, p)
	}
}

// TestDefaultsListenOnLoopbackOnly: the default config listens on 127.0.0.1 (TCP and QUIC).
func TestDefaultsListenOnLoopbackOnly(t *testing.T) {
	cfg := home.DefaultConfig()
	for i, a := range cfg.Listen { // keep the defaults' shape, pick free ports
		cfg.Listen[i] = strings.Replace(strings.Replace(a, "/tcp/4201", "/tcp/0", 1), "/udp/4201", "/udp/0", 1)
	}
	n := startNode(t, Options{Config: &cfg, API: "127.0.0.1:0"})
	var tcp, quic bool
	for _, a := range n.Addrs() {
		if !strings.HasPrefix(a, "/ip4/127.0.0.1/") {
			t.Fatalf("default listen address %s is not loopback", a)
		}
		tcp = tcp || strings.Contains(a, "/tcp/")
		quic = quic || strings.Contains(a, "/quic-v1/")
	}
	if !tcp || !quic {
		t.Fatalf("default addresses %v: want TCP and QUIC", n.Addrs())
	}
}

// TestBootstrapConnectsAtStart: peers listed under bootstrap are dialled when the node starts.
func TestBootstrapConnectsAtStart(t *testing.T) {
	a := startNode(t, testOptions())
	cfg := home.DefaultConfig()
	cfg.Bootstrap = []string{a.Addrs()[0]}
	o := testOptions()
	o.Config = &cfg
	b := startNode(t, o)
	testutil.WaitFor(t, 10*time.Second, "bootstrap connection", func() bool {
		return len(b.host.Network().ConnsToPeer(a.ID())) > 0
	})
}

// TestHostTLSInteropsWithStockLibp2p: the daemon's host negotiates /tls/1.0.0 (TLS first,
// as libp2p's defaults order it) with a stock go-libp2p TLS host, dialling or dialled, and a
// 4 MiB echo comes back intact.
func TestHostTLSInteropsWithStockLibp2p(t *testing.T) {
	daemon, _ := newLoopbackHost(t)
	const proto = "/evalmesh/test-echo/1.0.0"
	echo := func(s network.Stream) { io.Copy(s, s); s.Close() }
	daemon.SetStreamHandler(proto, echo)
	payload := bytes.Repeat([]byte("evalmesh tls interop "), 200_000) // 4 MiB
	for _, daemonDials := range []bool{true, false} {
		stock, err := xfertest.NewHost()
		if err != nil {
			t.Fatal(err)
		}
		stock.SetStreamHandler(proto, echo)
		from, to := stock, daemon
		if daemonDials {
			from, to = daemon, stock
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := from.Connect(ctx, peer.AddrInfo{ID: to.ID(), Addrs: to.Addrs()}); err != nil {
			t.Fatal(err)
		}
		for _, c := range from.Network().ConnsToPeer(to.ID()) {
			if c.ConnState().Security != libp2ptls.ID {
				t.Fatalf("daemonDials=%v: conn secured with %q, want %q", daemonDials, c.ConnState().Security, libp2ptls.ID)
			}
		}
		s, err := from.NewStream(ctx, to.ID(), proto)
		if err != nil {
			t.Fatal(err)
		}
		go func() { s.Write(payload); s.CloseWrite() }()
		got, err := io.ReadAll(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("daemonDials=%v: echo of %d bytes came back as %d different bytes", daemonDials, len(payload), len(got))
		}
		s.Close()
		cancel()
		stock.Close()
	}
}

// TestHostFallsBackToNoise: a peer that offers only noise still connects to the daemon's
// host (TLS first, noise second, as go-libp2p's defaults).
func TestHostFallsBackToNoise(t *testing.T) {
	daemon, _ := newLoopbackHost(t)
	noiseOnly, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Security(noise.ID, noise.New),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer noiseOnly.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := noiseOnly.Connect(ctx, peer.AddrInfo{ID: daemon.ID(), Addrs: daemon.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, c := range noiseOnly.Network().ConnsToPeer(daemon.ID()) {
		if c.ConnState().Security != noise.ID {
			t.Fatalf("conn secured with %q, want %q", c.ConnState().Security, noise.ID)
		}
	}
}

// newLoopbackHost starts a host with the daemon's constructor on 127.0.0.1 under a new key,
// closed when the test ends.
func newLoopbackHost(t testing.TB) (host.Host, crypto.PrivKey) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newHost(k, []string{"/ip4/127.0.0.1/tcp/0"}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, k
}

package xfertest

import (
	"context"
	"io"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// BenchmarkSecurityTransport (issue 18) moves 256 MiB over one libp2p stream between two
// hosts on 127.0.0.1 (TCP, yamux) secured by TLS 1.3 (AES-GCM where the CPU has AES-NI)
// or by noise (ChaCha20-Poly1305), side by side in one run: MB/s and MB per CPU-second of
// the process (both hosts). The node's hosts take go-libp2p's default order, TLS first.
func BenchmarkSecurityTransport(b *testing.B) {
	const total = 256 << 20
	for _, sec := range []struct {
		name string
		opt  libp2p.Option
	}{{"tls", libp2p.Security(libp2ptls.ID, libp2ptls.New)}, {"noise", libp2p.Security(noise.ID, noise.New)}} {
		b.Run(sec.name, func(b *testing.B) {
			mk := func() host.Host {
				h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.Transport(tcp.NewTCPTransport),
					sec.opt, libp2p.Muxer(yamux.ID, yamux.DefaultTransport), libp2p.DisableRelay(), libp2p.DisableMetrics())
				if err != nil {
					b.Fatal(err)
				}
				return h
			}
			a, c := mk(), mk()
			defer a.Close()
			defer c.Close()
			if err := a.Connect(context.Background(), peer.AddrInfo{ID: c.ID(), Addrs: c.Addrs()}); err != nil {
				b.Fatal(err)
			}
			done := make(chan error, 1)
			c.SetStreamHandler("/bench/sink", func(s network.Stream) {
				_, err := io.CopyBuffer(io.Discard, s, make([]byte, 1<<20))
				s.Close()
				done <- err
			})
			buf := make([]byte, 1<<20)
			b.SetBytes(total)
			defer testutil.ReportCPURate(b, total)()
			for b.Loop() {
				s, err := a.NewStream(context.Background(), c.ID(), "/bench/sink")
				if err != nil {
					b.Fatal(err)
				}
				for n := 0; n < total; n += len(buf) {
					if _, err := s.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				s.CloseWrite()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			if conns := a.Network().ConnsToPeer(c.ID()); len(conns) > 0 {
				b.Logf("security %s", conns[0].ConnState().Security)
			}
		})
	}
}

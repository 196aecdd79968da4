package batchtls

import (
	"context"
	"crypto/rand"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/sec"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// hostOpts says how a test host is built: batched or stock TLS, and yamux's MaxMessageSize
// (0 keeps libp2p's default, 64 KiB).
type hostOpts struct {
	batched        bool
	maxMessageSize uint32
}

func newTestHost(tb testing.TB, o hostOpts) host.Host {
	tb.Helper()
	var secOpt libp2p.Option
	if o.batched {
		secOpt = libp2p.Security(ID, New)
	} else {
		secOpt = libp2p.Security(libp2ptls.ID, libp2ptls.New)
	}
	mux := *yamux.DefaultTransport
	if o.maxMessageSize != 0 {
		mux.MaxMessageSize = o.maxMessageSize
	}
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		secOpt,
		libp2p.Muxer(yamux.ID, &mux),
		libp2p.DisableRelay(),
		libp2p.ForceReachabilityPrivate(),
		libp2p.DisableMetrics(),
	)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

func connectHosts(tb testing.TB, a, b host.Host) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

// spyConn counts the writes and reads that reach the socket, and their sizes.
type spyConn struct {
	net.Conn
	writes, reads atomic.Int64
	maxWrite      atomic.Int64
}

func (s *spyConn) Write(p []byte) (int, error) {
	s.writes.Add(1)
	for {
		m := s.maxWrite.Load()
		if int64(len(p)) <= m || s.maxWrite.CompareAndSwap(m, int64(len(p))) {
			break
		}
	}
	return s.Conn.Write(p)
}

func (s *spyConn) Read(p []byte) (int, error) {
	s.reads.Add(1)
	return s.Conn.Read(p)
}

// securePair handshakes a TCP connection on 127.0.0.1 with st on both ends (client
// batched or not as told, server likewise) and returns the secure conns with the spies on
// their sockets.
func securePair(t *testing.T, clientBatched, serverBatched bool) (client, server sec.SecureConn, cspy, sspy *spyConn) {
	t.Helper()
	newST := func(batched bool) (sec.SecureTransport, peer.ID) {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(key)
		if batched {
			st, err := New(ID, key, nil)
			if err != nil {
				t.Fatal(err)
			}
			return st, id
		}
		st, err := libp2ptls.New(libp2ptls.ID, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st, id
	}
	cst, _ := newST(clientBatched)
	sst, sid := newST(serverBatched)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		c   sec.SecureConn
		spy *spyConn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			ch <- res{err: err}
			return
		}
		spy := &spyConn{Conn: raw}
		c, err := sst.SecureInbound(ctx, spy, "")
		ch <- res{c, spy, err}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cspy = &spyConn{Conn: raw}
	client, err = cst.SecureOutbound(ctx, cspy, sid)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c, cspy, r.spy
}

package node

import (
	"fmt"
	"os"
	"strings"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/pnet"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
)

// newHost builds the libp2p host. It listens only where told (127.0.0.1 by default) and turns
// off everything that would talk to addresses nobody configured: no NAT port mapping, no
// relay, no hole punching, no AutoNAT probing (reachability is forced private so the AutoNAT
// client never dials out). A private-network key restricts the host to TCP, because QUIC
// cannot carry a pre-shared key.
func newHost(key crypto.PrivKey, listen []string, pskPath string, extra ...libp2p.Option) (host.Host, error) {
	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.DisableRelay(),
		libp2p.ForceReachabilityPrivate(),
		libp2p.DisableMetrics(),
		libp2p.Transport(tcp.NewTCPTransport),
	}
	if pskPath != "" {
		f, err := os.Open(pskPath)
		if err != nil {
			return nil, fmt.Errorf("private_network_key %s: %w", pskPath, err)
		}
		psk, err := pnet.DecodeV1PSK(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("private_network_key %s is not a libp2p swarm key (/key/swarm/psk/1.0.0/ header, /base16/, 64 hex digits): %w", pskPath, err)
		}
		opts = append(opts, libp2p.PrivateNetwork(psk))
		var tcpOnly []string
		for _, a := range listen {
			if !strings.Contains(a, "/quic") && !strings.Contains(a, "/webtransport") {
				tcpOnly = append(tcpOnly, a)
			}
		}
		listen = tcpOnly
	} else {
		opts = append(opts, libp2p.Transport(quic.NewTransport))
	}
	if len(listen) == 0 {
		opts = append(opts, libp2p.NoListenAddrs)
	} else {
		opts = append(opts, libp2p.ListenAddrStrings(listen...))
	}
	h, err := libp2p.New(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("start libp2p host (listen %v): %w", listen, err)
	}
	return h, nil
}

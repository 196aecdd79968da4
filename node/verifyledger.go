package node

import (
	"context"
	"errors"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/node/verify"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

// VerifyLedger re-verifies a network's ledger from the network alone (verify.Ledger, what
// `evalmesh verify-ledger` runs) over a node of home h started for it: no lab certificate
// needed, the network document's network, no bootstrap peers or mDNS of its own, no sync
// but the ones asked for, and a gossipsub that only hears the heads topic.
func VerifyLedger(ctx context.Context, h home.Home, o verify.Options) (*verify.Report, error) {
	return verify.Ledger(ctx, o, func(ctx context.Context, o verify.Options, trust *attest.TrustStore) (verify.Node, error) {
		return startOutsider(ctx, h, o, trust)
	})
}

// outsider is verify.Node over a Node and its gossipsub that hears heads only.
type outsider struct {
	n           *Node
	ps          *PubSub
	cancelHeads func()
}

// startOutsider starts the node of home h that verify.Ledger runs on. Nothing is published.
func startOutsider(ctx context.Context, h home.Home, o verify.Options, trust *attest.TrustStore) (_ *outsider, err error) {
	cfg, err := h.Config()
	if err != nil {
		return nil, err
	}
	cfg.Network, cfg.Bootstrap, cfg.MDNS = o.Doc.Network, nil, false
	n, err := New(ctx, h, Options{Config: &cfg, Listen: o.Listen, Trust: trust, Network: o.Doc, Logf: o.Logf,
		StallTimeout: o.FetchTimeout, Sync: syncer.Options{NoAutoSync: true}, Clock: o.Clock})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	// Heads only: the roots the labs' nodes announce, recorded by the validator.
	ps, err := NewPubSub(ctx, n.host, o.Doc.Network, map[string]protocol.ValidatorFunc{
		protocol.TopicHeads: func(from peer.ID, data []byte) protocol.Validation {
			return n.heads.Observe(data, from, o.Clock.Now())
		},
	}, PubSubOptions{})
	if err != nil {
		return nil, err
	}
	heads, cancelHeads, err := ps.Subscribe(ctx, protocol.TopicHeads)
	if err != nil {
		ps.Close()
		return nil, err
	}
	go func() {
		for range heads { // recorded by the validator
		}
	}()
	return &outsider{n: n, ps: ps, cancelHeads: cancelHeads}, nil
}

func (v *outsider) Close() error {
	v.cancelHeads()
	v.ps.Close()
	return v.n.Close()
}

func (v *outsider) LabPeer(addr string) (peer.ID, error) {
	pi, err := v.n.parsePeerAddr(addr)
	return pi.ID, err
}

func (v *outsider) Connect(ctx context.Context, addr string) error { return v.n.Connect(ctx, addr) }

func (v *outsider) SyncWith(ctx context.Context, p peer.ID) error {
	_, err := v.n.syncer.SyncWith(ctx, p)
	if errors.Is(err, syncer.ErrBusy) {
		return verify.ErrSyncBusy
	}
	return err
}

func (v *outsider) Store() *vstore.Store { return v.n.vstore }

func (v *outsider) PeerHeads() []protocol.PeerHead { return v.n.heads.Peers() }

func (v *outsider) BundleDir(ctx context.Context, c cid.Cid, timeout time.Duration) (string, error) {
	return v.n.bundleDir(ctx, c, timeout)
}

func (v *outsider) GetBlock(ctx context.Context, c cid.Cid) ([]byte, error) {
	b, err := v.n.bserv.GetBlock(ctx, c)
	if err != nil {
		return nil, err
	}
	return b.RawData(), nil
}

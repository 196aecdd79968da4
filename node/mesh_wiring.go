package node

import (
	"context"
	"os"
	"path/filepath"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/tasks"
)

// The node's side of the mesh: StartMesh fills the mesh's options with the node's values
// (home, network, the lab's agent policy, logs, metrics, clock) and hands it meshWiring,
// the node as the loop sees it.

// StartMesh joins n to its network: gossipsub with the protocol's validators, the verified
// store, and the loop. n must have been started with a store (Node.Store).
func StartMesh(ctx context.Context, n *Node, opts mesh.Options) (*mesh.Mesh, error) {
	if opts.Clock == nil {
		opts.Clock = n.opts.Clock // one clock for the node and its mesh
	}
	opts.Home, opts.Network, opts.AgentPolicy = n.home, n.cfg.Network, runner.PolicyFromConfig(n.cfg.Runner)
	opts.Logf, opts.Warnf, opts.Metrics = n.opts.Logf, n.opts.Warnf, meshMetricsOf{n.metrics}
	return mesh.Start(ctx, &meshWiring{n: n, runner: opts.Runner}, n.Store(), opts)
}

// meshWiring implements mesh.Node over a node and the mesh's runner.
type meshWiring struct {
	n      *Node
	runner *runner.Runner
}

func (w *meshWiring) ID() peer.ID      { return w.n.ID() }
func (w *meshWiring) Peers() []peer.ID { return w.n.host.Network().Peers() }

func (w *meshWiring) JoinGossip(ctx context.Context, validators map[string]protocol.ValidatorFunc, values map[string]protocol.ValueValidatorFunc) (mesh.Gossip, error) {
	pso := w.n.opts.PubSub
	pso.Values = values
	ps, err := NewPubSub(ctx, w.n.host, w.n.cfg.Network, validators, pso)
	if err != nil {
		return nil, err
	}
	w.n.meshMu.Lock()
	w.n.gossip = ps // its counters are served on /metrics
	w.n.meshMu.Unlock()
	return meshPubSub{ps}, nil
}

func (w *meshWiring) RunSync(ctx context.Context, clk clock.Clock, interval time.Duration) {
	if sy := w.n.Syncer(); sy != nil {
		sy.Run(ctx, clk, interval)
	}
}

func (w *meshWiring) SyncWith(ctx context.Context, p peer.ID) error {
	sy := w.n.Syncer()
	if sy == nil {
		return nil
	}
	_, err := sy.SyncWith(ctx, p)
	return err
}

func (w *meshWiring) ObserveHead(raw []byte, sender peer.ID, now time.Time) protocol.Validation {
	return w.n.heads.Observe(raw, sender, now)
}
func (w *meshWiring) SignedHead(lab string) ([]byte, error) { return w.n.heads.Signed(lab) }
func (w *meshWiring) SetHeadRoot(root string, fp recon.Fingerprint) {
	w.n.heads.SetRoot(root, fp)
}
func (w *meshWiring) SetHeadsClock(now func() time.Time, interval time.Duration) {
	w.n.heads.SetClock(now, interval)
}
func (w *meshWiring) PeerHeads() []protocol.PeerHead { return w.n.heads.Peers() }
func (w *meshWiring) SetDocumentVerdict(v protocol.DocumentVerdict) {
	w.n.heads.SetVerdict(v)
}
func (w *meshWiring) NetworkDoc() (*protocol.NetworkDoc, error) { return LoadNetworkDoc(w.n.home) }

func (w *meshWiring) StoredCampaign(env []byte) (*protocol.VerifiedCampaign, error) {
	_, v, err := w.n.verifyStoredCampaign(env)
	if err != nil {
		return nil, err
	}
	return v.(*protocol.VerifiedCampaign), nil
}

func (w *meshWiring) BundleDir(ctx context.Context, c cid.Cid) (string, error) {
	return w.n.bundleDir(ctx, c, 0)
}

func (w *meshWiring) PutBlock(ctx context.Context, b blocks.Block) error {
	if err := w.n.bstore.Put(ctx, b); err != nil {
		return err
	}
	return w.n.store.Sync()
}

func (w *meshWiring) GetBlock(ctx context.Context, c cid.Cid) (blocks.Block, error) {
	return w.n.bserv.GetBlock(ctx, c)
}

func (w *meshWiring) EnsureAgentImage(ctx context.Context, spec *agentspec.Spec) error {
	return w.n.ensureRunnerImage(ctx, w.runner, spec)
}

// meshPubSub is the node's gossipsub as the mesh reads it.
type meshPubSub struct{ *PubSub }

func (p meshPubSub) Subscribe(ctx context.Context, kind string) (<-chan mesh.Message, func(), error) {
	return subscribeAs(p.PubSub, ctx, kind, func(m Message) mesh.Message {
		return mesh.Message{From: m.From, Data: m.Data, Local: m.Local, Value: m.Value}
	})
}

// meshMetricsOf counts the mesh's events in the node's metrics.
type meshMetricsOf struct{ nm *nodeMetrics }

func (m meshMetricsOf) Claim(direction, kind string) { m.nm.claim(direction, kind) }
func (m meshMetricsOf) Signed(p attest.RunPredicate) { m.nm.signed(p) }
func (m meshMetricsOf) RunEnded(o protocol.RunOutcome, ab bool, why string) {
	m.nm.runEnded(o, ab, why)
}
func (m meshMetricsOf) LedgerSeconds(s float64) { m.nm.ledgerSeconds.Observe(s) }
func (m meshMetricsOf) ClaimingStopped(why string) {
	m.nm.claimingStopped.Set(1)
	m.nm.stoppedWhy.Store(why)
}

// ClaimingStopped says why this node stopped claiming for failures of its own ("": it
// claims).
func (n *Node) ClaimingStopped() string {
	why, _ := n.metrics.stoppedWhy.Load().(string)
	return why
}

// bundleDir returns the unpacked bundle c under HOME/bundles, fetching it from the connected
// peers first (within timeout; 0: the fetch's default) when this home does not have it. It
// unpacks into a temporary folder beside it and renames, so a crash leaves no half bundle;
// callers that may fetch one CID at once serialise (Mesh.BundleDir).
func (n *Node) bundleDir(ctx context.Context, c cid.Cid, timeout time.Duration) (string, error) {
	dir := filepath.Join(n.home.BundlesDir(), c.String())
	if _, err := os.Stat(filepath.Join(dir, tasks.MetaFile)); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".unpack-"+c.String()+"-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	target := filepath.Join(tmp, "b")
	if err := n.Get(ctx, c, target, GetOptions{Timeout: timeout}); err != nil {
		return "", err
	}
	if err := os.Rename(target, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// verifyStoredCampaign is the store's campaign verifier: signature, trusted lab, network and
// a well-formed body, as of the campaign's own creation time, so a campaign whose deadline
// has passed still enters the store (its runs count; nobody claims its slots any more).
// The order key is its creation time.
func (n *Node) verifyStoredCampaign(env []byte) (uint64, any, error) {
	v, err := protocol.VerifyCampaign(env, n.vstore.Trust(), protocol.CampaignVerifyOptions{AtCreation: true, Network: n.cfg.Network})
	if err != nil {
		return 0, nil, err
	}
	return campaignOrderKey(v), v, nil
}

// GrantsIn returns a runner.GrantKeys Grants function over a stored set (a node without a
// mesh: the CLI, tests). Each call scans the set; the mesh keeps an index instead.
func GrantsIn(set *vstore.Set) func(bundle string) [][]byte {
	return func(bundle string) [][]byte {
		var out [][]byte
		_ = set.Each(func(_ recon.ID, env []byte) error {
			if g, ok, _ := attest.GrantOf(env); ok && g.Bundle == bundle {
				out = append(out, env)
			}
			return nil
		})
		return out
	}
}

// gossipsub is the mesh's gossipsub (nil while the node runs alone).
func (n *Node) gossipsub() *PubSub {
	n.meshMu.Lock()
	defer n.meshMu.Unlock()
	return n.gossip
}

package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/ipfs/boxo/bitswap"
	bsnet "github.com/ipfs/boxo/bitswap/network/bsnet"
	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	offline "github.com/ipfs/boxo/exchange/offline"
	"github.com/ipfs/boxo/ipld/merkledag"
	pin "github.com/ipfs/boxo/pinning/pinner"
	"github.com/ipfs/boxo/pinning/pinner/dspinner"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/ipfs/go-datastore"
	pebbleds "github.com/ipfs/go-ds-pebble"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/diskstore"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/node/pins"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/node/xfer"
	"github.com/evalmesh/evalmesh/protocol"

	"golang.org/x/time/rate"
)

// Options adjust a node beyond its home's config; the zero value uses the config as is.
type Options struct {
	// Listen, when non-nil, replaces the config's libp2p listen addresses.
	Listen []string
	// API, when non-empty, replaces the config's HTTP API address (host:port; port 0 picks one).
	API string
	// Config, when non-nil, is used instead of reading HOME/config.yaml.
	Config *home.Config
	// WrapBlockstore, when set, wraps the blockstore the node stores into and serves from.
	// Tests use it to make a peer that serves corrupted blocks or runs out of disk.
	WrapBlockstore func(blockstore.Blockstore) blockstore.Blockstore
	// StallTimeout fails a fetch when no block arrives for this long (default 2 minutes).
	StallTimeout time.Duration
	// Blockstore, when non-empty, replaces the config's blockstore kind ("flat" or "pack").
	Blockstore string
	// BitswapOnly skips the streaming protocol when fetching (tests and benchmarks compare
	// the two paths with it); the node still serves the streaming protocol to others.
	BitswapOnly bool
	// Logf receives the node's log lines (default: discard).
	Logf func(format string, args ...any)
	// Warnf receives the lines an operator must see: peers connecting and leaving, the
	// node running alone, bootstrap peers it cannot reach (default: Logf).
	Warnf func(format string, args ...any)
	// Redial tunes re-dialling known peers (redial.go; zero value: on, 1 s to 60 s).
	Redial RedialOptions
	// Trust is what the attestation store verifies under; nil loads HOME/trust.yaml when
	// it exists, else an empty trust store (every attestation refused as from an unknown
	// lab).
	Trust *attest.TrustStore
	// VerifyCampaign verifies campaign envelopes for the store (sync, import; a campaign
	// arriving by gossip enters with the value the mesh's validator verified); nil: the
	// node's own verifier.
	VerifyCampaign vstore.CampaignVerifier
	// Sync tunes anti-entropy (zero value: defaults).
	Sync syncer.Options
	// TestControls serves /api/v0/test/partition and /test/heal, which cut this node off
	// from given peers inside evalmesh (connection gater + closing connections) for fault
	// tests. Never on in production (daemon --test-controls).
	TestControls bool
	// TestClaimHoldings makes the node answer "held" to every holdings request and fetch
	// nothing in its repair rounds: a dishonest lab that claims holdings it does not keep
	// (docs/design.md §9). Never on in production (daemon --test-claim-holdings).
	TestClaimHoldings bool
	// PubSub tunes the mesh's gossipsub queues (zero: defaults).
	PubSub PubSubOptions
	// Mesh, when set, is called by Run once the node is up; a non-nil answer joins the
	// node to its network (StartMesh) before the API answers. nil runs the node alone.
	Mesh func(n *Node) (*mesh.Options, error)
	// Network is the network document; nil loads HOME/network.json when it exists.
	Network *protocol.NetworkDoc
	// LedgerInput says what the ledger root announced on /heads is computed with (tasks,
	// policy, scoring); nil announces no root. Envelopes and trust come from the store.
	LedgerInput func() (attest.LedgerInput, error)
	// DashboardListen, when non-empty, is the host:port Run serves the read-only dashboard
	// and /metrics on (package node/dashboard; no token, no control endpoint). "" is off.
	DashboardListen string
	// Clock is the node's one clock (package internal/clock): re-dial backoffs, pin repair
	// rounds and their fetch budgets, sync rounds, fetch stalls, GC ages, heads' staleness
	// and certificates checked now read it, and the mesh's, unless mesh.Options.Clock is set
	// (default the wall clock). Network deadlines on streams, and the timeouts of dials,
	// stream opens and HTTP calls, stay on the wall clock: the kernel or the peer decides them.
	Clock clock.Clock
}

// Node is a running evalmesh node: libp2p host, blockstore, bitswap, pinner.
type Node struct {
	home home.Home
	cfg  home.Config
	opts Options

	host    host.Host
	store   diskstore.Store // flat or pack: what Sync is called on before a pin is recorded
	bstore  blockstore.Blockstore
	writes  *latchStore
	gcl     blockstore.GCLocker // PinLock: puts that end in a pin; GCLock: deleting blocks
	meta    *pebbleds.Datastore
	bswap   *bitswap.Bitswap
	bserv   blockservice.BlockService
	dag     ipld.DAGService // fetches from peers
	local   ipld.DAGService // never touches the network
	pinner  pin.Pinner
	mdnsSvc mdns.Service
	xsrv    *xfer.Server
	pace    *rate.Limiter // the xfer server's send limit (test controls only; else nil)
	cancel  context.CancelFunc
	vstore  *vstore.Store
	syncer  *syncer.Syncer
	redial  *redialer
	meshMu  sync.Mutex
	mesh    *mesh.Mesh // nil while the node runs alone
	gossip  *PubSub    // the mesh's gossipsub (meshMu; nil while the node runs alone)
	gater   *partitionGater
	netdoc  netDoc // heads.go
	heads   *syncer.Heads
	pins    *pins.Keeper // holdings, repair rounds, GC (pins_wiring.go)
	metrics *nodeMetrics // Prometheus counters (metrics.go)
	dashLn  net.Listener // the dashboard's, when Options.DashboardListen is set (dashboard.go)

	apiToken  string                // the bearer token guard requires; set by Run before serving
	inflight  sync.WaitGroup        // API requests being served
	metaErr   atomic.Pointer[error] // set once a metadata write failed fatally (guardMeta)
	closeOnce sync.Once
	closeErr  error
}

// New opens the home's stores and starts the node's host and bitswap. Close stops it.
func New(ctx context.Context, h home.Home, opts Options) (n *Node, err error) {
	key, err := h.Identity()
	if err != nil {
		return nil, err
	}
	cfg, opts, err := resolveOptions(h, opts)
	if err != nil {
		return nil, err
	}
	n = &Node{home: h, cfg: cfg, opts: opts, metrics: newNodeMetrics()}
	started := n // n is nil on the error returns below
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	if err := n.openStores(); err != nil {
		return nil, err
	}
	if err := n.startHost(key); err != nil {
		return nil, err
	}
	if err := n.openPinner(ctx); err != nil {
		return nil, err
	}
	n.startServers()
	if err := n.joinPeers(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// resolveOptions is the config the node runs with (opts.Config or HOME/config.yaml, with
// opts' replacements) and opts with its defaults filled in.
func resolveOptions(h home.Home, opts Options) (home.Config, Options, error) {
	var cfg home.Config
	if opts.Config != nil {
		cfg = *opts.Config
	} else {
		var err error
		if cfg, err = h.Config(); err != nil {
			return cfg, opts, err
		}
	}
	if opts.Listen != nil {
		cfg.Listen = opts.Listen
	}
	if opts.API != "" {
		cfg.API = opts.API
	}
	if opts.Blockstore != "" {
		cfg.Blockstore = opts.Blockstore
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = 2 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Warnf == nil {
		opts.Warnf = opts.Logf
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	return cfg, opts, nil
}

// openStores opens the block store, the metadata store and the verified store, in that
// order, and stacks the blockstore the node serves from.
func (n *Node) openStores() error {
	h, opts := n.home, n.opts
	var err error
	// The block store first: opening it cuts the unsynced tail a killed add or fetch left,
	// which on a full disk is the space the metadata store needs to open at all.
	if n.store, err = diskstore.Open(h, n.cfg.Blockstore); err != nil {
		return err
	}
	if err := n.openMeta(); err != nil {
		return err
	}
	trust := opts.Trust
	if trust == nil {
		if trust, err = loadHomeTrust(h); err != nil {
			return err
		}
	}
	vc := opts.VerifyCampaign
	if vc == nil {
		vc = n.verifyStoredCampaign
	}
	if n.vstore, err = vstore.Open(h.StoreDir(), vstore.Options{Trust: trust, VerifyCampaign: vc, AdmitCampaign: admitCampaign, AdmitAttestation: admitAttestation, Clock: opts.Clock.Now}); err != nil {
		return err
	}
	if err := n.importLocalRuns(); err != nil {
		return err
	}
	n.bstore = n.store
	if opts.WrapBlockstore != nil {
		n.bstore = opts.WrapBlockstore(n.bstore)
	}
	n.writes = &latchStore{Blockstore: n.bstore}
	n.bstore = n.writes
	n.gcl = blockstore.NewGCLocker()
	return nil
}

// openMeta opens the metadata store (pins and the rest) under HOME.
func (n *Node) openMeta() error {
	h := n.home
	// Pins and other metadata are small and must survive a crash once acknowledged, so
	// that store syncs every write.
	if err := n.guardMeta(func() error {
		var err error
		n.meta, err = pebbleds.NewDatastore(h.DatastoreDir(),
			pebbleds.WithPebbleWriteOptions(pebble.Sync),
			pebbleds.WithPebbleOpts(&pebble.Options{Logger: pebbleLogger{n.opts.Logf}}))
		return err
	}); err != nil {
		// Not on a failed write (a full disk): its advice mentions "blocks", and the
		// operator must free space, not look for a second daemon.
		if !errors.Is(err, ErrMetadataFailed) && strings.Contains(err.Error(), "lock") {
			return fmt.Errorf("datastore %s is locked: another evalmesh daemon uses home %s (stop it first): %w", h.DatastoreDir(), h.Dir, err)
		}
		return fmt.Errorf("open datastore %s: %w", h.DatastoreDir(), err)
	}
	return nil
}

// startHost starts the libp2p host behind the partition gater, and bitswap and the DAG
// services over it.
func (n *Node) startHost(key crypto.PrivKey) error {
	n.gater = &partitionGater{cut: map[peer.ID]bool{}}
	var err error
	if n.host, err = newHost(key, n.cfg.Listen, n.cfg.PrivateNetworkKey, libp2p.ConnectionGater(n.gater)); err != nil {
		return err
	}
	nctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	// No content routing: bitswap asks the peers we are connected to, nobody else.
	n.bswap = bitswap.New(nctx, bsnet.NewFromIpfsHost(n.host), nil, n.bstore)
	n.bserv = blockservice.New(n.bstore, n.bswap)
	n.dag = merkledag.NewDAGService(n.bserv)
	n.local = merkledag.NewDAGService(blockservice.New(n.bstore, offline.Exchange(n.bstore)))
	return nil
}

// openPinner opens the pin set kept in the metadata store.
func (n *Node) openPinner(ctx context.Context) error {
	if err := n.guardMeta(func() error {
		var err error
		p, err := dspinner.New(ctx, pinStore{n.meta}, pinDAG{n.local, n.bstore})
		if err != nil {
			return err
		}
		// Every change the node makes is followed by Flush (recordPin, unpin,
		// fetchLedgerObjects), which is what makes it durable (pinStore), so the pinner's own
		// flush after each change would only add synced writes.
		p.SetAutosync(false)
		n.pinner = p
		return nil
	}); err != nil {
		return fmt.Errorf("open pins in %s: %w", n.home.DatastoreDir(), err)
	}
	return nil
}

// startServers starts serving the node's own protocols: transfer, sync and holdings.
func (n *Node) startServers() {
	var xopts []xfer.ServerOption
	if n.opts.TestControls {
		n.pace = rate.NewLimiter(rate.Inf, xfer.MaxBlockSize)
		xopts = append(xopts, xfer.WithSendLimit(n.pace))
	}
	n.xsrv = xfer.NewServer(n.host, n.bstore, xopts...)
	so := n.opts.Sync
	so.OnSession = n.metrics.syncSession
	n.syncer = syncer.New(n.host, n.vstore, n.networkName(), so)
	n.heads = n.newHeads()
	n.pins = newPinKeeper(n)
	n.pins.Serve()
}

// joinPeers dials the config's bootstrap peers (those unreachable are re-dialled with
// backoff) and starts the re-dialler and, when the config asks, mDNS.
func (n *Node) joinPeers(ctx context.Context) error {
	opts, cfg := n.opts, n.cfg
	var err error
	if n.redial, err = newRedialer(n.host, n.home, syncer.Protocol(n.networkName()), opts.Redial, opts.Clock, opts.Logf, opts.Warnf); err != nil {
		return err
	}
	for _, a := range cfg.Bootstrap {
		pi, perr := n.parsePeerAddr(a)
		if perr != nil {
			opts.Warnf("net: config bootstrap: %v", perr)
			continue
		}
		if err := n.Connect(ctx, a); err != nil {
			opts.Warnf("net: bootstrap peer %s unreachable, re-dialling with backoff: %v", a, err)
			n.redial.addBootstrap(pi, err)
		} else {
			n.redial.learn(pi, true)
		}
	}
	n.redial.start()
	if cfg.MDNS {
		n.mdnsSvc = mdns.NewMdnsService(n.host, "_evalmesh-"+cfg.Network+"._udp", mdnsNotifee{n})
		if err := n.mdnsSvc.Start(); err != nil {
			return fmt.Errorf("start mDNS: %w", err)
		}
	}
	return nil
}

type mdnsNotifee struct{ n *Node }

func (m mdnsNotifee) HandlePeerFound(pi peer.AddrInfo) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // wall clock: bounds a dial
	defer cancel()
	if err := m.n.host.Connect(ctx, pi); err != nil {
		m.n.opts.Logf("mDNS peer %s: %v", pi.ID, err)
	}
}

// Close stops the node and closes its stores; everything acknowledged is on disk after.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	var errs []error
	// Before the host: its disconnects are not news to log or re-dial.
	if n.redial != nil {
		n.redial.close()
	}
	// The host first: closing it resets open streams, so transfer handlers blocked on a
	// slow reader return and the servers can stop.
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	if n.xsrv != nil {
		errs = append(errs, n.xsrv.Close())
	}
	if n.syncer != nil {
		n.syncer.Close()
	}
	if n.mdnsSvc != nil {
		errs = append(errs, n.mdnsSvc.Close())
	}
	if n.bswap != nil {
		errs = append(errs, n.bswap.Close())
	}
	if n.cancel != nil {
		n.cancel()
	}
	metaOK := n.metaFailed() == nil
	if n.pinner != nil && metaOK {
		errs = append(errs, n.guardMeta(func() error { return n.pinner.Flush(context.Background()) }))
	}
	if n.store != nil {
		if c, ok := n.store.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		} else {
			errs = append(errs, n.store.Sync())
		}
	}
	// A metadata store whose commit failed cannot be closed (its commit pipeline is stuck);
	// what it acknowledged is in its WAL, which the next start replays.
	if n.meta != nil && metaOK {
		errs = append(errs, n.meta.Close())
	}
	if n.vstore != nil {
		errs = append(errs, n.vstore.Close())
	}
	return errors.Join(errs...)
}

// Host returns the libp2p host (other packages add protocols to it: pubsub, sync).
func (n *Node) Host() host.Host { return n.host }

// Blockstore returns the blockstore the node stores into and serves from.
func (n *Node) Blockstore() blockstore.Blockstore { return n.bstore }

// DAG returns a DAG service that fetches missing blocks from connected peers.
func (n *Node) DAG() ipld.DAGService { return n.dag }

// LocalDAG returns a DAG service over local blocks only.
func (n *Node) LocalDAG() ipld.DAGService { return n.local }

// Config returns the config the node runs with (after Options overrides).
func (n *Node) Config() home.Config { return n.cfg }

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Addrs returns the listening multiaddrs, each ending in /p2p/PEER_ID, sorted.
func (n *Node) Addrs() []string {
	var out []string
	for _, a := range n.host.Addrs() {
		out = append(out, a.String()+"/p2p/"+n.host.ID().String())
	}
	sort.Strings(out)
	return out
}

// Connect dials a peer given as a multiaddr ending in /p2p/PEER_ID. Once connected the
// peer is a known peer: re-dialled whenever the connection drops, also after a restart.
func (n *Node) Connect(ctx context.Context, addr string) error {
	pi, err := n.parsePeerAddr(addr)
	if err != nil {
		return err
	}
	if err := n.host.Connect(ctx, pi); err != nil {
		return fmt.Errorf("connect %s: %w", addr, err)
	}
	// Keep it: bundle transfers can be long and the connection manager should not trim it.
	n.host.ConnManager().Protect(pi.ID, "evalmesh-connect")
	if n.redial != nil {
		n.redial.learn(pi, false)
	}
	return nil
}

// parsePeerAddr parses a multiaddr ending in /p2p/PEER_ID of another node.
func (n *Node) parsePeerAddr(addr string) (peer.AddrInfo, error) {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("address %q is not a multiaddr: %w (example: /ip4/127.0.0.1/tcp/4201/p2p/12D3Koo...)", addr, err)
	}
	pi, err := peer.AddrInfoFromP2pAddr(m)
	if err != nil {
		return peer.AddrInfo{}, fmt.Errorf("address %q has no /p2p/PEER_ID part: %w (get it from `evalmesh id` on that node)", addr, err)
	}
	if pi.ID == n.host.ID() {
		return peer.AddrInfo{}, fmt.Errorf("address %q is this node itself", addr)
	}
	return *pi, nil
}

// Peers lists connected peers, sorted by ID.
func (n *Node) Peers() []PeerInfo {
	var out []PeerInfo
	ages, staleAfter := n.heads.Ages()
	for _, p := range n.host.Network().Peers() {
		conns := n.host.Network().ConnsToPeer(p)
		info := PeerInfo{ID: p.String()}
		if age, ok := ages[p.String()]; ok {
			s := max(age.Seconds(), 0)
			info.HeadAgeSeconds, info.HeadStale = &s, age > staleAfter
		}
		for _, c := range conns {
			if c.Stat().Direction == network.DirOutbound || info.Addr == "" {
				info.Addr = c.RemoteMultiaddr().String()
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// KnownPeers lists the peers this node re-dials (connected or not), sorted by ID.
func (n *Node) KnownPeers() []KnownPeer { return n.redial.known() }

// Pins lists the recursive pins, sorted by CID.
func (n *Node) Pins(ctx context.Context) ([]PinInfo, error) {
	var out []PinInfo
	err := n.guardMeta(func() error {
		for sp := range n.pinner.RecursiveKeys(ctx, true) {
			if sp.Err != nil {
				return sp.Err
			}
			out = append(out, PinInfo{CID: sp.Pin.Key.String(), Name: sp.Pin.Name})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CID < out[j].CID })
	return out, nil
}

// Pin fetches the whole DAG under root (from peers if needed) and pins it recursively.
func (n *Node) Pin(ctx context.Context, root cid.Cid, name string, progress func(done, total int64)) error {
	_, err := n.PinFetch(ctx, root, name, progress)
	return err
}

// PinFetch is Pin that also says what the fetch kept of an interrupted earlier one.
func (n *Node) PinFetch(ctx context.Context, root cid.Cid, name string, progress func(done, total int64)) (FetchReport, error) {
	defer n.gcl.PinLock(ctx).Unlock(ctx)
	rep, err := n.fetch(ctx, root, progress, n.opts.StallTimeout)
	if err != nil {
		return rep, err
	}
	return rep, n.pinLocal(ctx, root, name, true)
}

// pinLocal pins a DAG whose blocks are in the blockstore. Blocks are synced to disk first, so
// a pin on disk always points at blocks on disk.
//
// complete says the caller has just established that every block under root is stored: a
// Fetch that returned nil walked the whole DAG (each block verified and stored, or found
// locally by localComplete), and a Pack that returned nil stored every block it made. Then the
// pin is recorded without the pinner walking the DAG again (for 1 GiB that walk reads every
// dag-pb block and stats every leaf). Otherwise (a CAR import: its blocks come in any order and
// may not cover the DAG) the pinner checks that the DAG is complete and refuses it if not.
func (n *Node) pinLocal(ctx context.Context, root cid.Cid, name string, complete bool) error {
	if err := n.store.Sync(); err != nil {
		return err
	}
	return n.guardMeta(func() error { return n.recordPin(ctx, root, name, complete) })
}

func (n *Node) recordPin(ctx context.Context, root cid.Cid, name string, complete bool) error {
	if complete {
		if err := n.pinner.PinWithMode(ctx, root, pin.Recursive, name); err != nil {
			return fmt.Errorf("pin %s: %w", root, err)
		}
		return n.pinner.Flush(ctx)
	}
	nd, err := n.local.Get(ctx, root)
	if err != nil {
		return fmt.Errorf("pin %s: %w", root, err)
	}
	if err := n.pinner.Pin(ctx, nd, true, name); err != nil {
		return fmt.Errorf("pin %s: %w", root, err)
	}
	return n.pinner.Flush(ctx)
}

// Unpin removes the recursive pin on root. Blocks stay until garbage collection.
func (n *Node) Unpin(ctx context.Context, root cid.Cid) error {
	return n.guardMeta(func() error { return n.unpin(ctx, root) })
}

func (n *Node) unpin(ctx context.Context, root cid.Cid) error {
	if err := n.pinner.Unpin(ctx, root, true); err != nil {
		if errors.Is(err, pin.ErrNotPinned) {
			return fmt.Errorf("%s is not pinned (see `evalmesh pin ls`)", root)
		}
		return fmt.Errorf("unpin %s: %w", root, err)
	}
	return n.pinner.Flush(ctx)
}

// IsPinned reports whether root is pinned recursively.
func (n *Node) IsPinned(ctx context.Context, root cid.Cid) (ok bool, err error) {
	err = n.guardMeta(func() error {
		_, ok, err = n.pinner.IsPinnedWithType(ctx, root, pin.Recursive)
		return err
	})
	return ok, err
}

// latchStore remembers the last failed write. Bitswap only logs a failed store and keeps
// waiting, so Fetch asks here why blocks stopped arriving (a full disk, typically).
type latchStore struct {
	blockstore.Blockstore
	mu      sync.Mutex
	lastErr error
	seq     uint64
}

// GetPooled reads through the store's GetPooled when it has one (the pack store), so the
// xfer server can return the buffer (xfer.PooledGetter); otherwise it is Get.
func (s *latchStore) GetPooled(ctx context.Context, c cid.Cid) (blocks.Block, bool, error) {
	if pg, ok := s.Blockstore.(xfer.PooledGetter); ok {
		return pg.GetPooled(ctx, c)
	}
	blk, err := s.Blockstore.Get(ctx, c)
	return blk, false, err
}

func (s *latchStore) Put(ctx context.Context, b blocks.Block) error {
	return s.latch(s.Blockstore.Put(ctx, b))
}

func (s *latchStore) PutMany(ctx context.Context, bs []blocks.Block) error {
	return s.latch(s.Blockstore.PutMany(ctx, bs))
}

func (s *latchStore) latch(err error) error {
	if err != nil {
		s.mu.Lock()
		s.lastErr = err
		s.seq++
		s.mu.Unlock()
	}
	return err
}

// since returns the last write error after the failure count was mark, and the current count.
func (s *latchStore) since(mark uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq > mark {
		return s.seq, s.lastErr
	}
	return s.seq, nil
}

// pinDAG is what the pinner walks to check that a DAG is complete before pinning it. Raw
// leaves carry no links, so for them a presence check replaces reading the block: pinning a
// 1 GiB bundle then reads ~0.1% of it. Leaves were verified against their CIDs when stored.
type pinDAG struct {
	ipld.DAGService
	bs blockstore.Blockstore
}

func (d pinDAG) Get(ctx context.Context, c cid.Cid) (ipld.Node, error) {
	if c.Type() != cid.Raw {
		return d.DAGService.Get(ctx, c)
	}
	ok, err := d.bs.Has(ctx, c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ipld.ErrNotFound{Cid: c}
	}
	stub, _ := blocks.NewBlockWithCid(nil, c)
	return merkledag.DecodeRawBlock(stub)
}

// pinStore is the metadata store as the pinner writes it: each Put and Delete goes to
// pebble's write-ahead log unsynced, and the pinner's Sync (called by Flush, which follows
// every change the node makes) is one synced log record. Why: boxo's dspinner writes a pin as
// four records (the dirty mark, the pin, its CID index, its name index) plus a clean mark,
// and on the store's own pebble.Sync each was an fsync: ≈ 7 ms a pin on this project's
// machine, which set the pace of a repair round of many small objects (bench/repair.sh).
// Now a change costs three synced writes however many pins it makes: the dirty mark
// (dspinner syncs it itself), Flush's sync and its clean mark.
//
// Why nothing acknowledged is lost on a crash (kill -9 or power): the log is one ordered
// file and a synced record makes every record before it durable, so once Flush returns the
// pins it follows are on disk. A crash before that may lose a suffix of the unsynced records,
// never a record from the middle (recovery replays the log's longest valid prefix); the dirty
// mark is synced (dspinner's setDirty syncs it) before the first record of a change, so a
// store left holding part of a pin's records reopens dirty and dspinner.New rebuilds the
// indexes from the pin records. TestDaemonKilledAfterPins kills a daemon right after a run
// of acknowledged pins.
type pinStore struct{ *pebbleds.Datastore }

func (s pinStore) Put(_ context.Context, k datastore.Key, v []byte) error {
	if err := s.DB.Set(k.Bytes(), v, pebble.NoSync); err != nil {
		return fmt.Errorf("pebble error during set: %w", err)
	}
	return nil
}

func (s pinStore) Delete(_ context.Context, k datastore.Key) error {
	if err := s.DB.Delete(k.Bytes(), pebble.NoSync); err != nil {
		return fmt.Errorf("pebble error during delete: %w", err)
	}
	return nil
}

// pebbleLogger sends pebble's errors to the node's log. Its Fatalf panics with a metaFatal
// instead of exiting the process (the default logger's way): pebble calls it when a commit
// cannot be written (a full disk), and guardMeta turns it into an error for the request
// that caused it, so the daemon keeps answering and says what to do. Fatalf on one of
// pebble's own goroutines (flush, compaction) still ends the process; the block stores'
// free-space reserve (checkSpace) is what keeps the disk from getting that full.
type pebbleLogger struct{ logf func(string, ...any) }

func (pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.logf("datastore: "+format, args...)
}
func (pebbleLogger) Fatalf(format string, args ...any) {
	panic(metaFatal{fmt.Errorf(format, args...)})
}

type metaFatal struct{ err error }

// ErrDiskFull is wrapped by writes that failed for lack of space: a block store's
// (diskstore.ErrDiskFull itself) or the metadata store's.
var ErrDiskFull = diskstore.ErrDiskFull

// ErrMetadataFailed is wrapped once the metadata store could not write (a full disk).
var ErrMetadataFailed = errors.New("the metadata store failed")

// guardMeta runs f, which may call into the metadata store, and turns a fatal pebble error
// raised in it into an error. The store is unusable after one: every later guardMeta (and
// every API request, see guard) fails at once with the same error.
func (n *Node) guardMeta(f func() error) (err error) {
	if ferr := n.metaFailed(); ferr != nil {
		return ferr
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		mf, ok := r.(metaFatal)
		if !ok {
			panic(r)
		}
		err = fmt.Errorf("%w (%v): free space on the filesystem of %s, then restart the daemon; pins and blocks acknowledged before are intact", ErrMetadataFailed, mf.err, n.home.DatastoreDir())
		if errors.Is(mf.err, syscall.ENOSPC) || strings.Contains(mf.err.Error(), "no space left") {
			err = fmt.Errorf("%w: %w", ErrDiskFull, err)
		}
		n.metaErr.CompareAndSwap(nil, &err)
		n.opts.Warnf("%v", err) // the operator must act: WARN, not INFO
	}()
	return f()
}

// metaFailed returns the error that broke the metadata store, or nil.
func (n *Node) metaFailed() error {
	if p := n.metaErr.Load(); p != nil {
		return *p
	}
	return nil
}

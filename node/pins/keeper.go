// Package pins keeps what the network's pin factor asks of this node and what its ledger
// rests on: the holdings protocol (which of a list of objects a node holds, and its lab),
// repair rounds (who holds each ledger object, spot checks of other labs' claims, fetching
// and pinning what this node's lab must hold), pin status, the discounts of labs that failed
// a spot check, and garbage collection that never drops a block a pin or the ledger needs
// (with the staging of writes that end in a pin). It owns the last repair round's survey
// and the discounts; the blockstore, pinner, host, verified store and fetches it works over
// are the node's, handed in through Options. It does not import node and starts no host.
//
// Concurrency: every exported method of Keeper is safe for concurrent use. The survey and
// the discounts are under Keeper.mu, held only to read or replace them, never across I/O.
// Block writes that end in a pin hold the GC locker's PinLock from their first put to their
// pin (Staged, and a repair round across its fetches); whatever deletes blocks (GC, or a
// refused operation removing what it put) holds GCLock: kubo's rule, so GC never finds a
// sequence half done. A repair round runs on the caller's goroutine (or Start's, one at a
// time) and fetches up to repairFetches objects at once; spot checks run one goroutine per
// lab checked.
package pins

import (
	"context"
	"sync"
	"time"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	pin "github.com/ipfs/boxo/pinning/pinner"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/diskstore"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

// Options are what a Keeper works over: the node's stores, host and fetches. A daemon's
// keeper has every field but the switches set; staging and GC use only the stores, the
// pinner, GuardMeta, Home, Clock and the logs (so a test of them needs no host).
type Options struct {
	Home    home.Home // the certificate, the network document's path, the folders GC sweeps
	Network string    // the network's name, in the holdings protocol's ID
	Host    host.Host
	// Store is the block store on disk: Sync before a pin is recorded, and compaction when
	// it is a *diskstore.Pack. Blockstore is what the node stores into and reads (Store,
	// perhaps wrapped); GCLocker orders its writes against GC.
	Store        diskstore.Store
	Blockstore   blockstore.Blockstore
	GCLocker     blockstore.GCLocker
	Pinner       pin.Pinner
	BlockService blockservice.BlockService // bitswap's, for the roots of a round in one want list
	// Verified is the verified store whose campaigns and attestations name the ledger's
	// objects; nil names none.
	Verified   *vstore.Store
	NetworkDoc func() (*protocol.NetworkDoc, error) // nil document: not in a network
	// GuardMeta runs a call into the pinner's metadata store, turning its fatal error into
	// an error (the node's guard).
	GuardMeta func(func() error) error
	// Fetch makes the whole DAG under c local from connected peers, under the node's fetch
	// rules (stall timeout, max_bundle_size).
	Fetch func(ctx context.Context, c cid.Cid) error
	// FetchMany is one streaming transfer of roots from peers, of at most total bytes; what
	// did not come is the caller's to find.
	FetchMany func(ctx context.Context, roots []cid.Cid, peers []peer.ID, total int64)
	// XferPeers are the connected peers that speak the streaming protocol.
	XferPeers func(ctx context.Context) []peer.ID
	// MaxBundleSize is the config's max_bundle_size (0: no limit), read each round.
	MaxBundleSize func() int64
	// BitswapOnly fetches each object on its own (node.Options.BitswapOnly).
	BitswapOnly bool
	// ClaimHoldings answers "held" to every holdings request and fetches nothing: a
	// dishonest lab, for tests (node.Options.TestClaimHoldings).
	ClaimHoldings bool
	// SpotChecked counts one spot check's result (the node's metric).
	SpotChecked func(pass bool)
	Clock       clock.Clock
	Logf        func(format string, args ...any)
	Warnf       func(format string, args ...any) // what an operator must see
}

// Keeper is the node's pinning: see the package comment.
type Keeper struct {
	o  Options
	mu sync.Mutex
	// last is the last repair round's survey (nil before the first).
	last *api.PinSurvey
	// discounts are the labs whose holdings claims a failed spot check discounts.
	discounts protocol.HoldingsDiscounts
}

// New returns a Keeper over o. It serves nothing until Serve, and runs no round until
// Start or RepairPins.
func New(o Options) *Keeper { return &Keeper{o: o} }

// RepairInterval is how often a daemon in a network runs a repair round.
const RepairInterval = 5 * time.Second

package api

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
)

// Node is what the API serves: a node's identity and peers, its pins and bundles, its
// verified store. Package node implements it; every method may be called from many requests
// at once.
type Node interface {
	ID() peer.ID
	Addrs() []string
	Peers() []PeerInfo
	KnownPeers() []KnownPeer
	Connect(ctx context.Context, addr string) error

	Pins(ctx context.Context) ([]PinInfo, error)
	PinFetch(ctx context.Context, root cid.Cid, name string, progress func(done, total int64)) (FetchReport, error)
	Unpin(ctx context.Context, root cid.Cid) error
	PinStatus(ctx context.Context, c cid.Cid) (*PinStatusReport, error)
	// LastPinSurvey is the last repair round, or nil before the first.
	LastPinSurvey() *PinSurvey

	// Add packs the folder dir into a bundle and pins it; Get fetches root (timeout 0: the
	// node's default) and unpacks it into dir.
	Add(ctx context.Context, dir string, unchecked bool, progress func(done int64)) (cid.Cid, error)
	Get(ctx context.Context, root cid.Cid, dir string, timeout time.Duration, progress func(done, total int64), unpacking func()) (FetchReport, error)
	Has(ctx context.Context, c cid.Cid) (bool, error)
	ExportCAR(ctx context.Context, root cid.Cid, w io.Writer) error
	ImportCAR(ctx context.Context, r io.Reader) ([]cid.Cid, error)
	OpenFile(ctx context.Context, root cid.Cid) (r io.ReadSeekCloser, size int64, err error)
	GC(ctx context.Context, dryRun bool, progress func(phase string, done, total int64)) (GCReport, error)

	ImportPaths(paths []string) (ImportReport, error)
	// EachEnvelope calls f with every envelope of the set named set ("attestations" or
	// "campaigns"); ok is false when there is no such set.
	EachEnvelope(set string, f func(env []byte) error) (ok bool, err error)
	LedgerStatus() LedgerStatus

	// Mesh is the node's network part, or nil (the interface itself) while it runs alone.
	Mesh() Mesh
}

// Mesh is the network part of a node: campaigns, re-scores, the ledger.
type Mesh interface {
	PublishCampaign(env []byte) (string, error)
	Campaigns(ctx context.Context) ([]CampaignInfo, error)
	CampaignStatus(ctx context.Context, id string) (*CampaignReport, error)
	Rescore(ctx context.Context, runID string) (string, error)
	// Ledger is the last ledger computed, or nil before the first.
	Ledger() *MeshLedger
	// PublishClaim publishes msg on the claims topic as this node's, bypassing the claim
	// machine: only the test/claim route (TestControls) calls it.
	PublishClaim(ctx context.Context, msg protocol.ClaimMessage) error
}

// TestControls are the fault-test hooks of a daemon started with --test-controls.
type TestControls interface {
	Partition(peers []peer.ID)
	CutOff() []string
	Heal()
	SetPace(lim rate.Limit)
}

// Options are the settings of one API server.
type Options struct {
	// Token is the bearer token every request must carry; empty refuses every request.
	Token string
	// TokenPath is where the token is (HOME/api.token), named to a client that lacks it.
	TokenPath string
	// Config bounds request bodies (max_bundle_size for a CAR).
	Config home.Config
	// InFlight, when set, counts the requests being served, so that the caller closes the
	// node's stores only after the last returns.
	InFlight *sync.WaitGroup
	// Failed, when set, returns the error that broke the node's metadata store (nil while
	// it works): every request but id is then answered 503 with it.
	Failed func() error
	// PinRepairInterval is how often a daemon in a network runs a repair round (named in
	// pin/ledger's answer before the first).
	PinRepairInterval time.Duration
	// TestControls, when set, adds the test/ routes (--test-controls).
	TestControls TestControls
	// Now is the clock that spaces progress events (the node's; nil: the wall clock).
	Now func() time.Time
}

func (o Options) now() func() time.Time {
	if o.Now == nil {
		return time.Now // wall clock: the default where no clock is given
	}
	return o.Now
}

func (o Options) failed() error {
	if o.Failed == nil {
		return nil
	}
	return o.Failed()
}

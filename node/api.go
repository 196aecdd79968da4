package node

import (
	"context"
	"net/http"
	"time"

	"github.com/ipfs/go-cid"
	"golang.org/x/time/rate"

	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/pins"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// The HTTP API is package node/api: its routes, guard and answers. The node wires it here,
// serving it from an apiNode, and names its answer types as before (aliases).
type (
	IDInfo          = api.IDInfo
	Event           = api.Event
	PeerInfo        = api.PeerInfo
	PinInfo         = api.PinInfo
	KnownPeer       = api.KnownPeer
	FetchReport     = api.FetchReport
	GCReport        = api.GCReport
	LedgerStatus    = api.LedgerStatus
	MeshLedger      = api.MeshLedger
	AgentRefusal    = api.AgentRefusal
	PinStatusReport = api.PinStatusReport
	LabHolding      = api.LabHolding
	PinSurvey       = api.PinSurvey
	CampaignInfo    = api.CampaignInfo
	CampaignReport  = api.CampaignReport
	SlotReport      = api.SlotReport
	RunReport       = api.RunReport
	RescoreReport   = api.RescoreReport
	ImportRefusal   = api.ImportRefusal
	ImportReport    = api.ImportReport
)

// Handler returns the node's HTTP API.
func (n *Node) Handler() http.Handler {
	o := api.Options{Token: n.apiToken, TokenPath: n.home.APITokenPath(), Config: n.cfg,
		InFlight: &n.inflight, Failed: n.metaFailed, PinRepairInterval: pins.RepairInterval, Now: n.opts.Clock.Now}
	if n.opts.TestControls {
		o.TestControls = apiTestControls{n}
	}
	return api.Handler(apiNode{n}, o)
}

// apiNode is the node as the API sees it: the methods whose Go signatures differ from the
// API's, adapted.
type apiNode struct{ *Node }

func (a apiNode) Add(ctx context.Context, dir string, unchecked bool, progress func(int64)) (cid.Cid, error) {
	return a.Node.Add(ctx, dir, AddOptions{Unchecked: unchecked, Progress: progress})
}

func (a apiNode) Get(ctx context.Context, root cid.Cid, dir string, timeout time.Duration, progress func(done, total int64), unpacking func()) (FetchReport, error) {
	var rep FetchReport
	err := a.Node.Get(ctx, root, dir, GetOptions{Progress: progress, Unpacking: unpacking, Timeout: timeout,
		Fetched: func(r FetchReport) { rep = r }})
	return rep, err
}

func (a apiNode) Has(ctx context.Context, c cid.Cid) (bool, error) { return a.bstore.Has(ctx, c) }

func (a apiNode) GC(ctx context.Context, dryRun bool, progress func(string, int64, int64)) (GCReport, error) {
	return a.pins.GC(ctx, pins.GCOptions{DryRun: dryRun, Progress: progress})
}

func (a apiNode) PinStatus(ctx context.Context, c cid.Cid) (*PinStatusReport, error) {
	return a.pins.PinStatus(ctx, c)
}

func (a apiNode) LastPinSurvey() *PinSurvey { return a.pins.LastPinSurvey() }

func (a apiNode) EachEnvelope(name string, f func([]byte) error) (bool, error) {
	set := a.vstore.Set(vstore.SetName(name))
	if set == nil {
		return false, nil
	}
	return true, set.Each(func(_ recon.ID, env []byte) error { return f(env) })
}

// Mesh is nil itself (not a nil *mesh.Mesh in an interface) while the node runs alone.
func (a apiNode) Mesh() api.Mesh {
	if m := a.Node.Mesh(); m != nil {
		return m
	}
	return nil
}

type apiTestControls struct{ *Node }

func (t apiTestControls) SetPace(lim rate.Limit) { t.pace.SetLimit(lim) }

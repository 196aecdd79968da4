package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/evalmesh/evalmesh/node/dashboard"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// The dashboard (package node/dashboard) on its own listener, Options.DashboardListen: no
// token, GET only, none of the control API's endpoints (they live on another mux, behind
// guard, on another address), so a lab can expose it while the API stays private.

// DashboardAddr is the dashboard's host:port, or "" when it is off.
func (n *Node) DashboardAddr() string {
	if n.dashLn == nil {
		return ""
	}
	return n.dashLn.Addr().String()
}

// DashboardHandler returns the dashboard over this node (with /metrics).
func (n *Node) DashboardHandler() (http.Handler, error) {
	return dashboard.New(dashboard.Options{Source: dashboardSource{n}, Metrics: n.Metrics(), Now: n.opts.Clock.Now})
}

// startDashboard listens on addr and serves the dashboard until the returned stop is called.
func (n *Node) startDashboard(addr string) (stop func(), err error) {
	h, err := n.DashboardHandler()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard address %s: %w (set another with --dashboard-listen HOST:PORT; port 0 picks a free one)", addr, err)
	}
	n.dashLn = ln
	srv := dashboard.Server(h)
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // wall clock: the grace an HTTP shutdown gives open connections
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	}, nil
}

// dashboardSource is the node as the dashboard reads it.
type dashboardSource struct{ n *Node }

func (d dashboardSource) Snapshot(ctx context.Context) (*dashboard.Snapshot, error) {
	n := d.n
	st := n.LedgerStatus()
	s := &dashboard.Snapshot{Network: st.Network, NetworkDoc: st.NetworkDoc, PeerID: n.ID().String(), At: n.opts.Clock.Now().UTC(), Attestations: st.Attestations,
		Tasks: []dashboard.Task{}, Campaigns: []dashboard.Campaign{}, Runs: []dashboard.Run{}, Peers: []dashboard.Peer{},
		Evidence: dashboard.Evidence{Equivocations: []dashboard.Exclusion{}, Disputed: []dashboard.Exclusion{}, Refused: []dashboard.Refusal{}, Misconduct: []dashboard.Misconduct{}}}
	trust := n.vstore.Trust()
	labName := func(id string) string {
		if trust == nil {
			return ""
		}
		name, _ := trust.LabName(id)
		return name
	}
	for _, p := range st.Peers {
		s.Peers = append(s.Peers, dashboard.Peer{PeerID: p.PeerID, Lab: p.Lab, LabName: labName(p.Lab), LedgerRoot: p.LedgerRoot,
			Attestations: p.Attestations, Agrees: p.Agrees, Status: string(p.Status), LastHeard: p.LastHeard})
	}
	for _, set := range []*vstore.Set{n.vstore.Campaigns(), n.vstore.Attestations()} {
		refs, err := set.Refusals()
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			// r.From is left out: for an import it is a path on this machine.
			s.Evidence.Refused = append(s.Evidence.Refused, dashboard.Refusal{ID: r.ID, Set: string(set.Name()), Reason: r.Reason,
				Detail: r.Detail, Source: string(r.Source), Time: r.Time})
		}
	}
	if m := n.Mesh(); m != nil {
		s.Lab, s.LabName = m.Lab(), labName(m.Lab())
		if err := m.DashboardState(ctx, s); err != nil {
			return nil, err
		}
		for i := range s.Runs {
			if c, err := cid.Decode(s.Runs[i].LogCID); err == nil {
				s.Runs[i].LogsHere, _ = n.bstore.Has(ctx, c)
			}
			if c, err := cid.Decode(s.Runs[i].TranscriptCID); err == nil {
				s.Runs[i].TranscriptHere, _ = n.bstore.Has(ctx, c)
			}
		}
	}
	n.dashboardPins(s, labName)
	return s, nil
}

// dashboardPins fills in who holds each task's bundle and each run's objects from the last
// repair round (LastPinSurvey: what `pin status` decides, at most one round old, so a page
// view asks no peer). An object the round did not cover keeps Factor 0.
func (n *Node) dashboardPins(s *dashboard.Snapshot, labName func(string) string) {
	sv := n.pins.LastPinSurvey()
	if sv == nil {
		for i := range s.Tasks {
			s.Tasks[i].Pin = &dashboard.Pin{CID: s.Tasks[i].CID, What: "bundle", Holding: []string{}}
		}
		return
	}
	states := make(map[string]*protocol.PinState, len(sv.States))
	for i := range sv.States {
		states[sv.States[i].Object] = &sv.States[i]
	}
	fill := func(p *dashboard.Pin) {
		p.Holding = []string{}
		st := states[p.CID]
		if st == nil {
			return
		}
		p.Factor, p.Met = st.Factor, st.Met
		for _, l := range st.Holding {
			p.Holding = append(p.Holding, cmp.Or(labName(l), l))
		}
	}
	for i := range s.Tasks {
		s.Tasks[i].Pin = &dashboard.Pin{CID: s.Tasks[i].CID, What: "bundle"}
		fill(s.Tasks[i].Pin)
	}
	for i := range s.Runs {
		for j := range s.Runs[i].Pins {
			fill(&s.Runs[i].Pins[j])
		}
	}
}

// envelopeKey is the store key of an envelope ID (a CID of the envelope's sha256).
func envelopeKey(id string) (recon.ID, error) {
	var key recon.ID
	c, err := cid.Decode(id)
	if err != nil {
		return key, fmt.Errorf("%q is not an attestation ID: %w", id, dashboard.ErrNotFound)
	}
	dm, err := multihash.Decode(c.Hash())
	if err != nil || dm.Code != multihash.SHA2_256 || len(dm.Digest) != len(key) {
		return key, fmt.Errorf("%q is not an attestation ID: %w", id, dashboard.ErrNotFound)
	}
	copy(key[:], dm.Digest)
	return key, nil
}

func (d dashboardSource) Envelope(_ context.Context, id string) ([]byte, error) {
	key, err := envelopeKey(id)
	if err != nil {
		return nil, err
	}
	env, ok, err := d.n.vstore.Attestations().Get(key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, dashboard.ErrNotFound
	}
	return env, nil
}

func (d dashboardSource) Object(ctx context.Context, cs string, max int) ([]byte, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return nil, dashboard.ErrNotFound
	}
	size, err := d.n.bstore.GetSize(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("this node does not hold it: %w", dashboard.ErrNotFound)
	}
	if size > max {
		return nil, fmt.Errorf("%d bytes, over the dashboard's bound of %d: %w", size, max, errors.ErrUnsupported)
	}
	b, err := d.n.bstore.Get(ctx, c)
	if err != nil {
		return nil, dashboard.ErrNotFound
	}
	return b.RawData(), nil
}

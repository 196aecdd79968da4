package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Objects the ledger rests on (docs/protocol-sync.md §8). Which objects those are is
// protocol.LedgerObjects' decision, over the campaigns and attestations in the verified
// store; the node keeps what it holds of them through garbage collection (gc.go).

// LedgerObjects lists every object the stored campaigns and attestations name.
func (n *Node) LedgerObjects() []protocol.LedgerObject {
	if n.vstore == nil {
		return nil
	}
	collect := func(set *Set) [][]byte {
		var out [][]byte
		_ = set.Each(func(_ recon.ID, env []byte) error {
			out = append(out, env)
			return nil
		})
		return out
	}
	return protocol.LedgerObjects(collect(n.vstore.Campaigns()), collect(n.vstore.Attestations()))
}

// ledgerRoots are the CIDs of LedgerObjects that parse (a stored envelope names only
// verified ones, but a CID annotation is free text).
func (n *Node) ledgerRoots() []cid.Cid {
	objs := n.LedgerObjects()
	out := make([]cid.Cid, 0, len(objs))
	for _, o := range objs {
		if c, err := cid.Decode(o.CID); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// HoldingsProtocol is the stream protocol a node answers which of a list of objects it holds
// (docs/protocol-sync.md §8).
func HoldingsProtocol(network string) libp2pprotocol.ID {
	return libp2pprotocol.ID("/evalmesh/" + network + "/holdings/1.0.0")
}

// maxHoldingsCIDs bounds one holdings request; maxHoldingsBytes its encoded size.
const (
	maxHoldingsCIDs  = 1024
	maxHoldingsBytes = 128 << 10
)

// holdingsRequest asks which of CIDs the peer holds.
type holdingsRequest struct {
	CIDs []string `json:"cids"`
}

// holdingsResponse answers it: Holds[i] for CIDs[i], and the answering node's certificate,
// which says (with the stream's authenticated peer ID) which lab holds them.
type holdingsResponse struct {
	Cert  json.RawMessage `json:"cert,omitempty"`
	Holds []bool          `json:"holds"`
}

// decodeHoldingsRequest reads a peer's holdings request: JSON of at most maxHoldingsBytes
// naming at most maxHoldingsCIDs CIDs.
func decodeHoldingsRequest(r io.Reader) (holdingsRequest, error) {
	var req holdingsRequest
	if err := json.NewDecoder(io.LimitReader(r, maxHoldingsBytes)).Decode(&req); err != nil {
		return req, err
	}
	if len(req.CIDs) > maxHoldingsCIDs {
		return req, fmt.Errorf("%d CIDs in one holdings request, over %d", len(req.CIDs), maxHoldingsCIDs)
	}
	return req, nil
}

// decodeHoldingsResponse reads a peer's answer to a request of want CIDs: one bool each.
func decodeHoldingsResponse(r io.Reader, want int) (holdingsResponse, error) {
	var resp holdingsResponse
	// A certificate is at most an envelope; the bools take 6 bytes each at most.
	if err := json.NewDecoder(io.LimitReader(r, attest.MaxEnvelopeSize+6*maxHoldingsCIDs+1024)).Decode(&resp); err != nil {
		return resp, err
	}
	if len(resp.Holds) != want {
		return resp, fmt.Errorf("%d answers for %d CIDs", len(resp.Holds), want)
	}
	return resp, nil
}

func (n *Node) serveHoldings() {
	n.host.SetStreamHandler(HoldingsProtocol(n.networkName()), func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(30 * time.Second))
		req, err := decodeHoldingsRequest(s)
		if err != nil {
			_ = s.Reset()
			return
		}
		resp := holdingsResponse{Holds: make([]bool, len(req.CIDs))}
		if raw, err := os.ReadFile(n.home.CertPath()); err == nil {
			resp.Cert = raw
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i, cs := range req.CIDs {
			if c, err := cid.Decode(cs); err == nil {
				resp.Holds[i] = n.HoldsWhole(ctx, c)
			}
		}
		_ = json.NewEncoder(s).Encode(resp)
	})
}

// HoldsWhole reports whether every block of the DAG under c is in the local blockstore.
func (n *Node) HoldsWhole(ctx context.Context, c cid.Cid) bool {
	stack := []cid.Cid{c}
	seen := map[string]bool{}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[c.KeyString()] {
			continue
		}
		seen[c.KeyString()] = true
		if c.Type() == cid.Raw {
			if ok, err := n.bstore.Has(ctx, c); err != nil || !ok {
				return false
			}
			continue
		}
		b, err := n.bstore.Get(ctx, c)
		if err != nil {
			return false
		}
		links, err := blockLinks(b)
		if err != nil {
			return false
		}
		for _, l := range links {
			stack = append(stack, l.c)
		}
	}
	return true
}

// askHoldings asks peer p which of cids it holds, and which lab it is a node of (its
// certificate, checked now against trust, naming p); lab is "" when it shows none.
func (n *Node) askHoldings(ctx context.Context, p peer.ID, cids []string, trust *attest.TrustStore) (lab string, holds []bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := n.host.NewStream(ctx, p, HoldingsProtocol(n.networkName()))
	if err != nil {
		return "", nil, err
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := json.NewEncoder(s).Encode(holdingsRequest{CIDs: cids}); err != nil {
		return "", nil, err
	}
	_ = s.CloseWrite()
	resp, err := decodeHoldingsResponse(s, len(cids))
	if err != nil {
		return "", nil, fmt.Errorf("holdings of %s: %w", p, err)
	}
	if len(resp.Cert) > 0 && trust != nil {
		if c, err := trust.CheckNodeCert(resp.Cert, time.Now()); err == nil && c.Node == p.String() {
			lab = c.Lab
		}
	}
	return lab, resp.Holds, nil
}

// LabHolding is one lab's part in an object's pin status.
type LabHolding struct {
	Lab     string   `json:"lab"`
	Name    string   `json:"name"`
	Present bool     `json:"present"` // a node of the lab answered (or is this node)
	Holds   bool     `json:"holds"`
	Nodes   []string `json:"nodes"` // its nodes that hold the object
}

// PinStatusReport is `evalmesh pin status CID --json` (docs/cli-json.md).
type PinStatusReport struct {
	protocol.PinState
	Labs []LabHolding `json:"labs"`
}

// PinStatus asks this node and every connected peer whether they hold c, and says, under the
// network document's pin factor, which labs hold it, which must, and whether the factor is
// met (protocol.PinStatus decides).
func (n *Node) PinStatus(ctx context.Context, c cid.Cid) (*PinStatusReport, error) {
	now := time.Now()
	labs, names, trust, factor, self, err := n.networkLabs(now)
	if err != nil {
		return nil, err
	}
	by := map[string]*LabHolding{}
	for _, l := range labs {
		by[l] = &LabHolding{Lab: l, Name: names[l], Nodes: []string{}}
	}
	note := func(lab, node string, holds bool) {
		if h, ok := by[lab]; ok {
			h.Present = true
			if holds {
				h.Holds = true
				h.Nodes = append(h.Nodes, node)
			}
		}
	}
	if self != "" {
		note(self, n.ID().String(), n.HoldsWhole(ctx, c))
	}
	for _, p := range n.host.Network().Peers() {
		lab, holds, err := n.askHoldings(ctx, p, []string{c.String()}, trust)
		if err != nil || lab == "" {
			continue
		}
		note(lab, p.String(), holds[0])
	}
	st := protocol.PinStatus(c.String(), labs, factor,
		func(l string) bool { return by[l].Present }, func(l string) bool { return by[l].Holds })
	rep := &PinStatusReport{PinState: st}
	for _, l := range protocol.HolderOrder(c.String(), labs) {
		rep.Labs = append(rep.Labs, *by[l])
	}
	return rep, nil
}

type pinStatusReq struct {
	CID string `json:"cid"`
}

// pinRoutes adds pin/status to the API.
func (n *Node) pinRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+apiPrefix+"pin/status", func(w http.ResponseWriter, r *http.Request) {
		var req pinStatusReq
		if !readJSON(w, r, &req) {
			return
		}
		c, ok := parseCID(w, req.CID)
		if !ok {
			return
		}
		rep, err := n.PinStatus(r.Context(), c)
		if err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, rep)
	})
	mux.HandleFunc("POST "+apiPrefix+"pin/ledger", func(w http.ResponseWriter, r *http.Request) {
		sv := n.LastPinSurvey()
		if sv == nil {
			writeErr(w, http.StatusServiceUnavailable, fmt.Errorf("no repair round has run yet: a daemon in a network runs one every %s", pinRepairInterval))
			return
		}
		writeJSON(w, sv)
	})
}

// pinRepairInterval is how often a daemon in a network runs a repair round.
const pinRepairInterval = 5 * time.Second

// PinSurvey returns the daemon's last repair round.
func (c *Client) PinSurvey(ctx context.Context) (*PinSurvey, error) {
	var out PinSurvey
	return &out, c.call(ctx, "pin/ledger", struct{}{}, &out)
}

// PinStatus asks the daemon who holds c (Node.PinStatus).
func (c *Client) PinStatus(ctx context.Context, root cid.Cid) (*PinStatusReport, error) {
	var out PinStatusReport
	return &out, c.call(ctx, "pin/status", pinStatusReq{CID: root.String()}, &out)
}

// PinSurvey is one repair round: the pin state of every object the ledger rests on, as this
// node saw it, and what it fetched to restore the factor.
type PinSurvey struct {
	At          time.Time           `json:"at"`
	Factor      int                 `json:"factor"`
	Objects     int                 `json:"objects"`
	UnderFactor int                 `json:"under_factor"` // objects fewer than Factor present labs hold (before this round's fetches)
	Fetched     []string            `json:"fetched"`      // objects this node fetched and pinned in the round
	Failed      []string            `json:"failed"`       // "CID: error" for fetches that failed (retried next round)
	States      []protocol.PinState `json:"states"`
}

// pinsState is the node's last survey (pins.go).
type pinsState struct {
	mu   sync.Mutex
	last *PinSurvey
}

// LastPinSurvey is the last repair round's survey, nil before the first.
func (n *Node) LastPinSurvey() *PinSurvey {
	n.pins.mu.Lock()
	defer n.pins.mu.Unlock()
	return n.pins.last
}

// networkLabs are the document's active labs (IDs), its trust store and pin factor, and this
// node's own lab ("" without a certificate the document's labs vouch for).
func (n *Node) networkLabs(now time.Time) (labs []string, names map[string]string, trust *attest.TrustStore, factor int, self string, err error) {
	doc, err := n.NetworkDoc()
	if err != nil {
		return nil, nil, nil, 0, "", err
	}
	if doc == nil {
		return nil, nil, nil, 0, "", fmt.Errorf("no network document (%s): pins are counted over the labs of a network", n.home.NetworkDocPath())
	}
	if trust, err = doc.TrustStore(); err != nil {
		return nil, nil, nil, 0, "", err
	}
	names = map[string]string{}
	for _, l := range trustedLabIDs(trust) {
		if r, ok := trust.LabRetired(l); ok && !now.Before(r) {
			continue
		}
		labs = append(labs, l)
		names[l], _ = trust.LabName(l)
	}
	if raw, err := os.ReadFile(n.home.CertPath()); err == nil {
		if cert, err := trust.CheckNodeCert(raw, now); err == nil && cert.Node == n.ID().String() {
			self = cert.Lab
		}
	}
	return labs, names, trust, doc.PinFactor(), self, nil
}

// RepairPins runs one repair round: it asks every connected node which of the ledger's
// objects it holds (holdings protocol), decides with protocol.PinStatus who must hold each,
// and fetches and pins those this node's lab must hold and does not.
func (n *Node) RepairPins(ctx context.Context) (*PinSurvey, error) {
	now := time.Now()
	labs, _, trust, factor, self, err := n.networkLabs(now)
	if err != nil {
		return nil, err
	}
	objs := n.LedgerObjects()
	cids := make([]string, len(objs))
	for i, o := range objs {
		cids[i] = o.CID
	}
	present := map[string]bool{}
	holding := map[string]map[string]bool{}
	hold := func(lab, c string) {
		if holding[lab] == nil {
			holding[lab] = map[string]bool{}
		}
		holding[lab][c] = true
	}
	if self != "" {
		present[self] = true
		for _, c := range cids {
			if cc, err := cid.Decode(c); err == nil && n.HoldsWhole(ctx, cc) {
				hold(self, c)
			}
		}
	}
	for _, p := range n.host.Network().Peers() {
		for lo := 0; lo < len(cids); lo += maxHoldingsCIDs {
			chunk := cids[lo:min(lo+maxHoldingsCIDs, len(cids))]
			lab, holds, err := n.askHoldings(ctx, p, chunk, trust)
			if err != nil || lab == "" {
				break
			}
			present[lab] = true
			for i, h := range holds {
				if h {
					hold(lab, chunk[i])
				}
			}
		}
	}
	sv := &PinSurvey{At: now, Factor: factor, Objects: len(objs), Fetched: []string{}, Failed: []string{}, States: make([]protocol.PinState, 0, len(objs))}
	for _, o := range objs {
		st := protocol.PinStatus(o.CID, labs, factor, func(l string) bool { return present[l] }, func(l string) bool { return holding[l][o.CID] })
		sv.States = append(sv.States, st)
		if !st.Met {
			sv.UnderFactor++
		}
		if self == "" || !slices.Contains(st.Fetch, self) {
			continue
		}
		c, err := cid.Decode(o.CID)
		if err != nil {
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err = n.PinFetch(fctx, c, "ledger "+o.What, nil)
		cancel()
		if err != nil {
			sv.Failed = append(sv.Failed, o.CID+": "+err.Error())
			continue
		}
		sv.Fetched = append(sv.Fetched, o.CID)
	}
	n.pins.mu.Lock()
	n.pins.last = sv
	n.pins.mu.Unlock()
	return sv, nil
}

// startRepairPins runs repair rounds in the background (a daemon in a network); stop ends
// them and waits, before the node closes.
func (n *Node) startRepairPins(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.repairPins(ctx, pinRepairInterval)
	}()
	return func() { cancel(); <-done }
}

// repairPins runs RepairPins every interval until ctx ends.
func (n *Node) repairPins(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sv, err := n.RepairPins(ctx)
		switch {
		case err != nil:
			n.opts.Logf("pins: %v", err)
		case len(sv.Fetched) > 0 || len(sv.Failed) > 0:
			n.opts.Logf("pins: %d of %d ledger objects under factor %d; fetched and pinned %d, %d failed %v", sv.UnderFactor, sv.Objects, sv.Factor, len(sv.Fetched), len(sv.Failed), sv.Failed)
		}
	}
}

var (
	ledgerObjectsDesc = prometheus.NewDesc("evalmesh_ledger_objects", "Objects the stored campaigns and attestations name (bundles, submissions, logs, verdicts, agent images), at the last repair round.", nil, nil)
	underFactorDesc   = prometheus.NewDesc("evalmesh_ledger_objects_under_factor", "Of those, objects fewer labs hold than the network's pin factor, at the last repair round (before its fetches).", nil, nil)
)

// pinsCollector reads the last survey at scrape time.
type pinsCollector struct{ n *Node }

func (pinsCollector) Describe(chan<- *prometheus.Desc) {}

func (c pinsCollector) Collect(ch chan<- prometheus.Metric) {
	if sv := c.n.LastPinSurvey(); sv != nil {
		ch <- prometheus.MustNewConstMetric(ledgerObjectsDesc, prometheus.GaugeValue, float64(sv.Objects))
		ch <- prometheus.MustNewConstMetric(underFactorDesc, prometheus.GaugeValue, float64(sv.UnderFactor))
	}
}

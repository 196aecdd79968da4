package pins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/boxo/blockservice"
	pin "github.com/ipfs/boxo/pinning/pinner"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pprotocol "github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

// Objects the ledger rests on (docs/protocol-sync.md §8). Which objects those are is
// protocol.LedgerObjects' decision, over the campaigns and attestations in the verified
// store; the keeper keeps what the node holds of them through garbage collection (gc.go).

// LedgerObjects lists every object the stored campaigns and attestations name.
func (k *Keeper) LedgerObjects() []protocol.LedgerObject {
	if k.o.Verified == nil {
		return nil
	}
	collect := func(set *vstore.Set) [][]byte {
		var out [][]byte
		_ = set.Each(func(_ recon.ID, env []byte) error {
			out = append(out, env)
			return nil
		})
		return out
	}
	return protocol.LedgerObjects(collect(k.o.Verified.Campaigns()), collect(k.o.Verified.Attestations()))
}

// ledgerRoots are the CIDs of LedgerObjects that parse (a stored envelope names only
// verified ones, but a CID annotation is free text).
func (k *Keeper) ledgerRoots() []cid.Cid {
	objs := k.LedgerObjects()
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

// Serve answers the holdings protocol on the host until it closes.
func (k *Keeper) Serve() {
	k.o.Host.SetStreamHandler(HoldingsProtocol(k.o.Network), func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(30 * time.Second)) // wall clock: a stream deadline the kernel enforces
		req, err := decodeHoldingsRequest(s)
		if err != nil {
			_ = s.Reset()
			return
		}
		resp := holdingsResponse{Holds: make([]bool, len(req.CIDs))}
		if raw, err := os.ReadFile(k.o.Home.CertPath()); err == nil {
			resp.Cert = raw
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // wall clock: answers a peer's stream, within its stream deadline above
		defer cancel()
		for i, cs := range req.CIDs {
			if c, err := cid.Decode(cs); err == nil {
				resp.Holds[i] = k.o.ClaimHoldings || k.HoldsWhole(ctx, c)
			}
		}
		_ = json.NewEncoder(s).Encode(resp)
	})
}

// HoldsWhole reports whether every block of the DAG under c is in the local blockstore.
func (k *Keeper) HoldsWhole(ctx context.Context, c cid.Cid) bool {
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
			if ok, err := k.o.Blockstore.Has(ctx, c); err != nil || !ok {
				return false
			}
			continue
		}
		b, err := k.o.Blockstore.Get(ctx, c)
		if err != nil {
			return false
		}
		links, err := Links(b)
		if err != nil {
			return false
		}
		for _, l := range links {
			stack = append(stack, l.Cid)
		}
	}
	return true
}

// askHoldings asks peer p which of cids it holds, and which lab it is a node of (its
// certificate, checked now against trust, naming p); lab is "" when it shows none.
func (k *Keeper) askHoldings(ctx context.Context, p peer.ID, cids []string, trust *attest.TrustStore) (lab string, holds []bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // wall clock: bounds a stream open and one round trip to a peer
	defer cancel()
	s, err := k.o.Host.NewStream(ctx, p, HoldingsProtocol(k.o.Network))
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
		if c, err := trust.CheckNodeCert(resp.Cert, k.o.Clock.Now()); err == nil && c.Node == p.String() {
			lab = c.Lab
		}
	}
	return lab, resp.Holds, nil
}

// PinStatus asks this node and every connected peer whether they hold c, and says, under the
// network document's pin factor, which labs hold it, which must, and whether the factor is
// met (protocol.PinStatus decides; for a sealed bundle over the labs granted its key).
func (k *Keeper) PinStatus(ctx context.Context, c cid.Cid) (*api.PinStatusReport, error) {
	now := k.o.Clock.Now()
	labs, names, trust, factor, self, err := k.networkLabs(now)
	if err != nil {
		return nil, err
	}
	by := map[string]*api.LabHolding{}
	for _, l := range labs {
		by[l] = &api.LabHolding{Lab: l, Name: names[l], Nodes: []string{}}
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
		note(self, k.o.Host.ID().String(), k.HoldsWhole(ctx, c))
	}
	for _, p := range k.o.Host.Network().Peers() {
		lab, holds, err := k.askHoldings(ctx, p, []string{c.String()}, trust)
		if err != nil || lab == "" {
			continue
		}
		note(lab, p.String(), holds[0])
	}
	obj := protocol.LedgerObject{CID: c.String(), KeyLabs: k.keyLabs()[c.String()]}
	counting, f := obj.Counting(labs, factor)
	// A lab that failed a spot check of this node's repair rounds counts for nothing here
	// while it is discounted, as in RepairPins.
	discounted := k.Discounts()
	counts := func(l string) bool { _, d := discounted[l]; return by[l].Present && !d }
	st := protocol.PinStatus(c.String(), counting, f, counts, func(l string) bool { return by[l].Holds })
	rep := &api.PinStatusReport{PinState: st, KeyLabs: obj.KeyLabs}
	for _, l := range protocol.HolderOrder(c.String(), labs) {
		h := *by[l]
		h.Counts = counts(l) && slices.Contains(counting, l)
		if until, ok := discounted[l]; ok {
			h.DiscountedUntil = &until
		}
		rep.Labs = append(rep.Labs, h)
	}
	return rep, nil
}

// keyLabs are the labs granted each sealed bundle's key by the stored grants
// (protocol.KeyLabs).
func (k *Keeper) keyLabs() map[string][]string {
	if k.o.Verified == nil {
		return nil
	}
	var envs [][]byte
	_ = k.o.Verified.Attestations().Each(func(_ recon.ID, env []byte) error {
		envs = append(envs, env)
		return nil
	})
	return protocol.KeyLabs(envs)
}

// LastPinSurvey is the last repair round's survey, nil before the first.
func (k *Keeper) LastPinSurvey() *api.PinSurvey {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.last
}

// networkLabs are the document's active labs (IDs), its trust store and pin factor, and this
// node's own lab ("" without a certificate the document's labs vouch for).
func (k *Keeper) networkLabs(now time.Time) (labs []string, names map[string]string, trust *attest.TrustStore, factor int, self string, err error) {
	doc, err := k.o.NetworkDoc()
	if err != nil {
		return nil, nil, nil, 0, "", err
	}
	if doc == nil {
		return nil, nil, nil, 0, "", fmt.Errorf("no network document (%s): pins are counted over the labs of a network", k.o.Home.NetworkDocPath())
	}
	if trust, err = doc.TrustStore(); err != nil {
		return nil, nil, nil, 0, "", err
	}
	names = map[string]string{}
	for _, l := range trust.LabIDs() {
		if r, ok := trust.LabRetired(l); ok && !now.Before(r) {
			continue
		}
		labs = append(labs, l)
		names[l], _ = trust.LabName(l)
	}
	if raw, err := os.ReadFile(k.o.Home.CertPath()); err == nil {
		if cert, err := trust.CheckNodeCert(raw, now); err == nil && cert.Node == k.o.Host.ID().String() {
			self = cert.Lab
		}
	}
	return labs, names, trust, doc.PinFactor(), self, nil
}

// RepairPins runs one repair round: it asks every connected node which of the ledger's
// objects it holds (holdings protocol), spot-checks a few claims of each other lab
// (spotCheckHoldings) and counts no claim of a lab discounted for a failed check, decides
// with protocol.PinStatus who must hold each (over the labs whose holding counts: for a
// sealed bundle, those granted its key), and fetches and pins those this node's lab must
// hold and does not.
func (k *Keeper) RepairPins(ctx context.Context) (*api.PinSurvey, error) {
	now := k.o.Clock.Now()
	labs, names, trust, factor, self, err := k.networkLabs(now)
	if err != nil {
		return nil, err
	}
	objs := k.LedgerObjects()
	cids := make([]string, len(objs))
	for i, o := range objs {
		cids[i] = o.CID
	}
	present := map[string]bool{}
	holding := map[string]map[string]bool{}
	holders := map[string][]peer.ID{}           // by CID: the nodes that answered they hold it
	claims := map[string]map[string][]peer.ID{} // by lab, by CID: the same, for spot checks
	hold := func(lab, c string) {
		if holding[lab] == nil {
			holding[lab] = map[string]bool{}
		}
		holding[lab][c] = true
	}
	if self != "" {
		present[self] = true
		for _, c := range cids {
			if cc, err := cid.Decode(c); err == nil && k.HoldsWhole(ctx, cc) {
				hold(self, c)
			}
		}
	}
	for _, p := range k.o.Host.Network().Peers() {
		for lo := 0; lo < len(cids); lo += maxHoldingsCIDs {
			chunk := cids[lo:min(lo+maxHoldingsCIDs, len(cids))]
			lab, holds, err := k.askHoldings(ctx, p, chunk, trust)
			if err != nil || lab == "" {
				break
			}
			present[lab] = true
			for i, h := range holds {
				if h {
					hold(lab, chunk[i])
					holders[chunk[i]] = append(holders[chunk[i]], p)
					if claims[lab] == nil {
						claims[lab] = map[string][]peer.ID{}
					}
					claims[lab][chunk[i]] = append(claims[lab][chunk[i]], p)
				}
			}
		}
	}
	// A discounted lab is present but neither holds nor is assigned anything here, and its
	// nodes are not asked for what is fetched: the labs that keep their copies restore the
	// factor around it.
	discounted := k.spotCheckHoldings(ctx, claims, self, names)
	for lab := range discounted {
		delete(holding, lab)
		for c, ps := range claims[lab] {
			holders[c] = slices.DeleteFunc(holders[c], func(p peer.ID) bool { return slices.Contains(ps, p) })
		}
	}
	sv := &api.PinSurvey{At: now, Factor: factor, Objects: len(objs), Fetched: []string{}, Failed: []string{}, States: make([]protocol.PinState, 0, len(objs))}
	var fetch []protocol.LedgerObject
	for _, o := range objs {
		counting, f := o.Counting(labs, factor)
		eligible := func(l string) bool { _, d := discounted[l]; return present[l] && !d }
		st := protocol.PinStatus(o.CID, counting, f, eligible, func(l string) bool { return holding[l][o.CID] })
		sv.States = append(sv.States, st)
		if !st.Met {
			sv.UnderFactor++
		}
		if self == "" || !slices.Contains(st.Fetch, self) || k.o.ClaimHoldings {
			continue
		}
		// Fetch only what a node that answered holds (a lab that does not count may hold
		// it): with no holder present a fetch could only wait out its timeout, and would
		// hold up the round (and the next) for as long.
		if !heldByAny(holding, o.CID) {
			sv.Failed = append(sv.Failed, o.CID+": no connected node holds it")
			continue
		}
		fetch = append(fetch, o)
	}
	// The decision is published before the fetches, which may take minutes (the dashboard
	// and /metrics read it), and again with what they did.
	k.mu.Lock()
	before := *sv
	before.Failed = slices.Clone(sv.Failed) // sv's is sorted below, while readers may hold before
	k.last = &before
	k.mu.Unlock()
	fetched, failed := k.fetchLedgerObjects(ctx, fetch, holders)
	sv.Fetched, sv.Failed = fetched, append(sv.Failed, failed...)
	slices.Sort(sv.Failed)
	k.mu.Lock()
	k.last = sv
	k.mu.Unlock()
	return sv, nil
}

// heldByAny reports whether a lab that answered (counting or not) holds c.
func heldByAny(holding map[string]map[string]bool, c string) bool {
	for _, held := range holding {
		if held[c] {
			return true
		}
	}
	return false
}

// repairFetches is how many objects a repair round fetches at once when it fetches them one
// by one (those FetchTogether left).
const repairFetches = 8

// fetchLedgerObjects fetches objs — their roots in one want list (prefetchRoots), then
// together in one transfer (FetchTogether), then each one left on its own, repairFetches at
// a time — and pins those that arrived with one sync of the blockstore and one flush of the
// pinner, and returns the CIDs it pinned and "CID: error" for those it could not, each
// sorted. Why not PinFetch each: per object it pays a root block over bitswap, a transfer
// and a blockstore sync and pinner flush, and those, not the bytes, set the pace of a round
// of many small objects (docs/operating.md, "Repair", has the figures before and after). The
// pin lock is held across the round, as PinFetch holds it across its fetch, so garbage
// collection cannot drop what arrived before it is pinned.
func (k *Keeper) fetchLedgerObjects(ctx context.Context, objs []protocol.LedgerObject, holders map[string][]peer.ID) (fetched, failed []string) {
	fetched, failed = []string{}, []string{}
	if len(objs) == 0 {
		return fetched, failed
	}
	defer k.o.GCLocker.PinLock(ctx).Unlock(ctx)
	k.PrefetchRoots(ctx, objs)
	got, rest := k.FetchTogether(ctx, objs, holders)
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, repairFetches)
	for _, o := range rest {
		c, err := cid.Decode(o.CID)
		if err != nil {
			continue
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			fctx, cancel := clock.WithTimeout(ctx, k.o.Clock, 2*time.Minute)
			err := k.o.Fetch(fctx, c)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, o.CID+": "+err.Error())
				return
			}
			got = append(got, o)
		}()
	}
	wg.Wait()
	slices.Sort(failed)
	if len(got) == 0 {
		return fetched, failed
	}
	// As pinLocal: blocks on disk before the pins that point at them.
	if err := k.o.Store.Sync(); err != nil {
		for _, o := range got {
			failed = append(failed, o.CID+": "+err.Error())
		}
		slices.Sort(failed)
		return fetched, failed
	}
	err := k.o.GuardMeta(func() error {
		for _, o := range got {
			c, _ := cid.Decode(o.CID)
			if err := k.o.Pinner.PinWithMode(ctx, c, pin.Recursive, "ledger "+o.What); err != nil {
				return fmt.Errorf("pin %s: %w", c, err)
			}
		}
		return k.o.Pinner.Flush(ctx)
	})
	for _, o := range got {
		if err != nil {
			failed = append(failed, o.CID+": "+err.Error())
		} else {
			fetched = append(fetched, o.CID)
		}
	}
	slices.Sort(fetched)
	slices.Sort(failed)
	return fetched, failed
}

// FetchTogether fetches, in one streaming transfer (Options.FetchMany) per set of
// holders, every object of objs whose root block is here and declares no more than
// max_bundle_size, from the nodes that said they hold it (holders, by CID), and returns
// those held whole after it (got) and the others (rest), which the caller fetches one by
// one: a fetch of its own says why an object did not come (a stall naming the peers asked, a
// declared size too large) and falls back to bitswap. Why together: one object at a time, a
// round of many small objects paid a stream and a round trip per object, which for objects
// of one or two blocks cost more than their bytes (bench/repair.sh, docs/operating.md). Why
// per set of holders: the transfer drops a peer that lacks a block it is asked for, so
// objects held by different nodes (as rendezvous order spreads them) asked of every node
// would drop them one by one and leave the rest to the slow path. A transfer may bring no
// more than the sum of the sizes its roots declare, so a DAG that lies about its size cannot
// make a round download without bound, as Fetch's own check prevents for one.
func (k *Keeper) FetchTogether(ctx context.Context, objs []protocol.LedgerObject, holders map[string][]peer.ID) (got, rest []protocol.LedgerObject) {
	xpeers := k.o.XferPeers(ctx)
	type group struct {
		peers []peer.ID
		objs  []protocol.LedgerObject
		roots []cid.Cid
		total int64
	}
	groups := map[string]*group{}
	var keys []string
	batched := 0
	for _, o := range objs {
		c, err := cid.Decode(o.CID)
		if err != nil {
			continue
		}
		blk, err := k.o.Blockstore.Get(ctx, c)
		if err != nil {
			rest = append(rest, o)
			continue
		}
		size, err := DeclaredSize(blk)
		if limit := k.o.MaxBundleSize(); err != nil || (limit > 0 && size > limit) {
			rest = append(rest, o)
			continue
		}
		var from []peer.ID
		for _, p := range xpeers {
			if slices.Contains(holders[o.CID], p) {
				from = append(from, p)
			}
		}
		if len(from) == 0 {
			rest = append(rest, o)
			continue
		}
		slices.Sort(from)
		key := fmt.Sprint(from)
		g := groups[key]
		if g == nil {
			g = &group{peers: from}
			groups[key] = g
			keys = append(keys, key)
		}
		g.objs, g.roots, g.total = append(g.objs, o), append(g.roots, c), g.total+size
		batched++
	}
	for _, key := range keys {
		g := groups[key]
		if batched < 2 || k.o.BitswapOnly {
			rest = append(rest, g.objs...) // one object: a fetch of its own is the same transfer
			continue
		}
		k.o.FetchMany(ctx, g.roots, g.peers, g.total)
		for i, o := range g.objs {
			if k.HoldsWhole(ctx, g.roots[i]) {
				got = append(got, o)
			} else {
				rest = append(rest, o)
			}
		}
	}
	return got, rest
}

// PrefetchRoots asks bitswap for the root block of every object of a round in one want list,
// so that each fetch after it finds its root here. Why: a fetch asks for its root alone (it
// must read the declared size before asking for the rest), one bitswap round trip each,
// ≈ 12 ms on this project's machine, which for objects of one or two blocks was most of a
// round's time (bench/repair.sh). A root that does not come is left to its object's fetch,
// which says why (a stall naming the peers asked), so this stops, reporting nothing, once no
// root arrived for prefetchIdle: a holder that claims an object it cannot send (docs/design.md
// §9) holds the round up that long, not for the stall timeout.
func (k *Keeper) PrefetchRoots(ctx context.Context, objs []protocol.LedgerObject) {
	roots := make([]cid.Cid, 0, len(objs))
	for _, o := range objs {
		if c, err := cid.Decode(o.CID); err == nil {
			roots = append(roots, c)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	idle := k.o.Clock.AfterFunc(prefetchIdle, cancel)
	defer idle.Stop()
	for range blockservice.NewSession(ctx, k.o.BlockService).GetBlocks(ctx, roots) {
		idle.Reset(prefetchIdle)
	}
}

// prefetchIdle ends PrefetchRoots when no root arrived for this long.
const prefetchIdle = 3 * time.Second

// Start runs repair rounds in the background (a daemon in a network); stop ends them and
// waits, before the node closes.
func (k *Keeper) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.repairPins(ctx, RepairInterval)
	}()
	return func() { cancel(); <-done }
}

// repairPins runs RepairPins every interval until ctx ends.
func (k *Keeper) repairPins(ctx context.Context, interval time.Duration) {
	t := k.o.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		sv, err := k.RepairPins(ctx)
		switch {
		case err != nil:
			k.o.Logf("pins: %v", err)
		case len(sv.Fetched) > 0 || len(sv.Failed) > 0:
			k.o.Logf("pins: %d of %d ledger objects under factor %d; fetched and pinned %d, %d failed %v", sv.UnderFactor, sv.Objects, sv.Factor, len(sv.Fetched), len(sv.Failed), sv.Failed)
		}
	}
}

var (
	ledgerObjectsDesc = prometheus.NewDesc("evalmesh_ledger_objects", "Objects the stored campaigns and attestations name (bundles, submissions, logs, verdicts, agent images), at the last repair round.", nil, nil)
	underFactorDesc   = prometheus.NewDesc("evalmesh_ledger_objects_under_factor", "Of those, objects fewer labs hold than the network's pin factor, at the last repair round (before its fetches).", nil, nil)
)

// Collector is the last survey's metrics, read at scrape time.
func (k *Keeper) Collector() prometheus.Collector { return pinsCollector{k} }

type pinsCollector struct{ k *Keeper }

func (pinsCollector) Describe(chan<- *prometheus.Desc) {}

func (c pinsCollector) Collect(ch chan<- prometheus.Metric) {
	if sv := c.k.LastPinSurvey(); sv != nil {
		ch <- prometheus.MustNewConstMetric(ledgerObjectsDesc, prometheus.GaugeValue, float64(sv.Objects))
		ch <- prometheus.MustNewConstMetric(underFactorDesc, prometheus.GaugeValue, float64(sv.UnderFactor))
	}
}

// Package verify owns `evalmesh verify-ledger`: the outsider's re-verification of a
// network's ledger from the network alone. Over a node that publishes nothing and claims
// nothing (Node, which package node starts for it), it syncs the campaign and attestation
// sets with the labs' nodes, fetches every campaign's bundles, recomputes the ledger under
// the network document's policy, re-scores every counted run with the daemons' own code and
// compares the root with the roots the labs' nodes announce.
//
// Concurrency: Ledger runs on its caller's goroutine and calls the Node from it alone; the
// Node's own goroutines (its sync server, its heads validator) are its business.
package verify

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/scoring"
)

// Options are what `evalmesh verify-ledger` re-verifies a network's ledger with.
type Options struct {
	// Doc is the network's document: its labs, acceptance policy and scoring options, as its
	// daemons apply them.
	Doc *protocol.NetworkDoc
	// Bootstrap are the multiaddrs (with /p2p/ID) of the labs' nodes to ask; at least one.
	Bootstrap []string
	// Listen replaces the home's listen addresses (default: 127.0.0.1, a free TCP port).
	Listen []string
	// Runner re-scores the counted runs with the daemons' own code (Runner.RescoreSubmission).
	// It signs each re-score with this home's key, but nothing it signs is stored or sent:
	// only the score is compared.
	Runner *runner.Runner
	// HeadsWait is how long to wait for every connected lab node's head (default 15 s: three
	// of the daemons' 5 s head intervals).
	HeadsWait time.Duration
	// FetchTimeout bounds each bundle or submission fetch with no block arriving (default 30 s).
	FetchTimeout time.Duration
	// Progress, when set, is told each phase's progress: "sync", "bundles", "re-score", "heads".
	Progress func(phase string, done, total int)
	// Logf receives the node's log lines (default: discard).
	Logf func(format string, args ...any)
	// Clock decides which campaigns are still open, how long heads are waited for and
	// when a head is stale (default the wall clock); Seconds is measured on the wall clock.
	Clock clock.Clock
}

// Report is what verify-ledger found (`evalmesh verify-ledger --json`, docs/cli-json.md).
type Report struct {
	Network      string `json:"network"`
	NetworkDoc   string `json:"network_doc"`
	LedgerRoot   string `json:"ledger_root"` // the root recomputed here
	Attestations int    `json:"attestations"`
	Campaigns    int    `json:"campaigns"`
	Counted      int    `json:"counted"`
	// Rescored are the counted runs re-scored here; Confirmed those whose score this node
	// got too (within the metric's tolerance).
	Rescored  int `json:"rescored"`
	Confirmed int `json:"confirmed"`
	// Disagreements are the counted runs whose re-score here differs from their attested score.
	Disagreements []RescoreDisagreement `json:"disagreements"`
	// NotRescored are the counted runs this node could not re-score, with why.
	NotRescored []NotRescored `json:"not_rescored"`
	// NotCounted are the tasks (bundle CIDs) of campaigns this node could not fetch: the
	// ledger here has none of their runs, so its root cannot match.
	MissingBundles []MissingBundle `json:"missing_bundles"`
	// Announced are the roots the labs' nodes announce in their heads, each beside ours.
	Announced []AnnouncedRoot `json:"announced"`
	// RootsAgree: at least one lab node announced a root and every announced root is ours.
	RootsAgree bool `json:"roots_agree"`
	// OK: the roots agree and no re-score disagrees.
	OK      bool                 `json:"ok"`
	Seconds float64              `json:"seconds"`
	Report  *attest.LedgerReport `json:"report"`
	Ledger  *scoring.Ledger      `json:"-"`
}

// RescoreDisagreement is one counted run whose score this node did not reproduce.
type RescoreDisagreement struct {
	Attestation string   `json:"attestation_id"`
	Lab         string   `json:"lab"`
	Task        string   `json:"task"`
	Agent       string   `json:"agent"`
	Seed        int      `json:"seed"`
	Metric      string   `json:"metric"`
	Attested    *float64 `json:"attested_score"`
	AttestValid bool     `json:"attested_valid"`
	Rescored    *float64 `json:"rescored_score"`
	RescoreOK   bool     `json:"rescored_valid"`
}

// NotRescored is a counted run this node could not re-score.
type NotRescored struct {
	Attestation string `json:"attestation_id"`
	Lab         string `json:"lab"`
	Task        string `json:"task"`
	Reason      string `json:"reason"`
}

// MissingBundle is a campaign's task bundle no peer served.
type MissingBundle struct {
	Task   string `json:"task"`
	Reason string `json:"reason"`
}

// AnnouncedRoot is one lab node's announced root.
type AnnouncedRoot struct {
	PeerID       string `json:"peer_id"`
	Lab          string `json:"lab"`
	LedgerRoot   string `json:"ledger_root"`
	Attestations int    `json:"attestations"`
	Agrees       bool   `json:"agrees"`
}

// Node is what re-verification needs of the node it runs on: one that publishes nothing,
// syncs only when asked and records the heads the labs' nodes announce.
type Node interface {
	// LabPeer is the peer of a lab node's address (a multiaddr ending in /p2p/PEER_ID).
	LabPeer(addr string) (peer.ID, error)
	// Connect dials a lab node's address.
	Connect(ctx context.Context, addr string) error
	// SyncWith reconciles the campaign and attestation sets with p once, every envelope
	// verified before it is stored; ErrSyncBusy while a session with p is running.
	SyncWith(ctx context.Context, p peer.ID) error
	// Store is the verified store the sync fills.
	Store() *vstore.Store
	// PeerHeads are the heads heard so far, one per peer.
	PeerHeads() []protocol.PeerHead
	// BundleDir is the unpacked bundle of task c, fetched from the connected peers first
	// (within timeout) when the node does not have it.
	BundleDir(ctx context.Context, c cid.Cid, timeout time.Duration) (string, error)
	// GetBlock is the raw block c, fetched from the connected peers.
	GetBlock(ctx context.Context, c cid.Cid) ([]byte, error)
	// Close stops the node.
	Close() error
}

// ErrSyncBusy is Node.SyncWith's answer while a session with the peer is running (one the
// peer started: it syncs with whoever connects).
var ErrSyncBusy = errors.New("a sync session with this peer is already running")

// StartFunc starts the Node that Ledger runs on, for o's network under trust.
type StartFunc func(ctx context.Context, o Options, trust *attest.TrustStore) (Node, error)

// Ledger re-verifies a network's ledger from the network alone, as an outsider: it starts a
// node with start, connects to the bootstrap peers, reconciles the campaign and attestation
// sets with each (the sync protocol: every envelope verified before it is stored), fetches
// every campaign's bundles, computes the ledger with the network document's policy,
// re-scores every counted run against its own copy of the bundle (fetching the submission
// by CID), and listens on the heads topic for the roots the labs' nodes announce. It
// publishes nothing and claims nothing.
func Ledger(ctx context.Context, o Options, start StartFunc) (*Report, error) {
	began := time.Now() // wall clock: the report's Seconds, measured only
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	trust, err := o.Doc.TrustStore()
	if err != nil {
		return nil, err
	}
	n, err := start(ctx, o, trust)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	labPeers, err := connectLabs(ctx, n, o.Bootstrap)
	if err != nil {
		return nil, err
	}
	if err := syncWithLabs(ctx, n, o, labPeers); err != nil {
		return nil, err
	}
	rep, err := recompute(ctx, n, o, trust)
	if err != nil {
		return nil, err
	}
	if err := waitForHeads(ctx, n, o, labPeers, rep); err != nil {
		return nil, err
	}
	compareRoots(n.PeerHeads(), o.Doc.Network, rep)
	rep.Seconds = time.Since(began).Seconds() // wall clock: the report's Seconds, measured only
	return rep, nil
}

// withDefaults refuses options Ledger cannot run with and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Doc == nil {
		return o, errors.New("verify-ledger needs the network document")
	}
	if len(o.Bootstrap) == 0 {
		return o, errors.New("verify-ledger needs at least one lab node's address (/ip4/…/tcp/…/p2p/12D3KooW…)")
	}
	if o.Runner == nil {
		return o, errors.New("verify-ledger needs a runner to re-score with")
	}
	if o.HeadsWait <= 0 {
		o.HeadsWait = 3 * mesh.DefaultHeadsInterval
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 30 * time.Second
	}
	if o.Progress == nil {
		o.Progress = func(string, int, int) {}
	}
	if o.Listen == nil {
		o.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	return o, nil
}

// connectLabs dials every bootstrap address and returns their peers, in order.
func connectLabs(ctx context.Context, n Node, bootstrap []string) ([]peer.ID, error) {
	var labPeers []peer.ID
	for _, a := range bootstrap {
		p, err := n.LabPeer(a)
		if err != nil {
			return nil, err
		}
		if err := n.Connect(ctx, a); err != nil {
			return nil, fmt.Errorf("connect to %s: %w (is its daemon running? the address is in its `evalmesh id`)", a, err)
		}
		labPeers = append(labPeers, p)
	}
	return labPeers, nil
}

// syncWithLabs runs one sync session of ours with each lab node.
func syncWithLabs(ctx context.Context, n Node, o Options, labPeers []peer.ID) error {
	for i, p := range labPeers {
		o.Progress("sync", i, len(labPeers))
		// A session the peer started with us (it syncs with whoever connects) makes ours
		// busy: wait for it to end and run ours, which then asks only for the rest.
		for {
			err := n.SyncWith(ctx, p)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrSyncBusy) {
				return fmt.Errorf("sync with %s: %w", p, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("sync with %s: %w", p, ctx.Err())
			case <-o.Clock.After(100 * time.Millisecond):
			}
		}
	}
	o.Progress("sync", len(labPeers), len(labPeers))
	return nil
}

// recompute is the report of the synced sets: the ledger computed here from the campaigns
// whose bundles came, and every counted run re-scored.
func recompute(ctx context.Context, n Node, o Options, trust *attest.TrustStore) (*Report, error) {
	rep := &Report{Network: o.Doc.Network, NetworkDoc: o.Doc.Hash(), Disagreements: []RescoreDisagreement{},
		NotRescored: []NotRescored{}, MissingBundles: []MissingBundle{}, Announced: []AnnouncedRoot{}}
	campaigns, bundles, missing := takeCampaigns(ctx, n, trust, o)
	rep.Campaigns, rep.MissingBundles = len(campaigns), append(rep.MissingBundles, missing...)

	names := protocol.NamesOf(campaigns)
	pol := o.Doc.AcceptPolicy()
	pol.Tasks, pol.Agents, pol.AgentOwners = names.TaskNames, names.AgentNames, names.AgentOwners
	in := attest.LedgerInput{Tasks: names.Tasks, Campaigns: names.Windows, Policy: pol, Scoring: o.Doc.ScoringOptions(), Trust: trust}
	envs := map[string][]byte{}
	if err := n.Store().Attestations().Each(func(_ recon.ID, env []byte) error {
		envs[attest.EnvelopeID(env)] = env
		return nil
	}); err != nil {
		return nil, err
	}
	rep.Attestations = len(envs)
	if len(in.Tasks) == 0 {
		return nil, fmt.Errorf("no campaign of network %s could be prepared (%d campaign(s) synced, %d bundle(s) missing): nothing to verify", o.Doc.Network, n.Store().Campaigns().Len(), len(missing))
	}
	l, lrep, err := n.Store().Ledger(in)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	rep.LedgerRoot, rep.Counted, rep.Report, rep.Ledger = l.Root(), lrep.Counted, lrep, l

	for i, id := range lrep.CountedIDs {
		o.Progress("re-score", i, len(lrep.CountedIDs))
		rescore(ctx, n, o, id, envs[id], bundles, names, rep)
	}
	o.Progress("re-score", len(lrep.CountedIDs), len(lrep.CountedIDs))
	return rep, nil
}

// waitForHeads waits until every lab node we connected to has announced a head (they do
// within an interval) or HeadsWait has passed, so a silent one is reported missing rather
// than waited on forever.
func waitForHeads(ctx context.Context, n Node, o Options, labPeers []peer.ID, rep *Report) error {
	deadline := o.Clock.Now().Add(o.HeadsWait)
	for {
		got := map[string]protocol.PeerHead{}
		for _, ph := range n.PeerHeads() {
			if ph.LedgerRoot != "" {
				got[ph.PeerID] = ph
			}
		}
		have := 0
		for _, p := range labPeers {
			if ph, ok := got[p.String()]; ok && ph.LedgerRoot == rep.LedgerRoot {
				have++
			} else if ok && ph.Attestations == rep.Attestations {
				have++ // a different root over the same set: a real disagreement, no use waiting
			}
		}
		o.Progress("heads", have, len(labPeers))
		if have == len(labPeers) || o.Clock.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-o.Clock.After(200 * time.Millisecond):
		}
	}
}

// compareRoots records in rep the roots announced in network's heads, each beside ours, and
// the verdict.
func compareRoots(heads []protocol.PeerHead, network string, rep *Report) {
	rep.RootsAgree = false
	agreeing := 0
	for _, ph := range heads {
		if ph.LedgerRoot == "" || ph.Network != network {
			continue
		}
		a := AnnouncedRoot{PeerID: ph.PeerID, Lab: ph.Lab, LedgerRoot: ph.LedgerRoot, Attestations: ph.Attestations, Agrees: ph.LedgerRoot == rep.LedgerRoot}
		if a.Agrees {
			agreeing++
		}
		rep.Announced = append(rep.Announced, a)
	}
	sort.Slice(rep.Announced, func(i, j int) bool { return rep.Announced[i].PeerID < rep.Announced[j].PeerID })
	rep.RootsAgree = len(rep.Announced) > 0 && agreeing == len(rep.Announced)
	rep.OK = rep.RootsAgree && len(rep.Disagreements) == 0 && len(rep.MissingBundles) == 0
}

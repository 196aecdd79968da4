package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// VerifyLedgerOptions are what `evalmesh verify-ledger` re-verifies a network's ledger with.
type VerifyLedgerOptions struct {
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
}

// VerifyLedgerReport is what verify-ledger found (`evalmesh verify-ledger --json`, docs/cli-json.md).
type VerifyLedgerReport struct {
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

// VerifyLedger re-verifies a network's ledger from the network alone, as an outsider: it
// starts a node of home h (no lab certificate needed), connects to the bootstrap peers,
// reconciles the campaign and attestation sets with each (the sync protocol: every envelope
// verified before it is stored), fetches every campaign's bundles, computes the ledger with
// the network document's policy, re-scores every counted run against its own copy of the
// bundle (fetching the submission by CID), and listens on the heads topic for the roots
// the labs' nodes announce. It publishes nothing and claims nothing.
func VerifyLedger(ctx context.Context, h home.Home, o VerifyLedgerOptions) (*VerifyLedgerReport, error) {
	began := time.Now()
	if o.Doc == nil {
		return nil, errors.New("verify-ledger needs the network document")
	}
	if len(o.Bootstrap) == 0 {
		return nil, errors.New("verify-ledger needs at least one lab node's address (/ip4/…/tcp/…/p2p/12D3KooW…)")
	}
	if o.Runner == nil {
		return nil, errors.New("verify-ledger needs a runner to re-score with")
	}
	if o.HeadsWait <= 0 {
		o.HeadsWait = 3 * defaultHeadsInterval
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
	trust, err := o.Doc.TrustStore()
	if err != nil {
		return nil, err
	}
	cfg, err := h.Config()
	if err != nil {
		return nil, err
	}
	cfg.Network, cfg.Bootstrap, cfg.MDNS = o.Doc.Network, nil, false
	n, err := New(ctx, h, Options{Config: &cfg, Listen: o.Listen, Trust: trust, Network: o.Doc, Logf: o.Logf,
		StallTimeout: o.FetchTimeout, Sync: SyncOptions{NoAutoSync: true}})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	n.setHeadsClock(time.Now, defaultHeadsInterval)
	// Heads only: the roots the labs' nodes announce. Nothing is published.
	ps, err := NewPubSub(ctx, n.host, o.Doc.Network, map[string]protocol.ValidatorFunc{
		protocol.TopicHeads: func(from peer.ID, data []byte) protocol.Validation {
			return n.ObserveHead(data, from, time.Now())
		},
	}, PubSubOptions{})
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	heads, cancelHeads, err := ps.Subscribe(ctx, protocol.TopicHeads)
	if err != nil {
		return nil, err
	}
	defer cancelHeads()
	go func() {
		for range heads { // recorded by the validator
		}
	}()

	var labPeers []peer.ID
	for _, a := range o.Bootstrap {
		pi, err := n.parsePeerAddr(a)
		if err != nil {
			return nil, err
		}
		if err := n.Connect(ctx, a); err != nil {
			return nil, fmt.Errorf("connect to %s: %w (is its daemon running? the address is in its `evalmesh id`)", a, err)
		}
		labPeers = append(labPeers, pi.ID)
	}
	for i, p := range labPeers {
		o.Progress("sync", i, len(labPeers))
		if _, err := n.syncer.SyncWith(ctx, p); err != nil {
			return nil, fmt.Errorf("sync with %s: %w", p, err)
		}
	}
	o.Progress("sync", len(labPeers), len(labPeers))

	rep := &VerifyLedgerReport{Network: o.Doc.Network, NetworkDoc: o.Doc.Hash(), Disagreements: []RescoreDisagreement{},
		NotRescored: []NotRescored{}, MissingBundles: []MissingBundle{}, Announced: []AnnouncedRoot{}}
	campaigns, bundles, missing := n.verifyCampaigns(ctx, trust, o)
	rep.Campaigns, rep.MissingBundles = len(campaigns), append(rep.MissingBundles, missing...)

	names := protocol.NamesOf(campaigns)
	pol := o.Doc.AcceptPolicy()
	pol.Tasks, pol.Agents, pol.AgentOwners = names.TaskNames, names.AgentNames, names.AgentOwners
	in := attest.LedgerInput{Tasks: names.Tasks, Campaigns: names.Windows, Policy: pol, Scoring: o.Doc.ScoringOptions(), Trust: trust}
	envs := map[string][]byte{}
	if err := n.vstore.Attestations().Each(func(_ recon.ID, env []byte) error {
		envs[attest.EnvelopeID(env)] = env
		return nil
	}); err != nil {
		return nil, err
	}
	rep.Attestations = len(envs)
	if len(in.Tasks) == 0 {
		return nil, fmt.Errorf("no campaign of network %s could be prepared (%d campaign(s) synced, %d bundle(s) missing): nothing to verify", o.Doc.Network, n.vstore.Campaigns().Len(), len(missing))
	}
	l, lrep, err := n.vstore.Ledger(in)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	rep.LedgerRoot, rep.Counted, rep.Report, rep.Ledger = l.Root(), lrep.Counted, lrep, l

	for i, id := range lrep.CountedIDs {
		o.Progress("re-score", i, len(lrep.CountedIDs))
		n.verifyRescore(ctx, o, id, envs[id], bundles, names, rep)
	}
	o.Progress("re-score", len(lrep.CountedIDs), len(lrep.CountedIDs))

	// Every lab node we connected to announces a head within an interval; wait for each
	// (or HeadsWait), so a silent one is reported missing rather than waited on forever.
	deadline := time.Now().Add(o.HeadsWait)
	for {
		got := map[string]protocol.PeerHead{}
		for _, ph := range n.peerHeads() {
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
		if have == len(labPeers) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	rep.RootsAgree = false
	agreeing := 0
	for _, ph := range n.peerHeads() {
		if ph.LedgerRoot == "" || ph.Network != o.Doc.Network {
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
	rep.Seconds = time.Since(began).Seconds()
	return rep, nil
}

// verifyCampaigns takes every synced campaign as the daemons' mesh does (verified now, or at
// its creation once expired; none of a retired lab), fetches its bundles and returns what the
// ledger needs of each, the bundle folders by CID, and the bundles no peer served.
func (n *Node) verifyCampaigns(ctx context.Context, trust *attest.TrustStore, o VerifyLedgerOptions) ([]protocol.LedgerCampaign, map[string]string, []MissingBundle) {
	var envs [][]byte
	_ = n.vstore.Campaigns().Each(func(_ recon.ID, env []byte) error {
		envs = append(envs, env)
		return nil
	})
	now := time.Now()
	var vcs []*protocol.VerifiedCampaign
	want := map[string]bool{}
	for _, env := range envs {
		v, err := protocol.VerifyCampaign(env, trust, protocol.CampaignVerifyOptions{Now: now, Network: o.Doc.Network})
		if err != nil && protocol.CampaignReasonOf(err) == protocol.CampaignExpired {
			v, err = protocol.VerifyCampaign(env, trust, protocol.CampaignVerifyOptions{Now: campaignCreatedAt(env), Network: o.Doc.Network})
		}
		if err != nil {
			continue
		}
		if r, ok := trust.LabRetired(v.Lab); ok && !now.Before(r) {
			continue // the mesh (onCampaign) prepares none of a retired lab's campaigns
		}
		vcs = append(vcs, v)
		for _, t := range v.Campaign.Tasks {
			want[t] = true
		}
	}
	cids := make([]string, 0, len(want))
	for c := range want {
		cids = append(cids, c)
	}
	slices.Sort(cids)
	dirs := map[string]string{}
	metas := map[string]tasks.Meta{}
	var missing []MissingBundle
	for i, c := range cids {
		o.Progress("bundles", i, len(cids))
		dir, err := n.verifyBundleDir(ctx, c, o.FetchTimeout)
		if err == nil {
			var meta *tasks.Meta
			if meta, err = tasks.LoadMeta(dir); err == nil {
				dirs[c], metas[c] = dir, *meta
				continue
			}
		}
		missing = append(missing, MissingBundle{Task: c, Reason: err.Error()})
	}
	o.Progress("bundles", len(cids), len(cids))
	var out []protocol.LedgerCampaign
	for _, v := range vcs {
		lc := protocol.LedgerCampaign{ID: v.ID, Lab: v.Lab, LabName: v.LabName, Created: v.Campaign.Created, Deadline: v.Campaign.Deadline,
			Tasks: map[string]scoring.TaskInfo{}, Agents: map[string]string{}}
		complete := true
		for _, t := range v.Campaign.Tasks {
			meta, ok := metas[t]
			if !ok {
				complete = false
				break
			}
			lc.Tasks[t] = scoring.TaskInfo{Name: meta.Name, LowerIsBetter: meta.Metric.LowerIsBetter,
				Optimum: meta.Metric.OptimalScore, SOTA: meta.SOTA.Score, EstimatedWorst: meta.EstimatedWorstScore}
		}
		if !complete {
			continue // the mesh adds a campaign only once all its bundles are here
		}
		for _, a := range v.Campaign.Agents {
			spec, err := agentspec.Parse(a.Spec)
			if err != nil {
				complete = false
				break
			}
			lc.Agents[a.CID] = spec.Name
		}
		if complete {
			out = append(out, lc)
		}
	}
	return out, dirs, missing
}

func campaignCreatedAt(env []byte) time.Time {
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		return time.Time{}
	}
	c, err := protocol.DecodeCampaign(e.Payload)
	if err != nil {
		return time.Time{}
	}
	return c.Created
}

// verifyBundleDir is the unpacked bundle of a task CID under HOME/bundles, fetched from the
// connected peers first when this home does not have it.
func (n *Node) verifyBundleDir(ctx context.Context, cs string, timeout time.Duration) (string, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return "", fmt.Errorf("task CID %q: %w", cs, err)
	}
	return n.bundleDir(ctx, c, timeout)
}

// verifyRescore re-scores one counted run with the daemons' code and records the outcome.
func (n *Node) verifyRescore(ctx context.Context, o VerifyLedgerOptions, id string, env []byte, bundles map[string]string, names protocol.LedgerNames, rep *VerifyLedgerReport) {
	notRescored := func(lab, task, why string) {
		rep.NotRescored = append(rep.NotRescored, NotRescored{Attestation: id, Lab: lab, Task: task, Reason: why})
	}
	e, err := attest.DecodeEnvelope(env)
	if err != nil {
		notRescored("", "", "envelope: "+err.Error())
		return
	}
	st, run, _, err := attest.DecodeStatement(e.Payload)
	if err != nil || run == nil {
		notRescored("", "", "not a run attestation")
		return
	}
	task := names.TaskNames[run.Slot.Task]
	if task == "" {
		task = run.Slot.Task
	}
	dir, ok := bundles[run.Slot.Task]
	if !ok {
		notRescored(run.Lab, task, "bundle "+run.Slot.Task+" not fetched")
		return
	}
	if tasks.IsSealed(dir) && !o.Runner.HoldsKey(run.Slot.Task) {
		notRescored(run.Lab, task, "sealed task: this node holds no key grant for bundle "+run.Slot.Task+" (only the network's labs can score it)")
		return
	}
	var subName, subCID, subSum string
	for _, s := range st.Subject {
		if role, _ := s.Annotations[attest.AnnotationRole].(string); role == attest.RoleSubmission {
			subName, subSum = s.Name, s.Digest["sha256"]
			subCID, _ = s.Annotations[attest.AnnotationCID].(string)
		}
	}
	var out *runner.Rescored
	if subCID == "" {
		out, err = o.Runner.RescoreMissing(id, run, env, dir)
	} else {
		var sub []byte
		if sub, err = n.verifyFetchObject(ctx, subCID, subSum, o.FetchTimeout); err != nil {
			notRescored(run.Lab, task, err.Error())
			return
		}
		out, err = o.Runner.RescoreSubmission(ctx, id, run, sub, subName, subCID, dir)
	}
	if err != nil {
		notRescored(run.Lab, task, err.Error())
		return
	}
	rep.Rescored++
	if attest.Confirms(run, &out.Predicate, attest.Agree) {
		rep.Confirmed++
		return
	}
	agent := names.AgentNames[run.Slot.Agent]
	if agent == "" {
		agent = run.Slot.Agent
	}
	rep.Disagreements = append(rep.Disagreements, RescoreDisagreement{Attestation: id, Lab: run.Lab, Task: task, Agent: agent, Seed: run.Slot.Seed,
		Metric: run.Metric, Attested: run.Score, AttestValid: run.Valid, Rescored: out.Predicate.Score, RescoreOK: out.Predicate.Valid})
}

// verifyFetchObject gets a raw block by CID from the connected peers and checks it against
// the attested sha256.
func (n *Node) verifyFetchObject(ctx context.Context, cs, sum string, timeout time.Duration) ([]byte, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return nil, fmt.Errorf("submission CID %q: %w", cs, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := n.bserv.GetBlock(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("fetch submission %s: no peer served it: %w", cs, err)
	}
	got := sha256.Sum256(b.RawData())
	if sum != "" && hex.EncodeToString(got[:]) != sum {
		return nil, fmt.Errorf("submission %s does not match its attested sha256", cs)
	}
	return b.RawData(), nil
}

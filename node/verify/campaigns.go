package verify

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/tasks"
)

// takeCampaigns takes every synced campaign as the daemons' mesh does (verified now, or at
// its creation once expired; none of a retired lab), fetches its bundles and returns what the
// ledger needs of each, the bundle folders by CID, and the bundles no peer served.
func takeCampaigns(ctx context.Context, n Node, trust *attest.TrustStore, o Options) ([]protocol.LedgerCampaign, map[string]string, []MissingBundle) {
	vcs, cids := takenCampaigns(n, trust, o)
	dirs, metas, missing := fetchBundles(ctx, n, o, cids)
	var out []protocol.LedgerCampaign
	for _, v := range vcs {
		if lc, ok := ledgerCampaign(v, metas); ok {
			out = append(out, lc)
		}
	}
	return out, dirs, missing
}

// takenCampaigns are the synced campaigns the mesh's onCampaign would take, and the task
// CIDs they name, sorted.
func takenCampaigns(n Node, trust *attest.TrustStore, o Options) ([]*protocol.VerifiedCampaign, []string) {
	var envs [][]byte
	_ = n.Store().Campaigns().Each(func(_ recon.ID, env []byte) error {
		envs = append(envs, env)
		return nil
	})
	now := o.Clock.Now()
	var vcs []*protocol.VerifiedCampaign
	want := map[string]bool{}
	for _, env := range envs {
		v, err := protocol.VerifyCampaign(env, trust, protocol.CampaignVerifyOptions{AtCreation: true, Network: o.Doc.Network})
		if err != nil || !mesh.CampaignTaken(v, trust, now) { // as the mesh's onCampaign takes them
			continue
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
	return vcs, cids
}

// fetchBundles fetches each task's bundle (when not here) and reads its metadata: the
// folders and metadata by CID, and the bundles no peer served or that do not load.
func fetchBundles(ctx context.Context, n Node, o Options, cids []string) (map[string]string, map[string]tasks.Meta, []MissingBundle) {
	dirs := map[string]string{}
	metas := map[string]tasks.Meta{}
	var missing []MissingBundle
	for i, c := range cids {
		o.Progress("bundles", i, len(cids))
		dir, err := bundleDir(ctx, n, c, o.FetchTimeout)
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
	return dirs, metas, missing
}

// ledgerCampaign is what the ledger needs of campaign v; false when a bundle of its is
// missing (the mesh adds a campaign only once all its bundles are here) or an agent spec
// does not parse.
func ledgerCampaign(v *protocol.VerifiedCampaign, metas map[string]tasks.Meta) (protocol.LedgerCampaign, bool) {
	for _, t := range v.Campaign.Tasks {
		if _, ok := metas[t]; !ok {
			return protocol.LedgerCampaign{}, false
		}
	}
	agents := map[string]*agentspec.Spec{}
	for _, a := range v.Campaign.Agents {
		spec, err := agentspec.Parse(a.Spec)
		if err != nil {
			return protocol.LedgerCampaign{}, false
		}
		agents[a.CID] = spec
	}
	return mesh.LedgerCampaign(v, metas, agents), true
}

// bundleDir is the unpacked bundle of a task CID, fetched from the connected peers first
// when the node does not have it.
func bundleDir(ctx context.Context, n Node, cs string, timeout time.Duration) (string, error) {
	c, err := cid.Decode(cs)
	if err != nil {
		return "", fmt.Errorf("task CID %q: %w", cs, err)
	}
	return n.BundleDir(ctx, c, timeout)
}

package node

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

// A campaign arriving by gossip is verified once on its way to the mesh: by the topic
// validator, whose verified value enters the store with it (Set.AddVerified), not again by
// the store's campaign verifier. Sync is held off (no session on connect, hour-long
// intervals, the meshes' first reconciliation over before the campaign is published), so
// gossip is the only way in.
func TestGossipedCampaignIsVerifiedOnce(t *testing.T) {
	f := newSealedMesh(t)
	noSync := func(o *Options, mo *mesh.Options) {
		o.Sync.NoAutoSync = true
		mo.SyncInterval, mo.HeadsInterval = time.Hour, time.Hour
	}
	f.tune = noSync
	a, ma := f.startLab(f.hA, "lab-a", f.labA, 0)
	var storeVerified atomic.Int64 // b's
	f.tune = func(o *Options, mo *mesh.Options) {
		noSync(o, mo)
		o.VerifyCampaign = func(env []byte) (uint64, any, error) {
			storeVerified.Add(1)
			v, err := protocol.VerifyCampaign(env, f.trust, protocol.CampaignVerifyOptions{AtCreation: true, Network: f.network})
			if err != nil {
				return 0, nil, err
			}
			return campaignOrderKey(v), v, nil
		}
	}
	b, mb := f.start(0)
	connect(t, a, b)
	testutil.WaitFor(t, 30*time.Second, "b on a's campaigns topic", func() bool {
		return slices.Contains(a.gossipsub().Peers(protocol.TopicCampaigns), b.ID())
	})
	ctx := context.Background()
	for _, m := range []*mesh.Mesh{ma, mb} {
		testutil.WaitFor(t, 30*time.Second, "the mesh's first reconciliation", func() bool {
			open, _, _ := m.ClaimingIdle(ctx)
			return open
		})
	}
	_, campaign := f.publish(a, ma)
	testutil.WaitFor(t, 30*time.Second, "the campaign in b's store and mesh", func() bool {
		_, err := mb.CampaignStatus(ctx, campaign)
		return b.Store().Campaigns().Len() == 1 && err == nil
	})
	validated := uint64(0)
	for k, n := range b.gossipsub().Counters().Verdicts {
		if strings.HasPrefix(k, protocol.TopicCampaigns+"/") {
			validated += n
		}
	}
	if validated != 1 || storeVerified.Load() != 0 {
		t.Fatalf("b verified the gossiped campaign %d time(s) in its topic validator and %d in its store, want 1 and 0",
			validated, storeVerified.Load())
	}
}

// A run attestation arriving by gossip is verified once, as a campaign is: by the topic
// validator, whose value (and the trust store it was verified under, the store's) enters
// the store with it, not again by the store. Sync is held off as above, so gossip is the
// only way in; the run is one lab-a's node stored locally, which its mesh gossips on.
func TestGossipedAttestationIsVerifiedOnce(t *testing.T) {
	f := newSealedMesh(t)
	g, err := attestgen.New("lab-g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.trust.AddLab(g.Name, g.Lab.Pub); err != nil {
		t.Fatal(err)
	}
	f.tune = func(o *Options, mo *mesh.Options) {
		o.Sync.NoAutoSync = true
		mo.SyncInterval, mo.HeadsInterval = time.Hour, time.Hour
	}
	a, ma := f.startLab(f.hA, "lab-a", f.labA, 0)
	b, mb := f.start(0)
	connect(t, a, b)
	testutil.WaitFor(t, 30*time.Second, "b on a's attestations topic", func() bool {
		return slices.Contains(a.gossipsub().Peers(protocol.TopicAttestations), b.ID())
	})
	ctx := context.Background()
	for _, m := range []*mesh.Mesh{ma, mb} {
		testutil.WaitFor(t, 30*time.Second, "the mesh's first reconciliation", func() bool {
			open, _, _ := m.ClaimingIdle(ctx)
			return open
		})
	}
	validated := func() uint64 {
		n := uint64(0)
		for k, c := range b.gossipsub().Counters().Verdicts {
			if strings.HasPrefix(k, protocol.TopicAttestations+"/") {
				n += c
			}
		}
		return n
	}
	set := b.Store().Attestations()
	validatedBefore, storedBefore, verifiedBefore := validated(), set.Len(), set.Verifications()
	run, err := g.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	addLocal(t, a, [][]byte{run})
	testutil.WaitFor(t, 30*time.Second, "the run in b's store", func() bool {
		return set.Len() == storedBefore+1
	})
	if has, err := set.Has(vstore.DigestOf(run)); err != nil || !has {
		t.Fatalf("b's new attestation is not the run (%v)", err)
	}
	v, s := validated()-validatedBefore, set.Verifications()-verifiedBefore
	if v != 1 || s != 0 {
		t.Fatalf("b verified the gossiped run %d time(s) in its topic validator and %d in its store, want 1 and 0", v, s)
	}
}

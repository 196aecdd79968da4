package mesh

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
)

// Grants of sealed bundles' keys (attest/grant.go) are envelopes of the attestation set:
// gossip, sync and the store carry them with no code of their own. This file indexes them
// by bundle for the runner's key lookups, and when a grant to this node's lab arrives,
// lets the claim machine claim that bundle's slots at once (until then they were left to
// key holders first) and scores the runs that were waiting for it, publishing their
// attestations.

// grantIndex maps a bundle CID to the grant envelopes the store accepted for it, and
// follows the grants to this node's lab. mu guards byCID (the store's hooks add, runs
// read); a grant to this lab is followed on a goroutine of its own (mine), which hands the
// coordinator the news with decide.
type grantIndex struct {
	*shared
	objects *objects

	mu    sync.RWMutex
	byCID map[string][][]byte
}

// add indexes the grants among verified attestations (the store's values: no envelope is
// decoded again).
func (g *grantIndex) add(vs []*attest.Verified) {
	for _, v := range vs {
		gp := v.Grant
		if gp == nil {
			continue
		}
		g.mu.Lock()
		g.byCID[gp.Bundle] = append(g.byCID[gp.Bundle], v.Envelope)
		g.mu.Unlock()
		if gp.Lab == g.lab {
			g.mine(gp.Bundle)
		}
	}
}

func (g *grantIndex) grants(bundle string) [][]byte {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return append([][]byte(nil), g.byCID[bundle]...)
}

// mine follows a grant of bundle's key to this node's lab.
func (g *grantIndex) mine(bundle string) {
	if g.ctx.Err() != nil {
		return // closing: the runs stay waiting for the next start (Recover)
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.keyArrived(bundle)
		g.scoreAwaiting(bundle)
	}()
}

// start indexes the stored grants and gives the runner its KeySource: this lab's
// grants in the store (which holds HOME/attestations' too), opened with HOME/lab-age.key
// when the node holds it. It replaces a KeySource the runner had (the CLI's, over files).
func (g *grantIndex) start() {
	r := g.opts.Runner
	keys := &runner.GrantKeys{Lab: g.lab, Trust: g.opts.Trust, Grants: g.grants}
	if id, err := attest.LoadAgeIdentity(g.opts.Home.LabAgeKeyPath()); err == nil {
		keys.Identity = id
	} else if !errors.Is(err, os.ErrNotExist) {
		g.opts.Logf("mesh: %v: sealed bundles will not be scored here", err)
	}
	r.Keys = keys
	// Runners without labels: where the network document names the labs that score a
	// sealed bundle and this lab is not one, its runs sign the submission and no score.
	scorers := g.opts.Policy.Scorers
	r.Unscored = func(bundle string) bool {
		s, ok := scorers[bundle]
		return ok && !slices.Contains(s, g.lab)
	}
	// Only now the index is filled and hooked: a stored grant to this lab starts
	// keyArrived, which reads the runner's Keys set above.
	g.store.Attestations().OnNew(func(_ vstore.Source, news []vstore.Accepted) {
		vs := make([]*attest.Verified, 0, len(news))
		for _, a := range news {
			if v, ok := a.Value.(*attest.Verified); ok {
				vs = append(vs, v)
			}
		}
		g.add(vs)
	})
	if vs, _, err := g.store.Values(g.opts.Trust); err == nil {
		g.add(vs)
	} else {
		g.opts.Logf("mesh: indexing the stored grants: %v", err)
	}
}

// keyArrived lifts the key holders' head start on bundle's slots once this node can open
// its key (a grant to the lab that opens with HOME/lab-age.key).
func (g *grantIndex) keyArrived(bundle string) {
	if !g.opts.Runner.HoldsKey(bundle) {
		return
	}
	g.decide(func(c *protocol.Coordinator, now time.Time) protocol.CoordActions {
		if c.WaitsForKey(bundle) {
			g.opts.Logf("mesh: this lab can now open the key of %s: claiming its slots like any other", bundle)
		}
		return c.KeyArrived(bundle, now)
	})
}

// scoreAwaiting scores this node's runs that waited for bundle's key and publishes them.
func (g *grantIndex) scoreAwaiting(bundle string) {
	out, err := g.opts.Runner.ScoreAwaiting(g.ctx, bundle)
	if err != nil {
		g.opts.Logf("mesh: runs waiting for the key of %s: %v", bundle, err)
		return
	}
	for _, rec := range out {
		if rec.Err != nil || rec.Outcome == nil {
			continue
		}
		if err := g.objects.ingestRun(context.WithoutCancel(g.ctx), rec.Outcome.Envelope); err != nil {
			g.opts.Logf("mesh: run %s scored after a grant of %s: %v", rec.RunID, bundle, err)
		}
	}
}

// sealedRunOutcome says what became of a run whose bundle this lab cannot open: the agent
// ran and its submission waits here for a grant; the slot is released (RunAwaitingKey: no
// attempt consumed, never claimed here again) so a node of a lab that holds the key can run
// and score it meanwhile.
func sealedRunOutcome(err error, logf func(string, ...any)) (string, bool) {
	var nk *runner.NoKeyError
	if !errors.As(err, &nk) {
		return "", false
	}
	logf("mesh: %v", nk)
	return "sealed bundle, no key here: " + nk.Error(), true
}

// awaitingKeySlots lists the slots of this home's runs that wait for a sealed bundle's key,
// with the attempt each run signed, so that a restarted mesh does not claim them again (a
// second run here would wait for the same key) and tells the others again that those runs
// did not fail (protocol.SlotSpec.AwaitingKey, AwaitingKeyAttempt).
func awaitingKeySlots(r *runner.Runner, logf func(string, ...any)) map[string]int {
	out := map[string]int{}
	runs, err := runner.ListRuns(r.Home)
	if err != nil {
		logf("mesh: reading runs for those waiting for a key: %v", err)
		return out
	}
	for _, st := range runs {
		if st.Phase == runner.PhaseAwaitingKey && st.Campaign != "" {
			// A state of an older evalmesh has no attempt; its run signed none, read as 1.
			out[protocol.SlotID(attest.Slot{Campaign: st.Campaign, Task: st.TaskCID, Agent: st.AgentCID, Seed: st.Seed})] = max(st.Attempt, 1)
		}
	}
	return out
}

package node

import (
	"context"
	"errors"
	"os"
	"sync"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
)

// Grants of sealed bundles' keys (attest/grant.go) are envelopes of the attestation set:
// gossip, sync and the store carry them with no code of their own. This file indexes them
// by bundle for the runner's key lookups, and when a grant to this node's lab arrives,
// lets the claim machine claim that bundle's slots at once (until then they were left to
// key holders first) and scores the runs that were waiting for it, publishing their
// attestations.

// grantIndex maps a bundle CID to the grant envelopes the store accepted for it. Safe for
// concurrent use (the store's hooks add, runs read).
type grantIndex struct {
	mu     sync.RWMutex
	byCID  map[string][][]byte
	lab    string
	onMine func(bundle string)
}

func (g *grantIndex) add(envs [][]byte) {
	for _, env := range envs {
		gp, ok, _ := attest.GrantOf(env)
		if !ok {
			continue
		}
		g.mu.Lock()
		g.byCID[gp.Bundle] = append(g.byCID[gp.Bundle], env)
		g.mu.Unlock()
		if gp.Lab == g.lab && g.onMine != nil {
			g.onMine(gp.Bundle)
		}
	}
}

func (g *grantIndex) grants(bundle string) [][]byte {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return append([][]byte(nil), g.byCID[bundle]...)
}

// startGrants indexes the stored grants and gives the runner its KeySource: this lab's
// grants in the store (which holds HOME/attestations' too), opened with HOME/lab-age.key
// when the node holds it. It replaces a KeySource the runner had (the CLI's, over files).
func (m *Mesh) startGrants() {
	g := &grantIndex{byCID: map[string][][]byte{}, lab: m.lab}
	g.onMine = func(bundle string) {
		if m.ctx.Err() != nil {
			return // closing: the runs stay waiting for the next start (Recover)
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.keyArrived(bundle)
			m.scoreAwaiting(bundle)
		}()
	}
	m.store.Attestations().OnNew(func(_ Source, envs [][]byte) { g.add(envs) })
	_ = m.store.Attestations().Each(func(_ recon.ID, env []byte) error {
		g.add([][]byte{env})
		return nil
	})
	m.grants = g
	r := m.opts.Runner
	keys := &runner.GrantKeys{Lab: m.lab, Trust: m.opts.Trust, Grants: g.grants}
	if id, err := attest.LoadAgeIdentity(m.n.home.LabAgeKeyPath()); err == nil {
		keys.Identity = id
	} else if !errors.Is(err, os.ErrNotExist) {
		m.n.opts.Logf("mesh: %v: sealed bundles will not be scored here", err)
	}
	r.Keys = keys
}

// keyArrived lifts the key holders' head start on bundle's slots once this node can open
// its key (a grant to the lab that opens with HOME/lab-age.key).
func (m *Mesh) keyArrived(bundle string) {
	if !m.opts.Runner.HoldsKey(bundle) {
		return
	}
	m.do(func() {
		if m.coord.WaitsForKey(bundle) {
			m.n.opts.Logf("mesh: this lab can now open the key of %s: claiming its slots like any other", bundle)
		}
		m.apply(m.coord.KeyArrived(bundle, m.opts.Now()))
	})
}

// scoreAwaiting scores this node's runs that waited for bundle's key and publishes them.
func (m *Mesh) scoreAwaiting(bundle string) {
	out, err := m.opts.Runner.ScoreAwaiting(m.ctx, bundle)
	if err != nil {
		m.n.opts.Logf("mesh: runs waiting for the key of %s: %v", bundle, err)
		return
	}
	for _, rec := range out {
		if rec.Err != nil || rec.Outcome == nil {
			continue
		}
		if err := m.ingestRun(context.WithoutCancel(m.ctx), rec.Outcome.Envelope); err != nil {
			m.n.opts.Logf("mesh: run %s scored after a grant of %s: %v", rec.RunID, bundle, err)
		}
	}
}

// sealedRunOutcome says what became of a run whose bundle this lab cannot open: the agent
// ran and its submission waits here for a grant; the slot is released (RunAwaitingKey: no
// attempt consumed, never claimed here again) so a node of a lab that holds the key can run
// and score it meanwhile.
func (m *Mesh) sealedRunOutcome(err error) (string, bool) {
	var nk *runner.NoKeyError
	if !errors.As(err, &nk) {
		return "", false
	}
	m.n.opts.Logf("mesh: %v", nk)
	return "sealed bundle, no key here: " + nk.Error(), true
}

// GrantsIn returns a runner.GrantKeys Grants function over a stored set (a node without a
// mesh: the CLI, tests). Each call scans the set; the mesh keeps an index instead.
func GrantsIn(set *Set) func(bundle string) [][]byte {
	return func(bundle string) [][]byte {
		var out [][]byte
		_ = set.Each(func(_ recon.ID, env []byte) error {
			if g, ok, _ := attest.GrantOf(env); ok && g.Bundle == bundle {
				out = append(out, env)
			}
			return nil
		})
		return out
	}
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

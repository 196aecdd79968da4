package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// Witness records (attest/witness.go, docs/design.md §9 "Time witnessed by others"): a node
// signs one for each campaign of another lab when it prepares it; a run cites one of its
// campaign by a lab other than the campaign's, so the ledger can tell it was signed after
// another lab had seen the campaign. In a network that requires them (MeshOptions.Policy's
// RequireWitness), a node waits for another lab's witness before it claims the slots of its
// own lab's campaign, and a run that cites none does not finish a slot here. All on the loop.

// witnessRef is one witness record the store holds.
type witnessRef struct {
	id, lab, node string
}

// onWitness records a witness record the store accepted, and hands the campaign it
// witnesses to the claim machine if that waited for it.
func (m *Mesh) onWitness(id string, w *attest.WitnessPredicate) {
	refs := m.witnesses[w.Campaign]
	if slices.ContainsFunc(refs, func(r witnessRef) bool { return r.id == id }) {
		return
	}
	m.witnesses[w.Campaign] = append(refs, witnessRef{id: id, lab: w.Lab, node: w.Node})
	if w.Node == m.self {
		m.witnessed[w.Campaign] = true
	}
	mc := m.campaigns[w.Campaign]
	if mc == nil {
		return
	}
	if mc.awaitingWitness && m.witnessFor(mc.v.ID) != "" {
		m.n.opts.Logf("mesh: campaign %s: witnessed by lab %s; claiming its slots", mc.v.ID, w.Lab)
		m.handToMachine(mc)
	}
	// Runs that cite this witness and arrived before it finish their slots now.
	now := m.opts.Now()
	for _, r := range m.runs {
		if r.Witness == id && r.Slot.Campaign == w.Campaign {
			if _, ok := m.slots[r.SlotID]; ok {
				m.apply(m.cm.SlotFinished(r.SlotID, r.Node, now))
			}
		}
	}
}

// witnessFor is the witness record a run of campaign cites: the least ID among those by a
// lab other than the campaign's, or "" when there is none yet.
func (m *Mesh) witnessFor(campaign string) string {
	mc := m.campaigns[campaign]
	if mc == nil {
		return ""
	}
	best := ""
	for _, r := range m.witnesses[campaign] {
		if r.lab != mc.v.Lab && (best == "" || r.id < best) {
			best = r.id
		}
	}
	return best
}

// finishesSlot says whether run r can finish its slot here: in a network that requires
// witnesses, only a run citing another lab's witness of its campaign counts, so only such a
// run finishes the slot (others would leave it to nobody).
func (m *Mesh) finishesSlot(r *runRecord) bool {
	if !m.opts.Policy.RequireWitness {
		return true
	}
	mc := m.campaigns[r.Slot.Campaign]
	if mc == nil || r.Witness == "" {
		return false
	}
	return slices.ContainsFunc(m.witnesses[r.Slot.Campaign], func(w witnessRef) bool { return w.id == r.Witness && w.lab != mc.v.Lab })
}

// witness signs, stores and gossips this node's witness record of campaign mc (another
// lab's), once; off the loop, since the store hands what it adds back to the loop.
func (m *Mesh) witness(mc *meshCampaign) {
	if m.witnessed[mc.v.ID] {
		return
	}
	m.witnessed[mc.v.ID] = true
	id := mc.v.ID
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		env, _, err := attest.NewWitness(m.opts.Runner.Key, m.opts.Runner.CurrentCert(), id, m.opts.Now())
		if err == nil {
			_, err = m.store.Attestations().Add([][]byte{env}, SourceLocal, "")
		}
		if err != nil && m.ctx.Err() == nil {
			m.n.opts.Logf("mesh: witness of campaign %s: %v", id, err)
		}
	}()
}

// needsWitness says whether this node must wait for another lab's witness of mc before it
// claims its slots: mc is its own lab's campaign and none has come yet.
func (m *Mesh) needsWitness(mc *meshCampaign) bool {
	return m.opts.Policy.RequireWitness && mc.v.Lab == m.lab && m.witnessFor(mc.v.ID) == ""
}

// witnessOf decodes a witness record's payload, or nil for any other statement.
func witnessOf(st *attest.Statement, payload []byte) *attest.WitnessPredicate {
	if st == nil || st.PredicateType != attest.PredicateWitnessV1 {
		return nil
	}
	w, err := attest.DecodeWitness(payload)
	if err != nil {
		return nil
	}
	return w
}

// awaitWitness waits, off the loop, until a witness record of campaign by another lab is
// held, for at most witnessWait.
func (m *Mesh) awaitWitness(ctx context.Context, campaign string) (string, error) {
	deadline := time.Now().Add(witnessWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var w string
		if err := m.query(ctx, func() { w = m.witnessFor(campaign) }); err != nil {
			return "", err
		}
		if w != "" {
			return w, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no witness record of campaign %s by another lab after %s: a run signed now would not count", campaign, witnessWait)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
}

// witnessWait bounds awaitWitness: this node's own witness of another lab's campaign is
// stored within milliseconds of the campaign being prepared.
const witnessWait = 30 * time.Second

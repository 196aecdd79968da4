package mesh

import (
	"context"
	"fmt"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/vstore"
)

// Witness records (attest/witness.go, docs/design.md §9 "Time witnessed by others"): a node
// signs one for each campaign of another lab when it prepares it; a run cites one of its
// campaign by a lab other than the campaign's, so the ledger can tell it was signed after
// another lab had seen the campaign. In a network that requires them (Options.Policy's
// RequireWitness), a node waits for another lab's witness before it claims the slots of its
// own lab's campaign, and a run that cites none does not finish a slot here: those rules are
// protocol.Coordinator's; this file signs the records it asks for.

// witness signs, stores and gossips this node's witness record of campaign id (another
// lab's, protocol.CoordActions.Witness asks once); off the loop, since the store hands what it adds back to the loop.
func (r recordSigner) witness(id string) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		env, _, err := attest.NewWitness(r.opts.Runner.Key, r.opts.Runner.CurrentCert(), id, r.opts.Now())
		if err == nil {
			_, err = r.store.Attestations().Add([][]byte{env}, vstore.SourceLocal, "")
		}
		if err != nil && r.ctx.Err() == nil {
			r.opts.Logf("mesh: witness of campaign %s: %v", id, err)
		}
	}()
}

// awaitWitness waits, off the loop, until a witness record of campaign by another lab is
// held, for at most Timing.WitnessWait (this node's own witness of another lab's
// campaign is stored within milliseconds of the campaign being prepared).
func (r recordSigner) awaitWitness(ctx context.Context, campaign string) (string, error) {
	clk, wait := r.opts.Clock, r.opts.Timing.WitnessWait
	deadline := clk.Now().Add(wait)
	tick := clk.NewTicker(r.opts.Timing.WitnessPoll)
	defer tick.Stop()
	for {
		var w string
		if err := r.query(ctx, func() { w = r.coord.WitnessFor(campaign) }); err != nil {
			return "", err
		}
		if w != "" {
			return w, nil
		}
		if clk.Now().After(deadline) {
			return "", fmt.Errorf("no witness record of campaign %s by another lab after %s: a run signed now would not count", campaign, wait)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.Chan():
		}
	}
}

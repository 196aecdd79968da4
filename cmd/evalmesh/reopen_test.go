package main

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/scoring"
)

// TestDishonestLabCannotTakeASlotByReopening (docs/design.md §9 "Pre-emption": a slot
// finished by a run that a later, better-ranked claim record takes the attempt from is open
// again, held for a lease for the record's holder): where claim records are required, lab3
// (node 2, which runs nothing itself) uses late claim records, signed with its own valid
// keys and citing a valid witness, in two ways.
//
// (a) To take slots away from an honest lab: once both slots of an honest campaign are run
// and counted, it signs a record of the attempt each honest run ran — on seed 0 its draw
// outranks both honest labs, on seed 1 both honest labs outrank it — and never runs them.
// Seed 1's honest run still counts, untouched. Seed 0's honest run no longer counts (the
// ledger counts a run only from its attempt's holder, and cannot tell a late record from an
// honest race), but on every honest node the slot is open again, held for lab3's node for
// the lease (3 s here: the rerun starts no earlier), and then run again by an honest lab:
// the agent's leaderboard row is what it was before the attack, lab3's attempt is listed
// against it in the ledger report, and the outranked honest run is excluded as not its
// attempt's holder's.
//
// (b) To get a second try at a slot it ran: it signs a claim record and a result (score 0,
// which the honest re-scorer disputes: a result lab3 would rather withdraw) of a slot of
// another honest campaign while the honest nodes are busy, so its run finishes the slot
// there; then, from a second node it certifies that outranks its daemon on that attempt
// (same lab, same draw, a lesser node ID), a record of the same attempt, which reopens the
// slot, and from its daemon a record and a perfect result (score 1) of the next attempt.
// Neither result counts: the first is no longer its attempt's holder's, and the second is
// blocked by the lower attempt its own lab holds. Lab3 gains nothing.
//
// All three roots are equal at each step. Without the reopening (a slot a late record takes
// stays finished where it finished) seed 0 is never run again and its cell stays empty; with
// the reopened slot free at once, the rerun starts before the lease is out (0.6 s after the
// import, in a run that checked it). It also found that a lab's own rerun of a slot a late
// record took from it never counted where a run needs another lab's re-score: the re-score
// of the rerun was filed as an orphan (attest.Outcome.WithUnblockedAttempts).
func TestDishonestLabCannotTakeASlotByReopening(t *testing.T) {
	skipShortFaults(t)
	a := startRecordsAttack(t)
	c, tasks, liar, liarLab, honest, honestLab, specs := a.c, a.tasks, a.liar, a.liarLab, a.honest, a.honestLab, a.specs
	ctx := context.Background()
	constant := specs["constant"]
	key, cert := c.nodeKey(2)
	rank := func(s attest.Slot, attempt int, i int) attest.ClaimRank {
		return attest.RankOf(s, attempt, c.labs.Nodes[i].Lab.ID, c.nodes[i].peerID)
	}
	counted := func(v ledgerView, campaign string) map[int]runInfo { // by seed
		out := map[int]runInfo{}
		for _, r := range v.counted {
			if r.campaign == campaign {
				out[r.seed] = r
			}
		}
		return out
	}
	rows := func() map[string]scoring.Agent {
		l, err := c.nodes[0].client.MeshLedger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]scoring.Agent{}
		for _, a := range l.Ledger.Agents {
			out[a.Agent] = a
		}
		return out
	}

	// (a) An honest campaign of two slots: on seed 0 lab3 outranks both honest labs on
	// attempts 1 and 2, on seed 1 both outrank it (the test picks the campaign so; the draw
	// is the slot's, not the lab's choice).
	const seeds = 2
	slotOf := func(id string, spec *agentspec.Spec, seed int) attest.Slot {
		return attest.Slot{Campaign: id, Task: tasks[0], Agent: spec.CID(), Seed: seed}
	}
	env, id := c.campaignWhere(1, "reopened", tasks, []*agentspec.Spec{constant}, seeds, time.Now().Add(time.Hour), func(id string) bool {
		for a := 1; a <= 2; a++ {
			s0, s1 := slotOf(id, constant, 0), slotOf(id, constant, 1)
			if !rank(s0, a, 2).Less(rank(s0, a, 0)) || !rank(s0, a, 2).Less(rank(s0, a, 1)) ||
				!rank(s1, a, 0).Less(rank(s1, a, 2)) || !rank(s1, a, 1).Less(rank(s1, a, 2)) {
				return false
			}
		}
		return true
	})
	if _, err := honest[1].client.PublishCampaign(ctx, env); err != nil {
		t.Fatal(err)
	}
	c.waitAllDone(honest, id, seeds)
	views := c.settle("both slots of the honest campaign counted", 60*time.Second, func(v ledgerView) bool { return len(counted(v, id)) == seeds })
	before, beforeRows := counted(views[0], id), rows()
	for seed, r := range before {
		if r.lab == liarLab || r.attempt > 2 {
			t.Fatalf("seed %d counts %+v: want an honest run of attempt 1 or 2", seed, r)
		}
	}

	dir := t.TempDir()
	witness := c.witnessOf(liar, id, honestLab)
	var late []string
	for seed := 0; seed < seeds; seed++ {
		env, rid, err := attest.NewClaimRecord(key, cert, slotOf(id, constant, seed), before[seed].attempt, witness, time.Now())
		late = append(late, writeEnvelope(t, dir, env, rid, err))
	}
	imported := time.Now()
	c.importInto(liar, dir)
	views = c.settle("seed 0 run again by an honest lab after lab3's late record", 90*time.Second, func(v ledgerView) bool {
		now := counted(v, id)
		return len(now) == seeds && now[0].attempt > before[0].attempt && v.excluded[before[0].id] == attest.ExcludeNotHolder
	})
	lease := 3 * time.Second // faultDaemonArgs' --lease
	for i, v := range views {
		name := c.nodes[i].lab.Name
		now := counted(v, id)
		if now[1].id != before[1].id {
			t.Errorf("%s: seed 1 counts %s, want the honest run %s that outranks lab3's record", name, now[1].id, before[1].id)
		}
		if r := now[0]; r.lab == liarLab || !slices.Contains([]string{c.nodes[0].peerID, c.nodes[1].peerID}, r.node) {
			t.Errorf("%s: seed 0 counts %+v, want an honest daemon's run", name, r)
		}
		listed := slices.ContainsFunc(v.unanswered, func(u attest.Unanswered) bool {
			return u.Principal == liarLab && u.Claim == late[0] && !u.Charged
		})
		if !listed || slices.ContainsFunc(v.unanswered, func(u attest.Unanswered) bool { return u.Claim == late[1] }) {
			t.Errorf("%s: unanswered %+v: want lab3's record of seed 0 listed against lab3 (not charged before the deadline) and not its outranked one of seed 1", name, v.unanswered)
		}
	}
	rerun := views[0].all[counted(views[0], id)[0].id]
	if start := runStart(t, c.nodes[0], rerun.id); start.Before(imported.Add(lease)) {
		t.Errorf("seed 0 ran again %s after lab3's record was imported, inside the lease (%s) it is held for lab3's node", start.Sub(imported), lease)
	}
	after := rows()
	if b, a := beforeRows["constant"], after["constant"]; a.Runs != b.Runs || !sameScore(a.NormalizedScore, b.NormalizedScore) || !sameScore(a.ValidSubmissionRate, b.ValidSubmissionRate) {
		t.Errorf("the honest agent's row moved: %+v, before the attack %+v", a, b)
	}
	t.Logf("(a) seed 0 taken by lab3's late record and run again by %s at attempt %d; seed 1 unchanged; root %.12s on all three", rerun.lab, rerun.attempt, views[0].root)

	// (b) A slot lab3 runs itself, while the honest nodes are busy.
	hold, _ := c.fillWithGatedRuns(honest, tasks)
	retried := &agentspec.Spec{Name: "retried", Version: "1.0.0", Command: constant.Command}
	env, tryID := c.campaignWhere(1, "second try", tasks, []*agentspec.Spec{retried}, 1, time.Now().Add(time.Hour), func(string) bool { return true })
	if _, err := honest[1].client.PublishCampaign(ctx, env); err != nil {
		t.Fatal(err)
	}
	s := slotOf(tryID, retried, 0)
	tw := c.witnessOf(liar, tryID, honestLab)
	dir = t.TempDir()
	env1, rid1, err := attest.NewClaimRecord(key, cert, s, 1, tw, time.Now())
	writeEnvelope(t, dir, env1, rid1, err)
	first := c.signRun(2, key, cert, s, 1, "first try", 0, tw, dir)
	c.importInto(liar, dir)
	testutil.WaitFor(t, 60*time.Second, "lab3's first try finishing its slot on the honest nodes", func() bool {
		return honest[0].campaignStatus(tryID).Done == 1 && honest[1].campaignStatus(tryID).Done == 1
	})
	views = c.settle("lab3's first try in every ledger", 60*time.Second, func(v ledgerView) bool {
		_, ok := v.all[first]
		return ok
	})
	t.Logf("lab3's first try: excluded %q", views[0].excluded[first])
	// A second node of lab3's whose ID is less than its daemon's: on one attempt the draw is
	// the lab's, and the node ID breaks the tie.
	var key2 crypto.PrivKey
	var cert2 *attest.NodeCert
	for tries := 0; key2 == nil; tries++ {
		if tries == 1000 {
			t.Fatal("no node key in 1000 with an ID less than lab3's daemon's")
		}
		if k, ct, nid := c.secondNode(2); nid < liar.peerID {
			key2, cert2 = k, ct
		}
	}
	dir = t.TempDir()
	env2, rid2, err := attest.NewClaimRecord(key2, cert2, s, 1, tw, time.Now())
	writeEnvelope(t, dir, env2, rid2, err)
	env3, rid3, err := attest.NewClaimRecord(key, cert, s, 2, tw, time.Now())
	writeEnvelope(t, dir, env3, rid3, err)
	second := c.signRun(2, key, cert, s, 2, "second try", 1, tw, dir)
	c.importInto(liar, dir)
	views = c.settle("neither of lab3's tries counts", 60*time.Second, func(v ledgerView) bool {
		return v.excluded[first] == attest.ExcludeNotHolder && v.excluded[second] != "" && len(counted(v, tryID)) == 0
	})
	for i, v := range views {
		if v.excluded[second] != attest.ExcludeLaterAttempt {
			t.Errorf("%s: lab3's second try excluded as %q, want %q (its own lab holds the lower attempt)", c.nodes[i].lab.Name, v.excluded[second], attest.ExcludeLaterAttempt)
		}
	}
	if r, ok := rows()["retried"]; ok && r.Runs > 0 {
		t.Errorf("lab3's tries give the agent a row: %+v", r)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	t.Logf("(b) lab3's first try (score 0) excluded as %q and its second (score 1) as %q on every node; root %.12s on all three",
		views[0].excluded[first], views[0].excluded[second], views[0].root)
}

// runStart is when run id started, as its attestation says, from node d's store.
func runStart(t *testing.T, d *daemonProc, id string) time.Time {
	t.Helper()
	envs, err := d.client.StoredEnvelopes(context.Background(), vstore.SetAttestations)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range envs {
		if attest.EnvelopeID(env) != id {
			continue
		}
		e, err := attest.DecodeEnvelope(env)
		if err != nil {
			t.Fatal(err)
		}
		if _, run, _, err := attest.DecodeStatement(e.Payload); err == nil && run != nil {
			return run.Start
		}
	}
	t.Fatalf("%s holds no run %s", d.lab.Name, id)
	return time.Time{}
}

package attest

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Two colluding labs and the unblock rule (unblockLaterAttempts; docs/design.md §9, "An
// empty cell by a late record"): colluder B signs, after runner A's attempt-1 run is out, a
// claim record of that attempt and a release of it. Where B's draw outranks A's on the
// attempt, B holds it, A's run is not the holder's, and A's run of attempt 2 counts: A
// re-rolled its result, and B, having answered its attempt by a release, is charged
// nothing. Where A's draw outranks B's, B's record holds nothing and A's first result
// stands, however late or often B signs. So B can void A's result only on the attempts the
// draw gives B — with one colluder, each attempt with probability 1/2, a run of k in a row
// with probability 2^-k — and every void leaves B's signed claim of an attempt another
// lab's node ran.
func TestCollusionReRollsOnlyWhereTheColluderOutranks(t *testing.T) {
	w := newAcceptWorld(t, 3)
	const a, b = 1, 2
	env, _, err := NewWitness(w.labs[a].node, w.labs[a].cert, claimCampaign, t0.Add(-3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	w.put("w1", env)
	at := t0.Add(-2 * time.Hour)
	bOutranks := func(seed int) bool {
		return RankOf(claimSlot(seed), 1, w.labs[b].lab.ID, w.labs[b].nodeID).Less(RankOf(claimSlot(seed), 1, w.labs[a].lab.ID, w.labs[a].nodeID))
	}
	seedOf := func(want bool) int {
		s := 0
		for bOutranks(s) != want {
			s++
		}
		return s
	}
	void, stands := seedOf(true), seedOf(false)
	for _, s := range []int{void, stands} {
		w.claim(sname("a-claim-1", s), a, s, 1, "w1", at)
		w.claimedRun(sname("a-run-1", s), a, s, 1, "w1", 0.1)
		w.claim(sname("b-claim-1", s), b, s, 1, "w1", at) // signed after A's run, dated as B likes
		w.release(sname("b-release-1", s), b, s, 1, ReleaseAbort)
		w.claim(sname("a-claim-2", s), a, s, 2, "w1", at)
		w.claimedRun(sname("a-run-2", s), a, s, 2, "w1", 0.9)
	}
	campaigns := map[string]CampaignWindow{claimCampaign: {Created: t0.Add(-4 * time.Hour), Deadline: t0, Lab: w.labs[0].lab.ID}}
	p := AcceptPolicy{RequireClaimRecords: true, RequireWitness: true, Campaigns: campaigns}
	o := Reconcile(w.verified(), Agree)
	results, excluded := Accept(o, p)
	var counted []string
	for _, r := range results {
		counted = append(counted, w.nameOf(r.AttestationID))
	}
	slices.Sort(counted)
	want := []string{sname("a-run-1", stands), sname("a-run-2", void)}
	slices.Sort(want)
	if !slices.Equal(counted, want) {
		why := map[string]ExcludeReason{}
		for _, e := range excluded {
			why[w.nameOf(e.ID)] = e.Reason
		}
		t.Fatalf("counted %v, want %v (excluded %v)", counted, want, why)
	}
	if u := o.UnansweredAttempts(p, t0.Add(time.Minute)); len(u) != 0 {
		t.Errorf("unanswered %+v: B released its attempt, so nothing is charged", u)
	}
}

func sname(name string, seed int) string { return fmt.Sprintf("%s@%d", name, seed) }

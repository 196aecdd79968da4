package attest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
)

var claimCampaign = EnvelopeID([]byte("claimed campaign"))

func claimSlot(seed int) Slot {
	return Slot{Campaign: claimCampaign, Task: "bafytask", Agent: "bafyagent", Seed: seed}
}

// claim signs lab's claim record of attempt of slot seed, citing the witness named cites.
func (w *acceptWorld) claim(name string, lab int, seed, attempt int, cites string, at time.Time) {
	w.t.Helper()
	env, _, err := NewClaimRecord(w.labs[lab].node, w.labs[lab].cert, claimSlot(seed), attempt, w.ids[cites], at)
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(name, env)
}

func (w *acceptWorld) release(name string, lab int, seed, attempt int, reason string) {
	w.t.Helper()
	env, _, err := NewReleaseRecord(w.labs[lab].node, w.labs[lab].cert, claimSlot(seed), attempt, reason, "", t0.Add(-time.Hour))
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(name, env)
}

// claimedRun signs lab's run of attempt of slot seed, citing the witness named cites.
func (w *acceptWorld) claimedRun(name string, lab, seed, attempt int, cites string, score float64) {
	w.t.Helper()
	p := runPredicate(w.labs[lab].nodeID, w.labs[lab].lab.ID, seed, score)
	p.Slot, p.Attempt, p.Witness = claimSlot(seed), attempt, w.ids[cites]
	w.putRun(name, lab, p, name)
}

// Claim and release records verify as the node and lab that signed them; one naming
// another node than its signer is refused.
func TestClaimRecordsVerifyAsTheirSigner(t *testing.T) {
	w := newAcceptWorld(t, 1)
	w.claim("claim", 0, 0, 1, "", t0.Add(-2*time.Hour))
	w.release("release", 0, 0, 1, ReleaseInfra)
	vs := w.verified()
	if len(vs) != 2 {
		t.Fatalf("verified %d of 2", len(vs))
	}
	for _, v := range vs {
		switch {
		case w.nameOf(v.ID) == "claim" && (v.Claim == nil || v.Claim.Attempt != 1 || v.Claim.Lab != w.labs[0].lab.ID || v.Counts):
			t.Errorf("claim verified as %+v", v)
		case w.nameOf(v.ID) == "release" && (v.Release == nil || v.Release.Reason != ReleaseInfra || v.Counts):
			t.Errorf("release verified as %+v", v)
		}
	}
	f := w.labs[0]
	d, _ := bundleDigest(claimCampaign)
	st, err := NewStatement([]Subject{{Name: "campaign", Digest: map[string]string{"sha256": d}}}, PredicateClaimV1,
		ClaimPredicate{Slot: claimSlot(0), Attempt: 1, Node: "12D3KooWsomeoneelse", Lab: f.lab.ID, Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWith(forged, w.trust, VerifyOptions{AtClaimedTime: true}); ReasonOf(err) != ReasonPredicateSigner {
		t.Fatalf("a claim naming another node: %v, want %s", err, ReasonPredicateSigner)
	}
	if _, _, err := NewReleaseRecord(f.node, f.cert, claimSlot(0), 1, "stale", "", t0); err == nil {
		t.Fatal("a release with an unknown reason was signed")
	}
	if _, _, err := NewClaimRecord(f.node, f.cert, claimSlot(0), 0, "", t0); err == nil {
		t.Fatal("a claim of attempt 0 was signed")
	}
}

// The holder of an attempt is fixed by who claimed it, not by anything the claimant picks:
// re-signing a claim at other times gives other IDs and the same holder, and a lab that
// outranks another does so whatever the order the records arrive in.
func TestAttemptHoldersRankByLabNotByChoice(t *testing.T) {
	w := newAcceptWorld(t, 3)
	for lab := range 3 {
		for i := range 8 { // re-signed variants: only the time differs
			w.claim(fmt.Sprintf("lab%d-%d", lab, i), lab, 0, 1, "", t0.Add(-time.Duration(i+1)*time.Minute))
		}
	}
	want := ""
	var best ClaimRank
	for lab := range 3 {
		r := RankOf(claimSlot(0), 1, w.labs[lab].lab.ID, w.labs[lab].nodeID)
		if want == "" || r.Less(best) {
			want, best = w.labs[lab].lab.ID, r
		}
	}
	vs := w.verified()
	for i := range 5 {
		slices.Reverse(vs)
		if i%2 == 1 {
			vs = append(vs[1:], vs[0])
		}
		h := AttemptHolders(vs, nil)
		got := h[Attempt{claimSlot(0), 1}]
		if len(h) != 1 || got == nil || got.Lab != want {
			t.Fatalf("holders %v: want lab %s", h, want)
		}
	}
	// The ranks of other attempts are drawn afresh: no lab ranks first everywhere.
	firsts := map[string]bool{}
	for a := 1; a <= 40; a++ {
		lab, best := "", ClaimRank{}
		for l := range 3 {
			if r := RankOf(claimSlot(0), a, w.labs[l].lab.ID, ""); lab == "" || r.Less(best) {
				lab, best = w.labs[l].lab.ID, r
			}
		}
		firsts[lab] = true
	}
	if len(firsts) != 3 {
		t.Errorf("over 40 attempts only %d labs rank first", len(firsts))
	}
	// Within one lab the node ID breaks the tie.
	a, b := RankOf(claimSlot(0), 1, "lab:x", "node-a"), RankOf(claimSlot(0), 1, "lab:x", "node-b")
	if !a.Less(b) || b.Less(a) {
		t.Error("within one lab the smaller node ID must hold")
	}
}

// TestAcceptRequiresTheClaimHolder: where claim records are required, a run counts only
// from the node that holds its slot's attempt by the records (pre-emption, docs/design.md
// §9).
func TestAcceptRequiresTheClaimHolder(t *testing.T) {
	w := newAcceptWorld(t, 3)
	witness := func(name string, lab int) {
		env, _, err := NewWitness(w.labs[lab].node, w.labs[lab].cert, claimCampaign, t0.Add(-3*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		w.put(name, env)
	}
	witness("w1", 1)
	witness("w0", 0) // the campaign's own lab's: no witness for it
	// Which of labs 1 and 2 outranks the other on attempt 1 of seed 1.
	r1 := RankOf(claimSlot(1), 1, w.labs[1].lab.ID, w.labs[1].nodeID)
	r2 := RankOf(claimSlot(1), 1, w.labs[2].lab.ID, w.labs[2].nodeID)
	better, worse := 1, 2
	if r2.Less(r1) {
		better, worse = 2, 1
	}
	at := t0.Add(-2 * time.Hour)
	// Seed 0: lab 1 claims and runs; lab 2 fabricates a run it never claimed (and
	// would win the cell's draw without the rule, or not: either way it must not count).
	w.claim("c0", 1, 0, 1, "w1", at)
	w.claimedRun("holder-run", 1, 0, 1, "w1", 0.4)
	w.claimedRun("fabricated", 2, 0, 1, "w1", 0.9)
	// Seed 1: both claim attempt 1 and run it; the better-ranked lab holds it.
	w.claim("c1-better", better, 1, 1, "w1", at)
	w.claim("c1-worse", worse, 1, 1, "w1", at.Add(-time.Hour)) // claiming earlier does not help
	w.claimedRun("outranked-run", worse, 1, 1, "w1", 0.9)
	w.claimedRun("better-run", better, 1, 1, "w1", 0.1)
	// Seed 2: lab 2's claim cites the campaign's own lab's witness: it holds nothing.
	w.claim("c2", 2, 2, 1, "w0", at)
	w.claimedRun("unwitnessed-claim-run", 2, 2, 1, "w1", 0.9)
	campaigns := map[string]CampaignWindow{claimCampaign: {Created: t0.Add(-4 * time.Hour), Deadline: t0, Lab: w.labs[0].lab.ID}}

	cases := []struct {
		name    string
		policy  AcceptPolicy
		counted []string
		notHeld []string
	}{
		{"claim records required", AcceptPolicy{RequireClaimRecords: true, RequireWitness: true, Campaigns: campaigns},
			[]string{"holder-run", "better-run"}, []string{"fabricated", "outranked-run", "unwitnessed-claim-run"}},
		{"without witnesses a claim needs none", AcceptPolicy{RequireClaimRecords: true, Campaigns: campaigns},
			[]string{"holder-run", "better-run", "unwitnessed-claim-run"}, []string{"fabricated", "outranked-run"}},
		{"rule off", AcceptPolicy{RequireWitness: true, Campaigns: campaigns}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			results, excluded := Accept(Reconcile(w.verified(), Agree), tc.policy)
			var counted, notHeld []string
			for _, r := range results {
				counted = append(counted, w.nameOf(r.AttestationID))
			}
			for _, e := range excluded {
				if e.Reason == ExcludeNotHolder {
					notHeld = append(notHeld, w.nameOf(e.ID))
				}
			}
			slices.Sort(counted)
			slices.Sort(notHeld)
			if tc.counted == nil { // rule off: nothing is excluded for want of a claim
				if len(notHeld) != 0 || len(results) != 3 {
					t.Fatalf("counted %v, not held %v: want one run per seed and no %q", counted, notHeld, ExcludeNotHolder)
				}
				return
			}
			slices.Sort(tc.counted)
			slices.Sort(tc.notHeld)
			if !slices.Equal(counted, tc.counted) || !slices.Equal(notHeld, tc.notHeld) {
				t.Fatalf("counted %v, not held %v; want %v and %v", counted, notHeld, tc.counted, tc.notHeld)
			}
		})
	}
}

// An attempt its holder neither ran nor released is listed against the holder's lab, and
// charged once the campaign's deadline has passed; a release by the holder answers it; a
// release of an attempt the node never claimed is proven misconduct.
func TestUnansweredAttemptsAndForgedReleases(t *testing.T) {
	w := newAcceptWorld(t, 3)
	at := t0.Add(-2 * time.Hour)
	w.claim("silent", 1, 0, 1, "", at)
	w.claim("released", 1, 1, 1, "", at)
	w.release("holder-release", 1, 1, 1, ReleaseInfra)
	w.claim("ran", 2, 2, 1, "", at)
	w.claimedRun("run", 2, 2, 1, "", 0.5)
	w.release("forged", 0, 3, 1, ReleaseInfra) // lab 0 never claimed seed 3
	campaigns := map[string]CampaignWindow{claimCampaign: {Created: t0.Add(-4 * time.Hour), Deadline: t0, Lab: w.labs[0].lab.ID}}
	p := AcceptPolicy{RequireClaimRecords: true, Campaigns: campaigns}
	o := Reconcile(w.verified(), Agree)
	for _, tc := range []struct {
		now     time.Time
		charged bool
	}{{t0.Add(-time.Minute), false}, {t0.Add(time.Minute), true}, {time.Time{}, false}} {
		u := o.UnansweredAttempts(p, tc.now)
		if len(u) != 1 || w.nameOf(u[0].Claim) != "silent" || u[0].Principal != w.labs[1].lab.ID || u[0].Charged != tc.charged {
			t.Fatalf("at %s: unanswered %+v: want the silent claim of lab 1, charged %v", tc.now, u, tc.charged)
		}
	}
	var forged []string
	for _, m := range ProvenMisconduct(o) {
		if m.Kind == MisconductForgedRelease {
			forged = append(forged, w.nameOf(m.Evidence))
			if m.Principal != w.labs[0].lab.ID {
				t.Errorf("forged release charged to %s, want lab 0", m.Principal)
			}
		}
	}
	if !slices.Equal(forged, []string{"forged"}) {
		t.Fatalf("forged releases %v: want [forged] (the holder's own release is none)", forged)
	}
	// The consequence: the forger's runs are set aside.
	w.claim("c-forger", 0, 4, 1, "", at)
	w.claimedRun("forger-run", 0, 4, 1, "", 0.7)
	_, excluded := Accept(Reconcile(w.verified(), Agree), AcceptPolicy{RequireClaimRecords: true, Campaigns: campaigns, SetAsideOffenders: true})
	if !slices.ContainsFunc(excluded, func(e Excluded) bool { return w.nameOf(e.ID) == "forger-run" && e.Reason == ExcludeOffender }) {
		t.Fatalf("excluded %+v: the forger's run must be set aside", excluded)
	}
}

func fuzzRecordSeeds(f *testing.F, predicateType string, pred any) {
	d, _ := bundleDigest(claimCampaign)
	stmt, _ := NewStatement([]Subject{{Name: "campaign", Digest: map[string]string{"sha256": d}}}, predicateType, pred)
	f.Add(stmt)
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"c","digest":{"sha256":"` + d + `"}}],"predicateType":"` + predicateType + `","predicate":{}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
}

func FuzzDecodeClaimRecord(f *testing.F) {
	fuzzRecordSeeds(f, PredicateClaimV1, ClaimPredicate{Slot: claimSlot(1), Attempt: 2, Node: "n", Lab: "lab:x", Witness: "bafyw", Time: t0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeClaimRecord(b)
		if err != nil {
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("accepted a claim record that does not validate: %v", err)
		}
	})
}

func FuzzDecodeReleaseRecord(f *testing.F) {
	fuzzRecordSeeds(f, PredicateReleaseV1, ReleasePredicate{Slot: claimSlot(1), Attempt: 2, Node: "n", Lab: "lab:x", Reason: ReleaseAbort, Time: t0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReleaseRecord(b)
		if err != nil {
			return
		}
		if err := r.validate(); err != nil {
			t.Fatalf("accepted a release record that does not validate: %v", err)
		}
	})
}

// BenchmarkAttemptHolders: the holders of 10,000 attempts, each claimed by two labs (what a
// ledger of 10,000 runs with one claim race in two computes on every recomputation), and
// the size of one signed claim record (the synced set grows by one per run).
func BenchmarkAttemptHolders(b *testing.B) {
	w := newAcceptWorld(b, 2)
	env, _, err := NewClaimRecord(w.labs[0].node, w.labs[0].cert, claimSlot(0), 1, EnvelopeID([]byte("w")), t0)
	if err != nil {
		b.Fatal(err)
	}
	const n = 10000
	claims := make([]*Verified, 0, 2*n)
	for i := range n {
		for lab := range 2 {
			f := w.labs[lab]
			claims = append(claims, &Verified{ID: fmt.Sprint(i, lab), Node: f.nodeID, Lab: f.lab.ID,
				Claim: &ClaimPredicate{Slot: claimSlot(i), Attempt: 1, Node: f.nodeID, Lab: f.lab.ID, Time: t0}})
		}
	}
	b.ResetTimer()
	for range b.N {
		if h := AttemptHolders(claims, nil); len(h) != n {
			b.Fatalf("%d holders", len(h))
		}
	}
	b.ReportMetric(float64(len(env)), "record-bytes")
}

// A run that does not hold its attempt blocks its lab's run of a later attempt of the slot
// only where its own lab holds that attempt. An honest lab whose run of attempt 1 finished
// just as another lab's better-ranked record of it arrived (a race under load, seen in
// TestDishonestLabCannotPreemptByRecord) has its attempt-2 run counted, so the cell is not
// left empty; a lab that outranks its own run from a second node (to withdraw a result
// and run the slot again) still has only its lowest attempt considered, so it cannot
// re-roll.
func TestOutrankedRunDoesNotBlockItsLabsNextAttempt(t *testing.T) {
	w := newAcceptWorld(t, 3)
	env, _, err := NewWitness(w.labs[1].node, w.labs[1].cert, claimCampaign, t0.Add(-3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	w.put("w1", env)
	at := t0.Add(-2 * time.Hour)
	// Seed s: lab 2's draw outranks lab 1's on attempt 1.
	s := 0
	for !RankOf(claimSlot(s), 1, w.labs[2].lab.ID, w.labs[2].nodeID).Less(RankOf(claimSlot(s), 1, w.labs[1].lab.ID, w.labs[1].nodeID)) {
		s++
	}
	w.claim("raced-claim", 1, s, 1, "w1", at)
	w.claimedRun("raced-run", 1, s, 1, "w1", 0.9)
	w.claim("squat", 2, s, 1, "w1", at) // never run: lab 2 just takes the attempt
	w.claim("retry-claim", 1, s, 2, "w1", at)
	w.claimedRun("retry-run", 1, s, 2, "w1", 0.8)

	// Seed s+1: lab 1 outranks its own run of attempt 1 from a second node whose ID sorts
	// first, then runs attempt 2.
	own := s + 1
	var key crypto.PrivKey
	var id string
	for key == nil || id >= w.labs[1].nodeID {
		key, id = newNode(t)
	}
	cert, err := w.labs[1].lab.Certify(id, t0.Add(-24*time.Hour), 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w.claim("own-claim", 1, own, 1, "w1", at)
	w.claimedRun("unwanted-run", 1, own, 1, "w1", 0.1)
	env, _, err = NewClaimRecord(key, cert, claimSlot(own), 1, w.ids["w1"], at)
	if err != nil {
		t.Fatal(err)
	}
	w.put("self-outrank", env)
	w.claim("reroll-claim", 1, own, 2, "w1", at)
	w.claimedRun("reroll-run", 1, own, 2, "w1", 0.9)

	campaigns := map[string]CampaignWindow{claimCampaign: {Created: t0.Add(-4 * time.Hour), Deadline: t0, Lab: w.labs[0].lab.ID}}
	results, excluded := Accept(Reconcile(w.verified(), Agree), AcceptPolicy{RequireClaimRecords: true, RequireWitness: true, Campaigns: campaigns})
	var counted []string
	for _, r := range results {
		counted = append(counted, w.nameOf(r.AttestationID))
	}
	why := map[string]ExcludeReason{}
	for _, e := range excluded {
		why[w.nameOf(e.ID)] = e.Reason
	}
	if !slices.Equal(counted, []string{"retry-run"}) {
		t.Errorf("counted %v, want only retry-run (excluded: %v)", counted, why)
	}
	for name, want := range map[string]ExcludeReason{"raced-run": ExcludeNotHolder, "unwanted-run": ExcludeNotHolder, "reroll-run": ExcludeLaterAttempt} {
		if why[name] != want {
			t.Errorf("%s excluded as %q, want %q", name, why[name], want)
		}
	}

	// Where a run needs another lab's re-score, the one of the attempt that counts in place of
	// the lower one is its vote: Reconcile had filed it as an orphan, and retry-run never
	// counted (too few replicators), on every node.
	w.rescore("retry-rescore", 0, "retry-run", 0.8)
	o := Reconcile(w.verified(), Agree)
	policy := AcceptPolicy{RequireClaimRecords: true, RequireWitness: true, Campaigns: campaigns, Replication: 1}
	results, excluded = Accept(o, policy)
	if len(results) != 1 || w.nameOf(results[0].AttestationID) != "retry-run" {
		t.Errorf("with replication 1: counted %v, excluded %v; want retry-run, confirmed by lab 0", results, excluded)
	}
	if u := o.WithUnblockedAttempts(policy); len(u.Orphans) != 0 || len(u.Rescores[w.ids["retry-run"]]) != 1 {
		t.Errorf("retry-run's re-score: %d orphans, %d agreeing; want it filed with its run", len(u.Orphans), len(u.Rescores[w.ids["retry-run"]]))
	}
}

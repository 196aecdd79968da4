package attest

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/scoring"
)

// signRunWith signs a run of seed with submission after edit changes its predicate.
func (f *fixture) signRunWith(t *testing.T, seed int, submission string, edit func(p *RunPredicate)) ([]byte, string) {
	t.Helper()
	p := runPredicate(f.nodeID, f.lab.ID, seed, 0.5)
	edit(&p)
	st, err := NewStatement(runSubjects(submission), PredicateRunV1, p)
	if err != nil {
		t.Fatal(err)
	}
	env, id, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	return env, id
}

func attempt(n int) func(*RunPredicate) { return func(p *RunPredicate) { p.Attempt = n } }

func excludedBy(ex []Excluded) map[string]ExcludeReason {
	m := map[string]ExcludeReason{}
	for _, e := range ex {
		m[e.ID] = e.Reason
	}
	return m
}

func TestAttemptsAreNotEquivocation(t *testing.T) {
	f := newFixture(t)
	// An old envelope (no attempt: attempt 1) and a retry (attempt 2) with another submission.
	old, oldID := f.signRunWith(t, 0, "first try", func(p *RunPredicate) {})
	retry, retryID := f.signRunWith(t, 0, "second try", attempt(2))
	third, thirdID := f.signRunWith(t, 0, "third try", attempt(3))
	vs := mustVerify(t, f, old, retry, third)
	for _, order := range [][]*Verified{vs, {vs[2], vs[1], vs[0]}} {
		o := Reconcile(order, within(1e-9))
		if len(o.Equivocations) != 0 {
			t.Fatalf("attempts 1, 2 and 3 with different submissions are not equivocation: %+v", o.Equivocations)
		}
		if got := ids(o.Runs); !slices.Equal(got, []string{oldID}) {
			t.Fatalf("counted %v, want attempt 1 (%s) only", got, oldID)
		}
		want := []string{retryID, thirdID}
		slices.Sort(want)
		if got := ids(o.LaterAttempts); !slices.Equal(got, want) {
			t.Fatalf("later attempts %v, want %v", got, want)
		}
		results, ex := Accept(o, AcceptPolicy{})
		if len(results) != 1 || results[0].AttestationID != oldID {
			t.Fatalf("results %+v", results)
		}
		if r := excludedBy(ex); r[retryID] != ExcludeLaterAttempt || r[thirdID] != ExcludeLaterAttempt {
			t.Fatalf("excluded %+v", ex)
		}
	}
}

// The lowest attempt counts whatever its outcome: a lab cannot re-run a slot until it likes
// the score (no best of N).
func TestLowestAttemptCountsEvenIfWorse(t *testing.T) {
	f := newFixture(t)
	bad, badID := f.signRunWith(t, 0, "failed", func(p *RunPredicate) {
		p.Attempt, p.Valid, p.Score, p.InvalidReason = 1, false, nil, "no submission"
	})
	good, _ := f.signRunWith(t, 0, "great", func(p *RunPredicate) { p.Attempt, p.Score = 2, ptr(1) })
	o := Reconcile(mustVerify(t, f, good, bad), within(1e-9))
	results, _ := Accept(o, AcceptPolicy{})
	if len(results) != 1 || results[0].AttestationID != badID || results[0].Score != nil {
		t.Fatalf("results %+v, want the failed first attempt %s", results, badID)
	}
}

// Equivocation is two submissions for one (slot, lab, attempt); it forfeits every attempt of
// the slot, or equivocating on attempt 1 would buy a re-roll.
func TestEquivocationWithinAnAttempt(t *testing.T) {
	f := newFixture(t)
	a, aID := f.signRunWith(t, 0, "answer A", attempt(1))
	b, bID := f.signRunWith(t, 0, "answer B", attempt(1))
	c, cID := f.signRunWith(t, 0, "answer C", attempt(2))
	o := Reconcile(mustVerify(t, f, a, b, c), within(1e-9))
	if len(o.Equivocations) != 1 || o.Equivocations[0].Attempt != 1 {
		t.Fatalf("evidence %+v, want one pair in attempt 1", o.Equivocations)
	}
	if e := o.Equivocations[0]; !(e.A == min(aID, bID) && e.B == max(aID, bID)) {
		t.Fatalf("evidence names %s and %s, want %s and %s", e.A, e.B, aID, bID)
	}
	if len(o.Runs) != 0 || !slices.Equal(ids(o.Forfeited), []string{cID}) {
		t.Fatalf("runs %v forfeited %v, want none counted and %s forfeited", ids(o.Runs), ids(o.Forfeited), cID)
	}
	results, ex := Accept(o, AcceptPolicy{})
	if r := excludedBy(ex); len(results) != 0 || r[aID] != ExcludeEquivocation || r[bID] != ExcludeEquivocation || r[cID] != ExcludeEquivocation {
		t.Fatalf("results %+v excluded %+v", results, ex)
	}
	// The same submission twice in one attempt is a duplicate, as before.
	a2, a2ID := f.signRunWith(t, 0, "answer A", func(p *RunPredicate) { p.Attempt, p.WallSeconds = 1, 3599 })
	o = Reconcile(mustVerify(t, f, a, a2), within(1e-9))
	if len(o.Equivocations) != 0 || len(o.Runs) != 1 || len(o.Duplicates) != 1 || o.Runs[0].ID != min(aID, a2ID) {
		t.Fatalf("same submission re-signed: %+v", o)
	}
}

func TestCampaignWindow(t *testing.T) {
	f := newFixture(t) // runPredicate runs t0-2h … t0-1h
	created, deadline := t0.Add(-3*time.Hour), t0
	in, inID := f.signRun(t, 0, "in", 0.5)
	early, earlyID := f.signRunWith(t, 1, "early", func(p *RunPredicate) { p.Start = created.Add(-time.Second) })
	late, lateID := f.signRunWith(t, 2, "late", func(p *RunPredicate) { p.End = deadline.Add(time.Second) })
	other, otherID := f.signRunWith(t, 3, "other", func(p *RunPredicate) { p.Slot.Campaign = "bafyunknown" })
	edge, edgeID := f.signRunWith(t, 4, "edge", func(p *RunPredicate) { p.Start, p.End = created, deadline })
	o := Reconcile(mustVerify(t, f, in, early, late, other, edge), within(1e-9))

	results, ex := Accept(o, AcceptPolicy{Campaigns: map[string]CampaignWindow{"bafycampaign": {Created: created, Deadline: deadline}}})
	var got []string
	for _, r := range results {
		got = append(got, r.AttestationID)
	}
	want := []string{inID, edgeID}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("counted %v, want %v (inside, and exactly at the window's ends)", got, want)
	}
	r := excludedBy(ex)
	if r[earlyID] != ExcludeOutsideCampaign || r[lateID] != ExcludeOutsideCampaign || r[otherID] != ExcludeUnknownCampaign {
		t.Fatalf("excluded %+v", ex)
	}
	// Without windows nothing is checked.
	if results, _ := Accept(o, AcceptPolicy{}); len(results) != 5 {
		t.Fatalf("no windows given: %d results, want 5", len(results))
	}
	// BuildLedger takes the windows as LedgerInput.Campaigns.
	_, rep, err := BuildLedger(LedgerInput{Trust: f.trust, Tasks: []scoring.TaskInfo{{Name: "bafytask", Optimum: 1, SOTA: 0.95}},
		Scoring: scoring.Options{BootstrapRounds: 5}, Envelopes: []EnvelopeFile{{Name: "early.json", Data: early}, {Name: "in.json", Data: in}},
		Campaigns: map[string]CampaignWindow{"bafycampaign": {Created: created, Deadline: deadline}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counted != 1 || len(rep.Excluded) != 1 || rep.Excluded[0].Reason != ExcludeOutsideCampaign || !strings.Contains(rep.Excluded[0].Detail, "campaign bafycampaign runs") {
		t.Fatalf("ledger report %+v", rep)
	}
}

func TestAcceptCountsOnlyIsolatedRunsByDefault(t *testing.T) {
	f := newFixture(t)
	contained, cID := f.signRun(t, 0, "docker", 0.5)
	process, pID := f.signRunWith(t, 1, "process", func(p *RunPredicate) {
		p.Executor = &ExecutorInfo{Name: "process", Isolation: IsolationProcess, Limits: "rlimit"}
	})
	old, oldID := f.signRunWith(t, 2, "old", func(p *RunPredicate) { p.Executor = nil })
	o := Reconcile(mustVerify(t, f, contained, process, old), within(1e-9))
	results, ex := Accept(o, AcceptPolicy{})
	if len(results) != 1 || results[0].AttestationID != cID {
		t.Fatalf("default policy counted %+v, want only the container run", results)
	}
	r := excludedBy(ex)
	if r[pID] != ExcludeNotIsolated || r[oldID] != ExcludeNotIsolated {
		t.Fatalf("excluded %+v", ex)
	}
	for _, e := range ex {
		if e.ID == pID && !strings.Contains(e.Detail, `isolation "process"`) {
			t.Fatalf("detail %q does not say the isolation", e.Detail)
		}
	}
	if results, ex := Accept(o, AcceptPolicy{AllowProcessRuns: true}); len(results) != 3 || len(ex) != 0 {
		t.Fatalf("AllowProcessRuns: %d results %+v", len(results), ex)
	}
}

// A network requiring enforced limits does not count a run whose executor says it applied
// none (a rootless engine on cgroup v1), nor one that does not say.
func TestAcceptRequireEnforcedLimits(t *testing.T) {
	f := newFixture(t)
	limited, lID := f.signRunWith(t, 0, "docker", func(p *RunPredicate) {
		p.Executor = &ExecutorInfo{Name: "docker", Isolation: IsolationContainer, Limits: "cgroup1", Engine: "podman 4.3.1"}
	})
	unlimited, uID := f.signRunWith(t, 1, "rootless", func(p *RunPredicate) {
		p.Executor = &ExecutorInfo{Name: "docker", Isolation: IsolationContainer, Limits: "none", Engine: "podman 4.3.1"}
	})
	silent, sID := f.signRunWith(t, 2, "silent", func(p *RunPredicate) {
		p.Executor = &ExecutorInfo{Name: "docker", Isolation: IsolationContainer}
	})
	o := Reconcile(mustVerify(t, f, limited, unlimited, silent), within(1e-9))
	if results, ex := Accept(o, AcceptPolicy{}); len(results) != 3 || len(ex) != 0 {
		t.Fatalf("default policy: %d results %+v, want all 3", len(results), ex)
	}
	results, ex := Accept(o, AcceptPolicy{RequireEnforcedLimits: true})
	if len(results) != 1 || results[0].AttestationID != lID {
		t.Fatalf("RequireEnforcedLimits counted %+v, want only the limited run", results)
	}
	r := excludedBy(ex)
	if r[uID] != ExcludeUnlimited || r[sID] != ExcludeUnlimited {
		t.Fatalf("excluded %+v", ex)
	}
	for _, e := range ex {
		if e.ID == uID && !strings.Contains(e.Detail, `engine "podman 4.3.1"`) {
			t.Fatalf("detail %q does not name the engine", e.Detail)
		}
	}
}

// The fast decoder reads the executor, build and attempt fields (new runs all carry them).
func TestFastDecoderReadsExecutorBuildAttempt(t *testing.T) {
	f := newFixture(t)
	p := runPredicate(f.nodeID, f.lab.ID, 0, 0.5)
	p.Attempt = 3
	p.Build = &BuildInfo{Module: "github.com/evalmesh/evalmesh", Version: "v0.1.0", Revision: "abc123", Modified: true}
	p.Executor.SeparateUID = true
	p.Executor.Engine, p.Executor.Partition, p.Executor.Node = "podman 4.3.1", "gpu", "node-7"
	st, err := NewStatement(runSubjects("x"), PredicateRunV1, p)
	if err != nil {
		t.Fatal(err)
	}
	_, run, _, ok := fastStatement(st)
	if !ok {
		t.Fatal("fast path declined an ordinary run statement")
	}
	_, ref, _, err := decodeStatementReference(st)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(run, ref) || run.Attempt != 3 || *run.Build != *p.Build || *run.Executor != *p.Executor {
		t.Fatalf("fast %+v\nreference %+v", run, ref)
	}
}

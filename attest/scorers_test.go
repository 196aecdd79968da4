package attest

import (
	"slices"
	"strings"
	"testing"
)

// unscored signs lab's run of the slot without a score (RunPredicate.ScoreAbsent), as a
// runner without labels does.
func (w *acceptWorld) unscored(name string, lab, seed int, submission string) {
	w.t.Helper()
	f := w.labs[lab]
	p := runPredicate(f.nodeID, f.lab.ID, seed, 0)
	p.Valid, p.Score, p.ScoreAbsent = false, nil, true
	w.putRun(name, lab, p, submission)
}

// Runners without labels: labs 1 and 2 score bafytask, lab 0 runs it. The run counts with
// the scoring labs' verdict once a majority of them agree (the lower median of their
// scores), never with a score of the runner's own; a scoring lab's run never counts, and
// another lab's re-score is no verdict.
func TestAcceptScorersVerdict(t *testing.T) {
	w := newAcceptWorld(t, 4)
	scorers := sortedIDs(w.labs[1].lab.ID, w.labs[2].lab.ID)
	pol := AcceptPolicy{Replication: 1, Scorers: map[string][]string{"bafytask": scorers}}

	w.unscored("run", 0, 0, "s0")
	w.rescore("v1", 1, "run", 0.8)
	w.rescore("outsider", 3, "run", 1.0) // lab 3 holds no key: its re-score is no verdict
	res, exc := Accept(Reconcile(w.verified(), Agree), pol)
	if len(res) != 0 || len(exc) != 1 || exc[0].Reason != ExcludeUnscored || !strings.Contains(exc[0].Detail, "1 of 2 scoring labs agree, 2 needed") {
		t.Fatalf("one verdict of two: results %+v excluded %+v", res, exc)
	}
	w.rescore("v2", 2, "run", 0.8)
	o := Reconcile(w.verified(), Agree)
	if len(o.Disagreements) != 0 || len(o.Rescores) != 0 {
		t.Fatalf("verdicts are neither confirmations nor disagreements: %+v %+v", o.Rescores, o.Disagreements)
	}
	if m := ProvenMisconduct(o); len(m) != 0 {
		t.Fatalf("misconduct %+v", m)
	}
	res, exc = Accept(o, pol)
	if len(res) != 1 || res[0].Score == nil || *res[0].Score != 0.8 || w.nameOf(res[0].AttestationID) != "run" || len(exc) != 0 {
		t.Fatalf("two agreeing verdicts: results %+v excluded %+v", res, exc)
	}

	// A key holder's run and a runner's self-scored run do not count, whatever re-scores say.
	w.run("holder-run", 1, "bafytask", "bafyagent", 1, "s1", 1.0, 1)
	w.rescore("holder-ok", 2, "holder-run", 1.0)
	w.run("self-scored", 3, "bafytask", "bafyagent", 2, "s2", 1.0, 1)
	w.rescore("self-ok1", 1, "self-scored", 1.0)
	w.rescore("self-ok2", 2, "self-scored", 1.0)
	res, exc = Accept(Reconcile(w.verified(), Agree), pol)
	if len(res) != 1 {
		t.Fatalf("results %+v", res)
	}
	why := map[string]ExcludeReason{}
	for _, e := range exc {
		why[w.nameOf(e.ID)] = e.Reason
	}
	if why["holder-run"] != ExcludeScorerRan || why["self-scored"] != ExcludeRunnerScored {
		t.Fatalf("excluded %v", why)
	}

	// Without the policy (an older document), an unscored run counts for nothing.
	_, exc = Accept(Reconcile(w.verified(), Agree), AcceptPolicy{})
	for _, e := range exc {
		if w.nameOf(e.ID) == "run" && e.Reason != ExcludeUnscored {
			t.Fatalf("unscored run without scorers: %+v", e)
		}
	}
}

// Three scoring labs: two agreeing verdicts decide against a third; a lab that signed
// verdicts both ways has none; an invalid verdict gives an invalid result.
func TestScorersMajority(t *testing.T) {
	w := newAcceptWorld(t, 4)
	scorers := sortedIDs(w.labs[1].lab.ID, w.labs[2].lab.ID, w.labs[3].lab.ID)
	w.unscored("run", 0, 0, "s0")
	w.rescore("a", 1, "run", 0.50)
	w.rescore("b", 2, "run", 0.50)
	w.rescore("c", 3, "run", 0.99)
	o := Reconcile(w.verified(), Agree)
	d := o.Verdict(w.ids["run"], scorers, 0)
	if !d.Decided || *d.Score != 0.5 || len(d.For) != 2 || len(d.Against) != 1 || d.Against[0] != w.labs[3].lab.ID {
		t.Fatalf("verdict %+v", d)
	}
	w.rescore("a2", 1, "run", 0.99) // lab 1 hedges: its verdicts no longer count
	d = Reconcile(w.verified(), Agree).Verdict(w.ids["run"], scorers, 0)
	if d.Decided || len(d.Hedged) != 1 || d.Hedged[0] != w.labs[1].lab.ID {
		t.Fatalf("hedged verdict %+v", d)
	}
	if n := ScorersNeeded(3, 3); n != 3 {
		t.Fatalf("replication 3 of 3 scorers needs %d", n)
	}
	if n := ScorersNeeded(1, 2); n != 1 {
		t.Fatalf("one scoring lab needs %d", n)
	}

	w2 := newAcceptWorld(t, 2)
	w2.unscored("run", 0, 0, "s0")
	w2.rescore("bad", 1, "run", -1)
	res, _ := Accept(Reconcile(w2.verified(), Agree), AcceptPolicy{Scorers: map[string][]string{"bafytask": {w2.labs[1].lab.ID}}})
	if len(res) != 1 || res[0].Score != nil || !strings.HasPrefix(res[0].Status, StatusInvalid) {
		t.Fatalf("invalid verdict: %+v", res)
	}
}

// A run predicate with score_absent cannot also carry a score or validity; it needs no
// invalid_reason. The fast decoder leaves such runs to encoding/json, so both read them alike.
func TestScoreAbsentPredicate(t *testing.T) {
	f := newFixture(t)
	p := runPredicate(f.nodeID, f.lab.ID, 0, 0.5)
	p.ScoreAbsent = true
	if err := p.validate(); err == nil {
		t.Fatal("score_absent with a score validated")
	}
	p.Valid, p.Score = false, nil
	if err := p.validate(); err != nil {
		t.Fatal(err)
	}
	st, err := NewStatement(runSubjects("s"), PredicateRunV1, p)
	if err != nil {
		t.Fatal(err)
	}
	_, run, _, err := DecodeStatement(st)
	if err != nil || run == nil || !run.ScoreAbsent {
		t.Fatalf("decoded %+v, %v", run, err)
	}
	if _, _, _, ok := fastStatement(st); ok {
		t.Fatal("the fast decoder read a score_absent run (it does not know the field)")
	}
}

func sortedIDs(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// An outvoted scorer is misconduct: lab 3 signs a false verdict on a run two other scoring
// labs agree on; under ledger.misconduct its own results (a run of another task) are set
// aside. With the verdict undecided (one against one) nobody is proven.
func TestOutvotedScorerIsMisconduct(t *testing.T) {
	w := newAcceptWorld(t, 4)
	scorers := sortedIDs(w.labs[1].lab.ID, w.labs[2].lab.ID, w.labs[3].lab.ID)
	pol := AcceptPolicy{Scorers: map[string][]string{"bafytask": scorers}, SetAsideOffenders: true}
	w.unscored("run", 0, 0, "s0")
	w.run("lab3-own", 3, "bafyother", "bafyagent", 0, "o3", 0.7, 1)
	w.rescore("a", 1, "run", 0.50)
	w.rescore("c", 3, "run", 0.01) // lab 3 vetoes with a false verdict
	o := Reconcile(w.verified(), Agree)
	if m := ScorerMisconduct(o, pol); len(m) != 0 {
		t.Fatalf("undecided verdict (1 against 1) proves nothing: %+v", m)
	}
	w.rescore("b", 2, "run", 0.50)
	o = Reconcile(w.verified(), Agree)
	m := ScorerMisconduct(o, pol)
	if len(m) != 1 || m[0].Principal != w.labs[3].lab.ID || m[0].Kind != MisconductOverruled || w.nameOf(m[0].Evidence) != "c" || w.nameOf(m[0].Run) != "run" {
		t.Fatalf("outvoted scorer: %+v", m)
	}
	res, exc := Accept(o, pol)
	why := map[string]ExcludeReason{}
	for _, e := range exc {
		why[w.nameOf(e.ID)] = e.Reason
	}
	if len(res) != 1 || w.nameOf(res[0].AttestationID) != "run" || why["lab3-own"] != ExcludeOffender {
		t.Fatalf("results %+v excluded %v", res, why)
	}
	// Without ledger.scorers the verdicts decide nothing and prove nothing.
	if m := ScorerMisconduct(o, AcceptPolicy{}); len(m) != 0 {
		t.Fatalf("no policy: %+v", m)
	}
}

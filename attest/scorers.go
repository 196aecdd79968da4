package attest

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/evalmesh/evalmesh/scoring"
)

// Runners without labels (docs/attestation-format.md "Unscored runs", docs/design.md §9
// "Fabricated runs"). A network document may name, for a sealed task bundle, the labs that
// score it (AcceptPolicy.Scorers): only they are granted its key, and they do not run its
// slots. A lab that holds no key runs the slot and signs the run with ScoreAbsent (the
// submission, no score); each scoring lab re-scores the submission against its labels,
// and the result is what a majority of the scoring labs found. A runner cannot fabricate a
// perfect submission without the labels, and a key holder cannot run.

// ScorerVerdict is the scoring labs' verdict on one run that signed no score.
type ScorerVerdict struct {
	// Valid, Score and Metric are the verdict; Score is the lower median of the agreeing
	// labs' scores (nil when not valid).
	Valid  bool
	Score  *float64
	Metric string
	// For are the scoring labs whose verdicts agree with it, sorted; Against those whose
	// verdicts do not; Hedged those that signed verdicts disagreeing with each other (none
	// of theirs count). Need is how many must agree, Of how many labs score the task.
	For, Against, Hedged []string
	Need, Of             int
	// Decided: at least Need scoring labs agree.
	Decided bool
}

// ScorersNeeded is how many of n scoring labs must agree on a run's verdict: a majority of
// them, and at least the network's replication where it asks for more (never more than n).
func ScorersNeeded(n, replication int) int {
	return max(n/2+1, min(replication, n))
}

// Verdict is the verdict of the labs scorers (lab IDs) on the run id, which signed no score:
// one verdict per scoring lab (a lab's least-ID re-score; a lab whose re-scores disagree
// with each other has none), the verdict most of them agree with (ties: the least lab ID
// among its supporters'), decided when at least ScorersNeeded agree. Re-scores by other
// labs are not verdicts: they hold no key. Pure.
func (o Outcome) Verdict(id string, scorers []string, replication int) ScorerVerdict {
	run := o.run(id)
	v := ScorerVerdict{Of: len(scorers), Need: ScorersNeeded(len(scorers), replication)}
	if run == nil {
		return v
	}
	byLab := map[string][]*Verified{}
	for _, r := range o.Verdicts[id] {
		if p := r.Principal(); slices.Contains(scorers, p) && r.Rescore.Metric == run.Run.Metric {
			byLab[p] = append(byLab[p], r)
		}
	}
	type labVerdict struct {
		lab string
		rs  *RescorePredicate
	}
	var vs []labVerdict
	for _, lab := range slices.Sorted(maps.Keys(byLab)) {
		rs := byLab[lab]
		slices.SortFunc(rs, func(a, b *Verified) int { return cmp.Compare(a.ID, b.ID) })
		if slices.ContainsFunc(rs[1:], func(x *Verified) bool { return !sameVerdict(rs[0].Rescore, x.Rescore) }) {
			v.Hedged = append(v.Hedged, lab)
			continue
		}
		vs = append(vs, labVerdict{lab, rs[0].Rescore})
	}
	best, bestFor := -1, []string(nil)
	for i, a := range vs {
		var agree []string
		for _, b := range vs {
			if sameVerdict(a.rs, b.rs) {
				agree = append(agree, b.lab)
			}
		}
		if len(agree) > len(bestFor) {
			best, bestFor = i, agree
		}
	}
	if best < 0 {
		return v
	}
	b := vs[best].rs
	v.Valid, v.Metric, v.For = b.Valid, b.Metric, bestFor
	for _, x := range vs {
		if !slices.Contains(bestFor, x.lab) {
			v.Against = append(v.Against, x.lab)
		}
	}
	if b.Valid {
		var scores []float64
		for _, x := range vs {
			if slices.Contains(bestFor, x.lab) {
				scores = append(scores, *x.rs.Score)
			}
		}
		slices.Sort(scores)
		s := scores[(len(scores)-1)/2]
		v.Score = &s
	}
	v.Decided = len(v.For) >= v.Need
	return v
}

// sameVerdict: two re-scores of one submission agree (metric, validity, and scores within
// the metric's tolerance when valid).
func sameVerdict(a, b *RescorePredicate) bool {
	if a.Metric != b.Metric || a.Valid != b.Valid {
		return false
	}
	if !a.Valid {
		return true
	}
	return a.Score != nil && b.Score != nil && Agree(a.Metric, *a.Score, *b.Score)
}

// scorerRule says why a run of a task with scoring labs does not count before its verdict
// is read ("" when it may): a scoring lab ran it (it holds the labels), or the runner
// signed a score of its own.
func scorerRule(v *Verified, scorers []string) (ExcludeReason, string) {
	if slices.Contains(scorers, v.Principal()) {
		return ExcludeScorerRan, fmt.Sprintf("%s is one of the task's scoring labs (ledger.scorers): it holds the labels, so its runs of the task do not count", v.Principal())
	}
	if !v.Run.ScoreAbsent {
		return ExcludeRunnerScored, "the runner signed a score (or validity) of its own: only the task's scoring labs score it"
	}
	return "", ""
}

// verdictResult is the ledger result of an unscored run from its scoring labs' verdict.
func verdictResult(v *Verified, task, agent string, d ScorerVerdict) scoring.Result {
	r := scoring.Result{Task: task, Agent: agent, Seed: v.Run.Slot.Seed, AttestationID: v.ID}
	switch {
	case d.Valid && d.Score != nil && !math.IsNaN(*d.Score) && !math.IsInf(*d.Score, 0):
		s := *d.Score
		r.Status, r.Score = scoring.StatusSuccess, &s
	default:
		r.Status = StatusInvalid + ": its scoring labs found it invalid"
	}
	return r
}

// verdictDetail describes an undecided verdict for the excluded list.
func verdictDetail(d ScorerVerdict) string {
	s := fmt.Sprintf("%d of %d scoring labs agree, %d needed", len(d.For), d.Of, d.Need)
	if len(d.Against) > 0 {
		s += fmt.Sprintf("; disagreeing: %v", d.Against)
	}
	if len(d.Hedged) > 0 {
		s += fmt.Sprintf("; hedged (verdicts both ways, none counted): %v", d.Hedged)
	}
	return s
}

// ScorerMisconduct is the proof the scoring labs' verdicts in o give under p: re-scoring is
// deterministic, so a scoring lab whose verdict on a run lies on the losing side of a decided
// verdict (ScorerVerdict.Against, once a majority of the task's scoring labs agree) signed a
// false one, as a re-score on the losing side of a decided vote did (MisconductOverruled,
// ProvenMisconduct). Without it a scoring lab could veto every run it scores at no cost but
// the vote. An undecided verdict proves nothing: nobody has won. Each of the lab's verdicts
// on the run is evidence, sorted by principal then evidence. Pure.
func ScorerMisconduct(o Outcome, p AcceptPolicy) []Misconduct {
	if p.Scorers == nil {
		return nil
	}
	var out []Misconduct
	for _, run := range o.Runs {
		scorers := p.Scorers[run.Run.Slot.Task]
		if scorers == nil || !run.Run.ScoreAbsent || slices.Contains(scorers, run.Principal()) {
			continue
		}
		d := o.Verdict(run.ID, scorers, p.Replication)
		if !d.Decided {
			continue
		}
		for _, r := range o.Verdicts[run.ID] {
			if slices.Contains(d.Against, r.Principal()) && r.Rescore.Metric == run.Run.Metric {
				out = append(out, Misconduct{Principal: r.Principal(), Kind: MisconductOverruled, Evidence: r.ID, Run: run.ID,
					Detail: fmt.Sprintf("verdict on unscored run %s; %d of %d scoring labs found otherwise (%v)", run.ID, len(d.For), d.Of, d.For)})
			}
		}
	}
	slices.SortFunc(out, func(a, b Misconduct) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Evidence, b.Evidence))
	})
	return out
}

package attest

import (
	"cmp"
	"fmt"
	"slices"
)

// AgreeFunc reports whether two raw scores of metric agree within the metric's tolerance.
// The scoring package owns tolerances; attest only asks.
type AgreeFunc func(metric string, a, b float64) bool

// Evidence proves equivocation: one principal (lab, or directly trusted node) signed two run
// attestations for the same slot and attempt with different submissions. Both envelopes are
// kept so anyone can re-verify the proof; no run of that slot by that principal counts, in
// any attempt.
type Evidence struct {
	Slot        Slot   `json:"slot"`
	Principal   string `json:"principal"`
	Attempt     int    `json:"attempt"` // RunPredicate.AttemptNumber of both`
	A           string `json:"a"`       // envelope IDs, A < B
	B           string `json:"b"`
	SubmissionA string `json:"submission_a"` // sha256 of each submission ("" for none)
	SubmissionB string `json:"submission_b"`
	// NodeA and NodeB are the nodes that signed A and B. Two nodes of one lab can collide
	// on a slot without fault (a claim race after a partition); one node signing both is
	// proof that the node misbehaved (Misconduct).
	NodeA string `json:"node_a"`
	NodeB string `json:"node_b"`
	// The envelopes exactly as received. In JSON they are base64 strings, not embedded
	// objects: encoding/json compacts (and HTML-escapes) embedded JSON, which would give a
	// pretty-printed envelope another ID than A or B; base64 keeps the proof byte-exact.
	EnvelopeA []byte `json:"envelope_a"`
	EnvelopeB []byte `json:"envelope_b"`
}

// Disagreement records a re-score that does not confirm the run it re-checked.
type Disagreement struct {
	Run          string   `json:"run"`
	Rescore      string   `json:"rescore"`
	By           string   `json:"by"` // the re-scorer's principal
	Metric       string   `json:"metric"`
	RunValid     bool     `json:"run_valid"`
	RescoreValid bool     `json:"rescore_valid"`
	RunScore     *float64 `json:"run_score"`
	RescoreScore *float64 `json:"rescore_score"`
}

// Outcome is what Reconcile makes of a set of verified envelopes. Every list is sorted by
// envelope ID, so equal inputs give equal outputs whatever their order.
type Outcome struct {
	// Runs are the run attestations that count: not equivocating, not a duplicate.
	Runs []*Verified
	// Rescores maps a counted run's ID to the re-scores that agree with it.
	Rescores map[string][]*Verified
	// Equivocations are the proofs; the runs they name are in neither Runs nor Duplicates.
	Equivocations []Evidence
	// Disagreements are re-scores that contradict the run they name.
	Disagreements []Disagreement
	// Verdicts maps a counted run that signed no score (RunPredicate.ScoreAbsent) to its
	// re-scores: its scoring labs' verdicts (scorers.go), which neither confirm nor
	// contradict a run that claims nothing.
	Verdicts map[string][]*Verified
	// Duplicates are further run attestations of a slot and attempt by the same principal
	// with the same submission as a counted run (re-signed, re-published): not counted twice.
	Duplicates []*Verified
	// LaterAttempts are runs of a slot by a principal that also has a run of a lower attempt
	// of it: only the lowest attempt counts (see Reconcile), so re-running cannot pick the
	// best of several tries.
	LaterAttempts []*Verified
	// Forfeited are runs of a slot whose principal equivocated in another attempt of it: an
	// equivocation forfeits the whole slot, or equivocating on attempt 1 would buy a re-roll.
	Forfeited []*Verified
	// Orphans are re-scores of runs not in the set, or excluded by equivocation.
	Orphans []*Verified
	// Other holds statements that verified but do not count for the ledger.
	Other []*Verified
	// Witnesses are the witness records (witness.go) by ID; runs cite them.
	Witnesses map[string]*Verified
	// Claims and Releases are the claim and release records (claimrec.go), by ID.
	Claims   []*Verified
	Releases []*Verified
	// NoVotes are the re-scores that do not vote on their run under the drawn re-scorer
	// rule (WithRescorerDraw), sorted by re-score ID; empty without it.
	NoVotes []NoVote

	// rescoreByID holds every re-score of a counted run, agreeing or not.
	rescoreByID map[string]*Verified
	// voters: counted run ID → the principals whose verdicts vote on it (WithRescorerDraw);
	// nil: every principal that re-scored it votes.
	voters map[string]map[string]bool
	// agree is Reconcile's, for the re-scores WithUnblockedAttempts attaches; unblocked says
	// it ran.
	agree     AgreeFunc
	unblocked bool
}

// Reconcile sorts verified envelopes into counted runs, agreeing re-scores, equivocation
// evidence and disagreements. It is a pure function of its inputs.
//
// The run attestations of one slot by one principal (lab, or directly trusted node) are
// resolved so that the principal cannot steer which one counts
// (docs/attestation-format.md, "Attempts"):
//   - two with the same attempt (RunPredicate.AttemptNumber) and different submissions are
//     equivocation: Evidence, and no run of that slot by that principal counts;
//   - otherwise the lowest attempt counts, whatever its outcome (an agent that failed is a
//     result, not a reason to retry), the lowest envelope ID among its copies; the copies are
//     Duplicates and higher attempts LaterAttempts.
func Reconcile(vs []*Verified, agree AgreeFunc) Outcome {
	vs = slices.Clone(vs)
	slices.SortFunc(vs, func(a, b *Verified) int { return cmp.Compare(a.ID, b.ID) })
	vs = slices.CompactFunc(vs, func(a, b *Verified) bool { return a.ID == b.ID })

	out := Outcome{Rescores: map[string][]*Verified{}, Witnesses: map[string]*Verified{}, rescoreByID: map[string]*Verified{}, agree: agree}
	type slotKey struct {
		slot      Slot
		principal string
	}
	groups := map[slotKey][]*Verified{}
	var keys []slotKey
	var rescores []*Verified
	for _, v := range vs {
		switch {
		case v.Run != nil:
			k := slotKey{v.Run.Slot, v.Principal()}
			if _, ok := groups[k]; !ok {
				keys = append(keys, k)
			}
			groups[k] = append(groups[k], v)
		case v.Rescore != nil:
			rescores = append(rescores, v)
		case v.Witness != nil:
			out.Witnesses[v.ID] = v
		case v.Claim != nil:
			out.Claims = append(out.Claims, v)
		case v.Release != nil:
			out.Releases = append(out.Releases, v)
		default:
			out.Other = append(out.Other, v)
		}
	}

	// runOf maps every run ID whose submission is counted (the counted run and its
	// duplicates) to the counted run.
	runOf := map[string]*Verified{}
	for _, k := range keys {
		g := groups[k]
		// By attempt, then ID: g[0] is the candidate, each attempt's first its reference.
		slices.SortStableFunc(g, func(a, b *Verified) int {
			return cmp.Or(cmp.Compare(a.Run.AttemptNumber(), b.Run.AttemptNumber()), cmp.Compare(a.ID, b.ID))
		})
		equivocal := false
		for i := 0; i < len(g); {
			j := i + 1
			for j < len(g) && g[j].Run.AttemptNumber() == g[i].Run.AttemptNumber() {
				j++
			}
			first := g[i]
			d0 := first.Statement.SubmissionDigest()
			for _, v := range g[i+1 : j] {
				if d := v.Statement.SubmissionDigest(); d != d0 {
					equivocal = true
					out.Equivocations = append(out.Equivocations, Evidence{
						Slot: k.slot, Principal: k.principal, Attempt: first.Run.AttemptNumber(), A: first.ID, B: v.ID,
						SubmissionA: d0, SubmissionB: d, NodeA: first.Node, NodeB: v.Node, EnvelopeA: first.Envelope, EnvelopeB: v.Envelope,
					})
				}
			}
			i = j
		}
		if equivocal {
			// The runs the evidence names are listed there; the others of the slot forfeit.
			named := map[string]bool{}
			for _, e := range out.Equivocations {
				if e.Slot == k.slot && e.Principal == k.principal {
					named[e.A], named[e.B] = true, true
				}
			}
			for _, v := range g {
				if !named[v.ID] {
					out.Forfeited = append(out.Forfeited, v)
				}
			}
			continue
		}
		first := g[0]
		out.Runs = append(out.Runs, first)
		runOf[first.ID] = first
		for _, v := range g[1:] {
			if v.Run.AttemptNumber() != first.Run.AttemptNumber() {
				out.LaterAttempts = append(out.LaterAttempts, v)
				continue
			}
			out.Duplicates = append(out.Duplicates, v)
			runOf[v.ID] = first
		}
	}
	slices.SortFunc(out.Runs, func(a, b *Verified) int { return cmp.Compare(a.ID, b.ID) })
	for _, l := range [][]*Verified{out.Duplicates, out.LaterAttempts, out.Forfeited} {
		slices.SortFunc(l, func(a, b *Verified) int { return cmp.Compare(a.ID, b.ID) })
	}
	slices.SortFunc(out.Equivocations, func(a, b Evidence) int {
		return cmp.Or(cmp.Compare(a.A, b.A), cmp.Compare(a.B, b.B))
	})

	for _, r := range rescores {
		run, ok := runOf[r.Rescore.Run]
		if !ok {
			out.Orphans = append(out.Orphans, r)
			continue
		}
		out.attach(r, run)
	}
	return out
}

// attach files re-score r of the counted run as agreeing, disagreeing or a verdict.
func (o *Outcome) attach(r, run *Verified) {
	o.rescoreByID[r.ID] = r
	if run.Run.ScoreAbsent {
		if o.Verdicts == nil {
			o.Verdicts = map[string][]*Verified{}
		}
		o.Verdicts[run.ID] = append(o.Verdicts[run.ID], r)
		return
	}
	if Confirms(run.Run, r.Rescore, o.agree) {
		o.Rescores[run.ID] = append(o.Rescores[run.ID], r)
		return
	}
	o.Disagreements = append(o.Disagreements, Disagreement{
		Run: run.ID, Rescore: r.ID, By: r.Principal(), Metric: r.Rescore.Metric,
		RunValid: run.Run.Valid, RescoreValid: r.Rescore.Valid,
		RunScore: run.Run.Score, RescoreScore: r.Rescore.Score,
	})
}

// Confirms reports whether re-score rs confirms run: same metric, same validity, and for
// valid runs, scores within tolerance.
func Confirms(run *RunPredicate, rs *RescorePredicate, agree AgreeFunc) bool {
	if run.Metric != rs.Metric || run.Valid != rs.Valid {
		return false
	}
	if !run.Valid {
		return true
	}
	if run.Score == nil || rs.Score == nil {
		return false
	}
	return agree(run.Metric, *run.Score, *rs.Score)
}

// Replicators returns, sorted, the principals other than the run's own that re-scored the
// counted run id to the same value and never also contradicted it (and, under the drawn
// re-scorer rule, were drawn: WithRescorerDraw): the labs that count
// toward the acceptance policy's `replication` (docs/design.md §7, "other labs"). A lab re-scoring
// its own run, re-scoring twice, or both confirming and contradicting it (hedging) adds
// nothing; Rescores still lists every agreeing re-score for the record.
func (o Outcome) Replicators(id string) []string {
	run := o.run(id)
	if run == nil {
		return nil
	}
	contradicted := map[string]bool{}
	for _, d := range o.Disagreements {
		if d.Run == id {
			contradicted[d.By] = true
		}
	}
	var out []string
	for _, r := range o.Rescores[id] {
		if p := r.Principal(); p != run.Principal() && !contradicted[p] && o.votes(id, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Tally is the vote on one counted run (docs/design.md §9, "Disputes"): one vote per lab.
// The run's own lab votes for its result; every other lab that re-scored it votes as it
// found — under the drawn re-scorer rule (WithRescorerDraw), every drawn lab that did. A lab's re-scores of its own run, and a lab that both confirmed and contradicted
// the run (hedging), add no vote. The majority decides; a tie holds the run aside.
type Tally struct {
	For, Against int
	// Confirming and Contradicting are the voting principals other than the run's own,
	// sorted.
	Confirming, Contradicting []string
}

// Tally counts the vote on the counted run id (zero for a run not in o.Runs).
func (o Outcome) Tally(id string) Tally {
	run := o.run(id)
	if run == nil {
		return Tally{}
	}
	t := Tally{Confirming: o.Replicators(id)}
	for _, d := range o.Disagreements {
		if d.Run == id && d.By != run.Principal() && !slices.Contains(t.Confirming, d.By) && !o.confirmedBy(id, d.By) && o.votes(id, d.By) {
			t.Contradicting = append(t.Contradicting, d.By)
		}
	}
	slices.Sort(t.Contradicting)
	t.Contradicting = slices.Compact(t.Contradicting)
	t.For, t.Against = 1+len(t.Confirming), len(t.Contradicting)
	return t
}

func (o Outcome) run(id string) *Verified {
	if i, ok := slices.BinarySearchFunc(o.Runs, id, func(v *Verified, id string) int { return cmp.Compare(v.ID, id) }); ok {
		return o.Runs[i]
	}
	return nil
}

// confirmedBy reports whether principal p signed an agreeing re-score of run id.
func (o Outcome) confirmedBy(id, p string) bool {
	return slices.ContainsFunc(o.Rescores[id], func(r *Verified) bool { return r.Principal() == p })
}

// MisconductKind names a proven misbehaviour. The strings are stable: reports and the
// dashboard show them.
type MisconductKind string

const (
	// MisconductOverruled: a re-score on the losing side of a decided vote (Tally).
	MisconductOverruled MisconductKind = "re-score overruled by a majority of labs"
	// MisconductHedged: a lab signed re-scores of one run that both confirm and contradict
	// it; re-scoring is deterministic, so one of them is false.
	MisconductHedged MisconductKind = "re-scored one run both ways"
	// MisconductNodeEquivocation: one node signed two runs of one slot and attempt with
	// different submissions.
	MisconductNodeEquivocation MisconductKind = "equivocation by one node"
	// MisconductForgedRelease: a node signed a release record of an attempt it signed no
	// claim record for (claimrec.go): it gave up what it never took.
	MisconductForgedRelease MisconductKind = "release of an attempt it never claimed"
)

// Misconduct is proof, in signed envelopes, that a principal misbehaved. Suspicion (anything
// statistical) is never Misconduct.
type Misconduct struct {
	Principal string         `json:"principal"`
	Kind      MisconductKind `json:"kind"`
	// Evidence is the ID of the offending envelope (the overruled re-score, or the first
	// of the equivocating pair): a network document pardons by this ID.
	Evidence string `json:"evidence"`
	Run      string `json:"run,omitempty"` // the run the re-score concerns
	Detail   string `json:"detail"`
	// SetAside says whether the policy applies the consequence (the principal's runs are
	// set aside): false where the policy records evidence only or pardoned it. Filled by
	// the ledger (LedgerReport.Misconduct).
	SetAside bool `json:"set_aside"`
}

// ProvenMisconduct lists the proven misbehaviour in o, sorted by principal then evidence ID.
// Pure: every node with the same envelopes lists the same.
func ProvenMisconduct(o Outcome) []Misconduct {
	var out []Misconduct
	for _, e := range o.Equivocations {
		if e.NodeA != "" && e.NodeA == e.NodeB {
			out = append(out, Misconduct{Principal: e.Principal, Kind: MisconductNodeEquivocation, Evidence: e.A,
				Detail: fmt.Sprintf("node %s signed %s and %s for one slot and attempt %d", e.NodeA, e.A, e.B, e.Attempt)})
		}
	}
	for _, r := range o.forgedReleases() {
		out = append(out, Misconduct{Principal: r.Principal(), Kind: MisconductForgedRelease, Evidence: r.ID,
			Detail: fmt.Sprintf("node %s released attempt %d of slot %s (%s) without a claim record of it", r.Node, r.Release.Attempt, r.Release.Slot, r.Release.Reason)})
	}
	for _, d := range o.Disagreements {
		if run := o.run(d.Run); run != nil && d.By != run.Principal() && o.confirmedBy(d.Run, d.By) {
			out = append(out, Misconduct{Principal: d.By, Kind: MisconductHedged, Evidence: d.Rescore, Run: d.Run,
				Detail: fmt.Sprintf("%s contradicts run %s, which another re-score by the same lab confirms", d.Rescore, d.Run)})
		}
	}
	for _, run := range o.Runs {
		t := o.Tally(run.ID)
		if t.Against == 0 || t.For == t.Against {
			continue
		}
		losers, side := t.Contradicting, "contradicted"
		if t.For < t.Against {
			losers, side = t.Confirming, "confirmed"
		}
		for _, p := range losers {
			for _, id := range o.rescoresBy(run.ID, p) {
				out = append(out, Misconduct{Principal: p, Kind: MisconductOverruled, Evidence: id, Run: run.ID,
					Detail: fmt.Sprintf("%s run %s; %d labs for it, %d against", side, run.ID, t.For, t.Against)})
			}
		}
	}
	slices.SortFunc(out, func(a, b Misconduct) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Evidence, b.Evidence), cmp.Compare(a.Kind, b.Kind))
	})
	return slices.CompactFunc(out, func(a, b Misconduct) bool {
		return a.Principal == b.Principal && a.Evidence == b.Evidence && a.Kind == b.Kind
	})
}

// rescoresBy is the IDs of principal p's re-scores of run id, agreeing or not.
func (o Outcome) rescoresBy(id, p string) []string {
	var ids []string
	for _, r := range o.Rescores[id] {
		if r.Principal() == p {
			ids = append(ids, r.ID)
		}
	}
	for _, d := range o.Disagreements {
		if d.Run == id && d.By == p {
			ids = append(ids, d.Rescore)
		}
	}
	slices.Sort(ids)
	return ids
}

package attest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Audits in the ledger (docs/scoring.md "Audits by re-execution", docs/design.md §9
// "Fabricated runs"): where the network document sets ledger.audits (AcceptPolicy.Audits),
// every node judges the audit statements in its set the same way. It does not take an
// auditor's signed verdict on trust: it compares the auditor's result with the run itself
// (CompareDeterministic), one verdict per lab, and decides (DecideAudits). Proof is
// misconduct of the run's lab (MisconductFabricated); a lone mismatch holds the run until
// more labs have re-run it.

// AuditRules is the ledger's part of the network's audit policy.
type AuditRules struct {
	// HoldUnaudited: results of agents no other lab can re-run (CampaignWindow.Unauditable)
	// do not count (ledger.audits.unaudited "hold"); otherwise they count unaudited.
	HoldUnaudited bool
	// DrawKeys are the labs' draw keys the network document names: an audit by such a lab
	// that was not drawn with its draw key (a node-key draw, which a lab of many nodes can
	// pick the lowest of) is recorded but does not vote.
	DrawKeys DrawKeys
	// HoldMovers turns on HoldMovers (movers.go): results that would move their agent's
	// rank wait for audits to clear them (ledger.audits.hold_movers).
	HoldMovers bool
}

// notDrawnWith is why audit a by lab does not vote under keys, or "": its draw must be by
// the key the network document names for lab, or by its node's key where it names none.
func notDrawnWith(keys DrawKeys, lab string, a *AuditPredicate) string {
	switch want := keys.Named(lab); {
	case want == "" && a.DrawKey != "":
		return "drawn with key " + a.DrawKey + ", but the network document names no draw key for lab " + lab + ": its node's key draws for it; no vote"
	case want != "" && a.DrawKey != want:
		return "not drawn with lab " + lab + "'s draw key " + want + ", which the network document names (a lab draws once per run, whichever node audits): no vote"
	}
	return ""
}

// Exclusions of the audit rules.
const (
	// ExcludeAuditHeld: one lab's re-execution of a deterministic agent gave another
	// submission and no majority has decided yet: the run waits for the escalated auditors.
	ExcludeAuditHeld ExcludeReason = "held: a re-execution disagrees and more audits are due"
	// ExcludeDisproven: a majority of at least two auditing labs re-ran the run and got
	// another submission (the run's lab is also set aside, unless the network only records
	// misconduct or pardoned it).
	ExcludeDisproven ExcludeReason = "disproven by re-execution"
	// ExcludeUnaudited: no other lab can re-run the agent and the network holds such results
	// (AuditRules.HoldUnaudited).
	ExcludeUnaudited ExcludeReason = "unaudited: no other lab can re-run its agent"
)

// MisconductFabricated: a majority of auditing labs (at least two) re-ran a deterministic
// agent's run on the same GPU model and got another submission than the run attests.
const MisconductFabricated MisconductKind = "run disproven by re-execution"

// AuditOutcome is what the audits of one run decide.
type AuditOutcome int

const (
	// AuditOpen: not decided (no decisive verdicts yet, a tie, or one lone mismatch: more
	// auditors are needed).
	AuditOpen AuditOutcome = iota
	// AuditCleared: a majority of the deciding labs found the same submission.
	AuditCleared
	// AuditProven: a deterministic mismatch confirmed by a majority of the deciding labs,
	// at least two of them: proof, which carries the misconduct consequence.
	AuditProven
)

func (o AuditOutcome) String() string {
	switch o {
	case AuditCleared:
		return "cleared"
	case AuditProven:
		return "proven"
	}
	return "open"
}

// DecideAudits takes each auditing lab's verdict on one run (one per lab: a lab that gave
// both verdicts has none, as in re-score votes) and decides: proof needs at least two labs
// finding a mismatch and more mismatches than matches, so one dishonest auditor cannot
// frame a run alone; clearance needs more matches than mismatches. Inconclusive verdicts do
// not vote.
func DecideAudits(verdicts map[string][]string) AuditOutcome {
	match, mismatch := 0, 0
	for _, vs := range verdicts {
		m, mm := slices.Contains(vs, VerdictMatch), slices.Contains(vs, VerdictMismatch)
		switch {
		case m && mm:
		case m:
			match++
		case mm:
			mismatch++
		}
	}
	switch {
	case mismatch >= 2 && mismatch > match:
		return AuditProven
	case match > mismatch:
		return AuditCleared
	}
	return AuditOpen
}

// CompareDeterministic judges an audit of an agent whose spec declares it deterministic:
// the same GPU model must give the same submission. Another GPU model (deterministic code
// can differ across hardware) or a re-execution without a submission is inconclusive.
func CompareDeterministic(runSubmission, runGPUModel string, audit AuditResult) (verdict, reason string) {
	switch {
	case audit.GPUModel != runGPUModel:
		return VerdictInconclusive, "audited on " + gpuName(audit.GPUModel) + ", the run on " + gpuName(runGPUModel)
	case audit.Submission == "" || runSubmission == "":
		return VerdictInconclusive, "no submission to compare"
	case audit.Submission == runSubmission:
		return VerdictMatch, ""
	}
	return VerdictMismatch, "submission sha256 " + audit.Submission + " differs from the run's " + runSubmission
}

func gpuName(m string) string {
	if m == "" {
		return "no GPU"
	}
	return m
}

// VerdictStochastic is the reason an audit of an agent not declared deterministic is
// inconclusive: its score feeds the statistical test, never proof.
const VerdictStochastic = "the agent is not declared deterministic: its score is compared statistically, never as proof"

// AuditRecord is one audit as the ledger judged it (LedgerReport.Audits).
type AuditRecord struct {
	ID      string `json:"id"`      // the audit envelope
	Run     string `json:"run"`     // the audited run
	RunLab  string `json:"run_lab"` // the audited run's principal
	Lab     string `json:"lab"`     // the auditor's principal
	Verdict string `json:"verdict"` // as the ledger judges it (not the auditor's word)
	Reason  string `json:"reason,omitempty"`
	// Outcome is the run's audits taken together: open, cleared or proven (DecideAudits).
	Outcome string `json:"outcome"`
}

// auditJudgement is the audits of a set, judged.
type auditJudgement struct {
	outcome    map[string]AuditOutcome // run ID → its audits' outcome (runs with audits)
	held       map[string]string       // run ID → why it waits (a lone mismatch)
	misconduct []Misconduct
	records    []AuditRecord
}

// judgeAudits judges every audit in o.Other that concerns a run in o.Runs: the audit must
// name the run's slot, attempt and lab (its VRF draw is over them, checked on arrival) and
// come from another lab. Pure: every node with the same set judges alike.
func (o Outcome) judgeAudits(p AcceptPolicy) auditJudgement {
	j := auditJudgement{outcome: map[string]AuditOutcome{}, held: map[string]string{}}
	byRun := map[string][]*Verified{}
	for _, v := range o.Other {
		if v.Audit != nil {
			byRun[v.Audit.Run] = append(byRun[v.Audit.Run], v)
		}
	}
	if len(byRun) == 0 {
		return j
	}
	for _, run := range o.Runs {
		as := byRun[run.ID]
		if len(as) == 0 {
			continue
		}
		rp := run.Run
		deterministic := false
		if w, ok := p.Campaigns[rp.Slot.Campaign]; ok {
			_, deterministic = slices.BinarySearch(w.Deterministic, rp.Slot.Agent)
		}
		verdicts := map[string][]string{}
		var recs []AuditRecord
		for _, v := range as {
			a := v.Audit
			if a.Slot != rp.Slot || a.Attempt != rp.AttemptNumber() || a.RunLab != run.Principal() || v.Principal() == run.Principal() {
				continue // not this run's draw, or its own lab
			}
			if why := notDrawnWith(p.Audits.DrawKeys, v.Principal(), a); why != "" {
				recs = append(recs, AuditRecord{ID: v.ID, Run: run.ID, RunLab: run.Principal(), Lab: v.Principal(), Verdict: VerdictInconclusive, Reason: why})
				continue
			}
			verdict, reason := JudgeAudit(run.Statement, rp.Hardware.GPUModel, deterministic, a.Result) // audit_transcript.go
			verdicts[v.Principal()] = append(verdicts[v.Principal()], verdict)
			recs = append(recs, AuditRecord{ID: v.ID, Run: run.ID, RunLab: run.Principal(), Lab: v.Principal(), Verdict: verdict, Reason: reason})
		}
		if len(recs) == 0 {
			continue
		}
		out := DecideAudits(verdicts)
		j.outcome[run.ID] = out
		var mismatch []string
		for lab, vs := range verdicts {
			if slices.Contains(vs, VerdictMismatch) && !slices.Contains(vs, VerdictMatch) {
				mismatch = append(mismatch, lab)
			}
		}
		slices.Sort(mismatch)
		switch {
		case out == AuditProven:
			j.misconduct = append(j.misconduct, Misconduct{Principal: run.Principal(), Kind: MisconductFabricated, Evidence: run.ID, Run: run.ID,
				Detail: fmt.Sprintf("%d labs re-ran slot %s attempt %d and got another submission than %s (%s); %d labs got the same",
					len(mismatch), rp.Slot, rp.AttemptNumber(), run.Statement.SubmissionDigest(), strings.Join(mismatch, ", "), len(verdicts)-len(mismatch))})
		case out == AuditOpen && len(mismatch) > 0:
			j.held[run.ID] = fmt.Sprintf("mismatch by %s; proof needs 2 or more labs and a majority", strings.Join(mismatch, ", "))
		}
		for i := range recs {
			recs[i].Outcome = out.String()
		}
		j.records = append(j.records, recs...)
	}
	slices.SortFunc(j.misconduct, func(a, b Misconduct) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Evidence, b.Evidence))
	})
	slices.SortFunc(j.records, func(a, b AuditRecord) int { return cmp.Or(cmp.Compare(a.Run, b.Run), cmp.Compare(a.ID, b.ID)) })
	return j
}

// exclusion says whether run v does not count under the audit rules, and why.
func (j auditJudgement) exclusion(v *Verified, w *CampaignWindow, r *AuditRules) (ExcludeReason, string) {
	switch {
	case j.outcome[v.ID] == AuditProven:
		return ExcludeDisproven, "a majority of auditing labs re-ran it and got another submission"
	case j.held[v.ID] != "":
		return ExcludeAuditHeld, j.held[v.ID]
	}
	if r.HoldUnaudited && w != nil {
		if _, ok := slices.BinarySearch(w.Unauditable, v.Run.Slot.Agent); ok {
			return ExcludeUnaudited, "agent " + v.Run.Slot.Agent + " asks for a network, so no other lab can re-run it alike; this network holds such results"
		}
	}
	return "", ""
}

// AuditMisconduct is the proof the audits in o give under p (none when p applies no
// audits): runs disproven by a majority of auditing labs, sorted by principal then run.
func AuditMisconduct(o Outcome, p AcceptPolicy) []Misconduct {
	if p.Audits == nil {
		return nil
	}
	return o.judgeAudits(p).misconduct
}

// AuditRecords is every audit in o as the ledger judges it under p (nil when p applies
// no audits), sorted by run then audit ID.
func AuditRecords(o Outcome, p AcceptPolicy) []AuditRecord {
	if p.Audits == nil {
		return nil
	}
	return o.judgeAudits(p).records
}

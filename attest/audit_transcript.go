package attest

import (
	"errors"
	"strings"
)

// Transcripts in audits (issue 44 point 4; docs/scoring.md "Transcripts in audits",
// docs/design.md §9 "Transcripts"): a lab signs its own transcript, as it signs its own
// submission, so a dishonest lab can attest a conversation its agent never had — a
// fabricated result with a cheap, small transcript, or none of the calls the agent makes. The
// auditor's re-execution records its own transcript, and the audit carries its shape
// (AuditResult.Transcript); JudgeAudit compares it with the shape the run attests. For an
// agent declared deterministic, judged on the same GPU model, the conversation is as
// reproducible as the submission, so any difference is a mismatch (ExactShape) and counts
// towards proof like another submission; for a stochastic agent a shape outside
// DefaultShapeTolerance is named in the reason, as suspicion, and never decides anything.

// ReasonShapeSuspicion starts the reason of a stochastic agent's audit whose transcript
// shape lies outside DefaultShapeTolerance of the run's: suspicion, never proof.
const ReasonShapeSuspicion = "suspicion: the transcript shape lies outside the stochastic tolerance"

// ReasonShapeMismatch starts the reason of a deterministic agent's audit whose transcript
// shape differs from the run's.
const ReasonShapeMismatch = "transcript shape differs from the run's"

// validateShape checks a transcript shape carried by an audit.
func validateShape(s *TranscriptShape) error {
	if s == nil {
		return nil
	}
	if s.Calls < 0 || s.PromptTokens < 0 || s.CompletionTokens < 0 {
		return errors.New("result transcript counts must not be negative")
	}
	return nil
}

// JudgeAudit is the verdict on an audit's result against the run it re-executed (run, the
// run's statement; runGPU, its GPU model): the rule the auditing node signs by and every
// ledger applies alike. Deterministic agents: the submission (CompareDeterministic), and
// then, where both the run and the re-execution have a transcript, its exact shape; a
// difference in either is a mismatch. Another GPU model or no submission is inconclusive,
// transcript or not: deterministic code, and so its conversation, can differ across
// hardware. Stochastic agents: always inconclusive (VerdictStochastic), with a shape outside
// DefaultShapeTolerance named in the reason (ReasonShapeSuspicion). Where either side has
// no transcript (an agent without a model, a node that records none) the shape is not
// compared. Pure.
func JudgeAudit(run *Statement, runGPU string, deterministic bool, res AuditResult) (verdict, reason string) {
	orig, _, hasShape := TranscriptShapeOf(run)
	var diffs []ShapeDiff
	if !deterministic {
		if hasShape && res.Transcript != nil {
			diffs = CompareTranscriptShape(orig, *res.Transcript, DefaultShapeTolerance)
		}
		if len(diffs) == 0 {
			return VerdictInconclusive, VerdictStochastic
		}
		return VerdictInconclusive, ReasonShapeSuspicion + " (" + shapeDiffs(diffs) + "); " + VerdictStochastic
	}
	verdict, reason = CompareDeterministic(run.SubmissionDigest(), runGPU, res)
	if verdict == VerdictInconclusive || !hasShape || res.Transcript == nil {
		return verdict, reason
	}
	if diffs = CompareTranscriptShape(orig, *res.Transcript, ExactShape); len(diffs) == 0 {
		return verdict, reason
	}
	why := ReasonShapeMismatch + ": " + shapeDiffs(diffs)
	if verdict == VerdictMismatch {
		why = reason + "; " + why
	}
	return VerdictMismatch, why
}

func shapeDiffs(ds []ShapeDiff) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, "; ")
}

// AuditTranscriptShape is the shape an auditor's re-execution puts in its audit
// (AuditResult.Transcript): its run statement's transcript subject, or nil when the
// re-execution recorded none.
func AuditTranscriptShape(redo *Statement) *TranscriptShape {
	s, _, ok := TranscriptShapeOf(redo)
	if !ok {
		return nil
	}
	return &s
}

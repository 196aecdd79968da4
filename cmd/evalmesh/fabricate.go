package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/tasks"
)

// fabricateFromLabels is the daemon's hidden --test-fabricate: a dishonest lab's runner
// that, once the agent has ended, replaces its submission with one written from the task's
// private data (the gold submission kept beside the labels), so every run it signs scores
// perfectly whatever the agent did. Only the tests' dishonest lab turns it on
// (cmd/evalmesh/audit_test.go): it is the fabrication that audits by re-execution catch.
func fabricateFromLabels(outputDir string, b *tasks.Bundle) error {
	for _, name := range []string{"gold_submission.csv"} {
		gold, err := os.ReadFile(filepath.Join(b.PrivateDir(), name))
		if err != nil {
			continue
		}
		return os.WriteFile(filepath.Join(outputDir, b.Meta.Submission.File), gold, 0o644)
	}
	return fmt.Errorf("task %s has no gold submission under private/ to fabricate from", b.Meta.Name)
}

// forgeTranscript is the daemon's hidden --test-forge-transcript: a dishonest lab's runner
// that signs a run's transcript as if the agent had made only its first model call (a
// result that looks cheap, or a conversation the agent never had), while the submission is
// the agent's own. Only the tests' dishonest lab turns it on (audit_transcript_test.go):
// it is what the audits' transcript comparison catches (attest.JudgeAudit).
func forgeTranscript(calls []attest.TranscriptCall) []attest.TranscriptCall {
	return calls[:min(len(calls), 1)]
}

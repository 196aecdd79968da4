package protocol

import (
	"strings"
	"testing"
)

// Claiming stops at the limit of consecutive infrastructure failures of the node's own
// runs; a result in between resets the count, and aborted runs (never reported: RunEnded is
// not called for them) and runs given up to a better-ranked claim record count nothing.
func TestInfraStreakStopsClaiming(t *testing.T) {
	infra := RunOutcome{Kind: RunInfraFailed, Detail: "start agent: no such image"}
	valid := RunOutcome{Kind: RunValid}
	agent := RunOutcome{Kind: RunAgentFailed}
	givenUp := RunOutcome{Kind: RunGivenUp, Detail: "aborted"}
	for _, tc := range []struct {
		name   string
		limit  int
		runs   []RunOutcome
		stopAt int // index of the run that stops claiming; -1: none
	}{
		{"three in a row", 0, []RunOutcome{infra, infra, infra}, 2},
		{"a result resets", 0, []RunOutcome{infra, infra, valid, infra, infra}, -1},
		{"an agent failure is a result", 0, []RunOutcome{infra, infra, agent, infra, infra}, -1},
		{"given-up runs do not count", 0, []RunOutcome{givenUp, givenUp, givenUp, infra, givenUp, infra}, -1},
		{"given-up runs do not reset either", 0, []RunOutcome{infra, givenUp, infra, givenUp, infra}, 4},
		{"limit one", 1, []RunOutcome{valid, infra}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s infraStreak
			got, why := -1, ""
			for i, o := range tc.runs {
				if w := s.record(o, tc.limit); w != "" && got < 0 {
					got, why = i, w
				}
			}
			if got != tc.stopAt {
				t.Fatalf("claiming stopped at run %d, want %d", got, tc.stopAt)
			}
			if got >= 0 && !strings.Contains(why, "no such image") {
				t.Fatalf("reason %q does not name the last failure", why)
			}
		})
	}
}

package node

import (
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/protocol"
)

// Claiming stops at the limit of consecutive infrastructure failures of the node's own
// runs; a result in between resets the count, and aborted runs count nothing.
func TestInfraStreakStopsClaiming(t *testing.T) {
	infra := protocol.RunOutcome{Kind: protocol.RunInfraFailed, Detail: "start agent: no such image"}
	valid := protocol.RunOutcome{Kind: protocol.RunValid}
	agent := protocol.RunOutcome{Kind: protocol.RunAgentFailed}
	for _, tc := range []struct {
		name    string
		limit   int
		runs    []protocol.RunOutcome
		aborted []bool
		stopAt  int // index of the run that stops claiming; -1: none
	}{
		{"three in a row", 0, []protocol.RunOutcome{infra, infra, infra}, nil, 2},
		{"a result resets", 0, []protocol.RunOutcome{infra, infra, valid, infra, infra}, nil, -1},
		{"an agent failure is a result", 0, []protocol.RunOutcome{infra, infra, agent, infra, infra}, nil, -1},
		{"aborted runs do not count", 0, []protocol.RunOutcome{infra, infra, infra, infra}, []bool{false, true, false, false}, 3},
		{"limit one", 1, []protocol.RunOutcome{valid, infra}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := infraStreak{limit: tc.limit}
			got := -1
			for i, o := range tc.runs {
				if s.record(o, i < len(tc.aborted) && tc.aborted[i]) {
					if got >= 0 {
						t.Fatalf("claiming stopped twice (runs %d and %d)", got, i)
					}
					got = i
				}
			}
			if got != tc.stopAt {
				t.Fatalf("claiming stopped at run %d, want %d", got, tc.stopAt)
			}
			if got >= 0 && !strings.Contains(s.stopped, "no such image") {
				t.Fatalf("reason %q does not name the last failure", s.stopped)
			}
		})
	}
}

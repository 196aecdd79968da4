package protocol

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// The audit duty's script commands (testdata/coordinator/audit*.txt); see TestCoordinator.
func (h *coordHarness) runAudit(t *testing.T, d *datadriven.TestData, str func(string, string) string, num func(string, int) int) bool {
	switch d.Cmd {
	case "audits":
		rate, err := strconv.ParseFloat(str("rate", "0.05"), 64)
		if err != nil {
			d.Fatalf(t, "rate: %v", err)
		}
		h.c.EnableAudits(AuditDutyConfig{Rate: rate, MaxParallel: num("parallel", 1), Retry: mustDuration(t, str("retry", "1m")),
			HeldEpoch: mustDuration(t, str("held-epoch", "1m"))})
	case "draw":
		u, err := strconv.ParseFloat(str("u", "0.5"), 64)
		if err != nil {
			d.Fatalf(t, "u: %v", err)
		}
		h.show(h.c.AuditCandidate(AuditCandidate{Run: str("run", "r1"), Beta: AuditDrawValue(u)}, h.now))
	case "audit":
		h.show(h.c.Audit(AuditHeard{ID: str("id", "a1"), Run: str("run", "r1"), Lab: str("lab", "L3"), Verdict: str("verdict", "match")}, h.now))
	case "held":
		var runs []string
		if arg, ok := d.Arg("runs"); ok {
			runs = arg.Vals
		}
		h.show(h.c.AuditHeld(runs, h.now))
	case "audit-ended":
		h.show(h.c.AuditEnded(str("run", "r1"), !d.HasArg("failed"), h.now))
	case "audits-signed":
		fmt.Fprintf(&h.out, "signed=%d\n", h.c.AuditsSigned())
	case "audits-pending":
		fmt.Fprintf(&h.out, "pending=%d\n", h.c.AuditsPending())
	default:
		return false
	}
	return true
}

func (h *coordHarness) showAudits(a CoordActions) {
	for _, r := range a.Audit {
		fmt.Fprintf(&h.out, "audit %s slot=%s attempt=%d lab=%s", r.Run, r.SlotID, r.Attempt, r.RunLab)
		switch {
		case r.Escalated:
			h.out.WriteString(" escalated")
		case r.Held:
			fmt.Fprintf(&h.out, " held lambda=%.3g", r.Lambda)
		default:
			fmt.Fprintf(&h.out, " lambda=%.3g", r.Lambda)
		}
		h.out.WriteString("\n")
	}
}

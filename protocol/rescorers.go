package protocol

import (
	"cmp"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
)

// RescorerOrder is every trusted lab but the runner's, in rendezvous order for the run
// attestation runID (the rule of networks that do not draw re-scorers: the runner can grind
// runID by re-signing, which the drawn rule, attest.RescoreVoters and
// coordinator_rescore.go, takes away) (highest RendezvousScore(runID, lab) first; ties, which need a sha256
// collision on 64 bits, broken by lab ID). Duplicates in labs count once.
func RescorerOrder(runID, runnerLab string, labs []string) []string {
	type scored struct {
		lab   string
		score uint64
	}
	var s []scored
	for _, l := range labs {
		if l == runnerLab || slices.ContainsFunc(s, func(x scored) bool { return x.lab == l }) {
			continue
		}
		s = append(s, scored{l, RendezvousScore(runID, l)})
	}
	slices.SortFunc(s, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.lab, b.lab)
	})
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.lab
	}
	return out
}

// Rescorers is the labs that must re-score the run attestation runID, run by a node of
// runnerLab: the first replication labs of RescorerOrder, so replication distinct labs,
// never the runner's own (fewer when fewer other labs are trusted). Pure: every node
// computes the same answer.
func Rescorers(runID, runnerLab string, labs []string, replication int) []string {
	o := RescorerOrder(runID, runnerLab, labs)
	return o[:max(0, min(replication, len(o)))]
}

// RescorersDue is the labs that should be re-scoring runID now, elapsed after its run
// attestation became known, when the labs in done have already re-scored it. While fewer
// than replication labs are done, the due labs are those not done among the first
// replication + k·missing labs of RescorerOrder, where k = elapsed / timeout (whole
// timeouts passed) and missing = replication − labs done: each timeout, as many further
// labs step in as are still missing, in order, so a silent lab is replaced after one
// timeout without anyone having to agree it was silent. A late lab that does re-score is
// still counted. Empty (not nil) once replication labs are done. A timeout ≤ 0 never steps
// in.
func RescorersDue(runID, runnerLab string, labs []string, replication int, done map[string]bool, elapsed, timeout time.Duration) []string {
	o := RescorerOrder(runID, runnerLab, labs)
	n := 0
	for _, l := range o {
		if done[l] {
			n++
		}
	}
	missing := replication - n
	due := []string{}
	if missing <= 0 {
		return due
	}
	var k int64
	if timeout > 0 && elapsed > 0 {
		k = int64(elapsed / timeout)
	}
	w := int64(replication) + k*int64(missing)
	for i, l := range o {
		if int64(i) >= w {
			break
		}
		if !done[l] {
			due = append(due, l)
		}
	}
	return due
}

// EscalatedReplication is attest.EscalatedReplication: two more re-scorers for each
// contradicting lab, so one lab's contradiction is put to a vote it cannot win alone
// (attest.Tally). RescorersDue takes the result as its replication; it is capped by the labs
// there are.
func EscalatedReplication(replication, contradicting int) int {
	return attest.EscalatedReplication(replication, contradicting)
}

package attest

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// Drawn re-scorers (docs/attestation-format.md "Re-scorer draw", docs/design.md §9 "Who
// re-scores"). Where the policy draws re-scorers (AcceptPolicy.RescorerDraw, the network
// document's ledger.rescorers "drawn"), only the verdicts of re-scorers drawn for a run vote
// on it: each candidate lab's node draws with its RFC 9381 VRF over the run's slot, attempt
// and lab — fixed when the slot was claimed, before the run or its attestation ID exist — and
// carries the proof in its re-score (RescorePredicate.Draw). The runner cannot steer the
// draw (it needs the other labs' keys and chooses none of the inputs after claiming), and a
// node cannot grind it (one output per key and input).

// RescoreAlpha is the VRF input of the re-scorer draw of a run: its slot, attempt and lab,
// under its own domain, so a lab's re-scorer and audit draws of one run are independent.
func RescoreAlpha(slot Slot, attempt int, runLab string) []byte {
	return drawAlpha("evalmesh/rescore/v1", slot, attempt, runLab)
}

// RescoreDraw is the hex VRF proof (RescorePredicate.Draw) and output of key's node for the
// re-scorer draw of run.
func RescoreDraw(key crypto.PrivKey, run *RunPredicate) (proofHex string, beta []byte, err error) {
	proof, beta, err := vrfDraw("re-scorer", key, RescoreAlpha(run.Slot, run.AttemptNumber(), run.Lab))
	if err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(proof), beta, nil
}

// VerifyRescoreDraw checks that proofHex is node's re-scorer draw for run and returns its
// output.
func VerifyRescoreDraw(node, proofHex string, run *RunPredicate) ([]byte, error) {
	return vrfVerify(node, proofHex, RescoreAlpha(run.Slot, run.AttemptNumber(), run.Lab))
}

// VerifyRescoreDraw checks that proofHex is lab's re-scorer draw for run, made on its node
// node: under lab's draw key where k names one, else under node's key. It returns the
// draw's output.
func (k DrawKeys) VerifyRescoreDraw(lab, node, proofHex string, run *RunPredicate) ([]byte, error) {
	return k.verify(lab, node, proofHex, RescoreAlpha(run.Slot, run.AttemptNumber(), run.Lab))
}

// DrawFraction is a VRF output as a number in [0, 1): its first 8 bytes over 2⁶⁴, to 53
// bits (protocol.AuditDrawn reads audit draws alike).
func DrawFraction(beta []byte) float64 {
	if len(beta) < 8 {
		return 1
	}
	return float64(binary.BigEndian.Uint64(beta[:8])>>11) / (1 << 53)
}

// RescorerDraw is the drawn re-scorer rule of a network: its trusted labs, the
// replication it draws for (the network document's ledger.replication; a campaign's own
// replication does not widen the draw, which the ledger could not check) and the labs' draw
// keys the document names (a lab with one draws only with it; the others with their nodes'
// keys).
type RescorerDraw struct {
	Labs        []string
	Replication int
	Keys        DrawKeys
}

// Candidates is how many labs may be drawn for a run of runLab: the trusted labs but it.
func (d RescorerDraw) Candidates(runLab string) int {
	n := 0
	for i, l := range d.Labs {
		if l != runLab && !slices.Contains(d.Labs[:i], l) {
			n++
		}
	}
	return n
}

// EscalatedReplication is how many labs other than the runner's should re-score a run that
// contradicting labs have disputed: two more for each, so one lab's contradiction is put
// to a vote it cannot win alone (Tally). It is capped by the labs there are where it is used.
func EscalatedReplication(replication, contradicting int) int {
	return max(replication, 0) + 2*max(contradicting, 0)
}

// DrawThreshold is the fraction under which a candidate lab's draw (DrawFraction) draws it to
// re-score a run that needs need re-scorers of candidates labs, after step whole re-score
// timeouts without enough drawn re-scores: (step+1)·need/candidates, at most 1. At step 0
// need labs are drawn on average; each step draws as many again, so a silent drawn lab is
// stood in for without anyone having to agree it was silent, and after candidates/need
// steps every lab is due.
func DrawThreshold(need, candidates, step int) float64 {
	if need <= 0 || candidates <= 0 {
		return 0
	}
	return min(1, float64(step+1)*float64(need)/float64(candidates))
}

// DrawnRescore is one lab's re-score of a run, as the vote sees it: its draw (DrawFraction
// of its VRF output; a lab that re-scored from several nodes takes its largest, so a second
// node's lower draw never lowers it, though it may stand alone where the first node stays
// silent: what draw keys close) and whether it contradicts the run.
type DrawnRescore struct {
	Lab     string
	Draw    float64
	Against bool
}

// RescoreVoters is which labs' verdicts vote on a run (Tally), given each lab's re-score
// that carries a valid draw, replication and the candidates: the labs drawn at step 0
// (DrawThreshold(need, candidates, 0)), and, while fewer than need of them re-scored, the
// other labs that did, least draw first, up to need (they stood in for silent drawn labs,
// as the coordinator brings them in after timeouts). need starts at replication and grows
// with the contradicting voters (EscalatedReplication) until it is stable. Pure, and
// independent of the order of rs: every node with the same re-scores counts the same votes.
// A lab that was neither drawn nor stood in is no vote, whatever it found.
func RescoreVoters(replication, candidates int, rs []DrawnRescore) (voters map[string]bool, need int) {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b DrawnRescore) int { return cmp.Or(cmp.Compare(a.Draw, b.Draw), cmp.Compare(a.Lab, b.Lab)) })
	need = max(replication, 0)
	for {
		voters = map[string]bool{}
		t := DrawThreshold(need, candidates, 0)
		n := 0
		for _, r := range rs {
			if r.Draw < t {
				voters[r.Lab] = true
				n++
			}
		}
		for _, r := range rs {
			if n >= need {
				break
			}
			if !voters[r.Lab] {
				voters[r.Lab] = true
				n++
			}
		}
		against := 0
		for _, r := range rs {
			if voters[r.Lab] && r.Against {
				against++
			}
		}
		next := min(EscalatedReplication(replication, against), candidates)
		if next <= need {
			return voters, need
		}
		need = next
	}
}

// NoVote is a re-score that does not vote on its run under the drawn re-scorer rule, and why:
// kept in the report as the evidence of an undrawn lab's attempt to weigh in.
type NoVote struct {
	Rescore string `json:"rescore"`
	Run     string `json:"run"`
	By      string `json:"by"`
	Why     string `json:"why"`
}

// WithRescorerDraw is o with the votes on each counted run limited to its drawn re-scorers
// (RescoreVoters): Replicators, Tally and ProvenMisconduct read them from then on. nil
// keeps every lab that re-scored a run a vote (the rule before drawn re-scorers).
func (o Outcome) WithRescorerDraw(d *RescorerDraw) Outcome {
	if d == nil {
		return o
	}
	o.voters = map[string]map[string]bool{}
	o.NoVotes = nil
	for _, run := range o.Runs {
		type labDraw struct {
			draw             float64
			against, confirm bool
		}
		byLab := map[string]*labDraw{}
		var labs []string
		consider := func(rid string, against bool) {
			r := o.rescoreByID[rid]
			if r == nil || r.Principal() == run.Principal() {
				return
			}
			p := r.Principal()
			if r.Rescore.Draw == "" {
				o.NoVotes = append(o.NoVotes, NoVote{Rescore: rid, Run: run.ID, By: p, Why: "it carries no re-scorer draw"})
				return
			}
			beta, err := d.Keys.VerifyRescoreDraw(p, r.Node, r.Rescore.Draw, run.Run)
			if err != nil {
				o.NoVotes = append(o.NoVotes, NoVote{Rescore: rid, Run: run.ID, By: p, Why: "its draw: " + err.Error()})
				return
			}
			u := DrawFraction(beta)
			ld := byLab[p]
			if ld == nil {
				ld = &labDraw{draw: u}
				byLab[p] = ld
				labs = append(labs, p)
			}
			ld.draw = max(ld.draw, u)
			ld.against = ld.against || against
			ld.confirm = ld.confirm || !against
		}
		for _, r := range o.Rescores[run.ID] {
			consider(r.ID, false)
		}
		for _, dis := range o.Disagreements {
			if dis.Run == run.ID {
				consider(dis.Rescore, true)
			}
		}
		if len(labs) == 0 {
			continue
		}
		rs := make([]DrawnRescore, 0, len(labs))
		for _, l := range labs {
			ld := byLab[l]
			// A lab that found both ways (hedging) neither confirms nor contradicts (Tally).
			rs = append(rs, DrawnRescore{Lab: l, Draw: ld.draw, Against: ld.against && !ld.confirm})
		}
		voters, need := RescoreVoters(d.Replication, d.Candidates(run.Principal()), rs)
		o.voters[run.ID] = voters
		for _, l := range labs {
			if voters[l] {
				continue
			}
			for _, id := range o.rescoresBy(run.ID, l) {
				o.NoVotes = append(o.NoVotes, NoVote{Rescore: id, Run: run.ID, By: l,
					Why: fmt.Sprintf("lab %s was not drawn to re-score this run (draw %.4f; %d re-scorers needed of %d labs) and stood in for no silent drawn lab", l, byLab[l].draw, need, d.Candidates(run.Principal()))})
			}
		}
	}
	slices.SortFunc(o.NoVotes, func(a, b NoVote) int { return cmp.Compare(a.Rescore, b.Rescore) })
	o.NoVotes = slices.CompactFunc(o.NoVotes, func(a, b NoVote) bool { return a.Rescore == b.Rescore })
	return o
}

// votes says whether principal p's verdict on run id votes: always without a draw rule;
// with one, only a drawn (or stood-in) lab's.
func (o Outcome) votes(id, p string) bool {
	if o.voters == nil {
		return true
	}
	return o.voters[id][p]
}

package protocol

import (
	"fmt"
	"slices"
	"time"
)

// Runners without labels (ledger.scorers, network_scorers.go; attest/scorers.go), the
// coordinator's part. For a sealed task whose scoring labs the network document names:
//   - a node of a scoring lab never claims its slots (its lab holds the labels), and
//     ignores the claims of other scoring labs' nodes for them, so a key holder cannot
//     take a slot from the runners by claiming it; its runs of them finish nothing;
//   - a node of any other lab claims them at once, without the key holders' head start
//     (SlotSpec.NoKey off): its run signs the submission without a score;
//   - every run of such a slot by a lab that does not score it is re-scored at once by
//     each scoring lab (one node per lab, designated), whatever the campaign's
//     replication: the ledger counts the run with a majority of those verdicts.
// Claim records of scoring labs for such slots are declined: they hold no attempt.

// sealState is the coordinator's record of which slots have scoring labs.
type sealState struct {
	// task: slot ID → its task bundle, for every slot of a prepared campaign whose task
	// names scoring labs.
	task map[string]string
}

// scorersOfTask is the scoring labs of task (nil when the document names none).
func (c *Coordinator) scorersOfTask(task string) []string { return c.cfg.Scorers[task] }

// scoresTask says whether this node's lab is one of task's scoring labs.
func (c *Coordinator) scoresTask(task string) bool {
	return slices.Contains(c.cfg.Scorers[task], c.cfg.Claims.Lab)
}

// sealSlot records s's task when it names scoring labs and says whether this node may
// claim it: not when its lab scores the task. A slot it may claim loses the key holders'
// head start: its run here signs no score and waits for no key.
func (c *Coordinator) sealSlot(s *SlotSpec) (claimable bool) {
	if c.scorersOfTask(s.Slot.Task) == nil {
		return true
	}
	if c.seal.task == nil {
		c.seal.task = map[string]string{}
	}
	c.seal.task[s.ID] = s.Slot.Task
	if c.scoresTask(s.Slot.Task) {
		return false
	}
	s.NoKey, s.AwaitingKey, s.AwaitingKeyAttempt = false, false, 0
	return true
}

// scorerOfSlot says whether lab scores the task of slotID (a slot of a prepared campaign).
func (c *Coordinator) scorerOfSlot(slotID, lab string) bool {
	t, ok := c.seal.task[slotID]
	return ok && slices.Contains(c.cfg.Scorers[t], lab)
}

// scorerClaimIgnored says why a claim message is ignored ("" when it is not): its sender's
// lab scores the slot's task, so it may not run it.
func (c *Coordinator) scorerClaimIgnored(m *ClaimMessage) string {
	if m.Kind == ClaimKindRelease || !c.scorerOfSlot(m.Slot, m.Lab) {
		return ""
	}
	return fmt.Sprintf("lab %s scores the slot's task (ledger.scorers): it holds the labels and may not run it", m.Lab)
}

// scorerRan says whether run r is by a lab that scores its task: it finishes nothing.
func (c *Coordinator) scorerRan(r *coordRun) bool { return c.scorerOfSlot(r.SlotID, r.Lab) }

// scorerDuty handles the re-score duty of a run of a slot with scoring labs (done: true):
// this node re-scores it when its lab is one of them, has not re-scored it yet, the run is
// not a scoring lab's own, and this node is its lab's designated re-scorer.
func (c *Coordinator) scorerDuty(out *CoordActions, r *coordRun, now time.Time) (done bool) {
	t, ok := c.seal.task[r.SlotID]
	if !ok {
		return false
	}
	lab := c.cfg.Claims.Lab
	if !c.scoresTask(t) || slices.Contains(c.cfg.Scorers[t], r.Lab) || c.rescoring[r.ID] {
		return true
	}
	if slices.ContainsFunc(c.rescores[r.ID], func(rs RescoreHeard) bool { return rs.Lab == lab }) || !c.designated(r.ID, now) {
		return true
	}
	c.rescoring[r.ID] = true
	out.Rescore = append(out.Rescore, r.ID)
	return true
}

// scorerRecordDeclined says why a claim record holds nothing here ("" when it may): its
// lab scores the slot's task.
func (c *Coordinator) scorerRecordDeclined(r ClaimRecordHeard) string {
	if !c.scorerOfSlot(r.SlotID, r.Lab) {
		return ""
	}
	return fmt.Sprintf("lab %s scores the slot's task (ledger.scorers): its claim records hold no attempt", r.Lab)
}

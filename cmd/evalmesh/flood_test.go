package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
)

// floodFill is how many claim records of each slot lab3 signs first: as many as a node
// keeps of one lab for one slot (protocol's maxClaimRecordsPerLab).
const floodFill = 32

// TestDishonestLabCannotFloodClaimRecords (docs/design.md §9 "Starvation by squatting": a
// node keeps at most 32 claim records of one slot from each lab): where claim records are
// required, lab3 (node 2, which runs nothing itself) floods every slot of an honest lab's
// campaign with claim records signed by its daemon's own valid key, citing a valid witness:
// attempts 1 to 32 of each slot, which fill the bound, and then attempts 33 to 48, of which
// 33 is one where its draw outranks both honest labs — the attempt an honest node claimed
// next after 32 records. It runs and releases none of them. On the honest daemons: each keeps 32 records of a slot
// from lab3 and logs each one past them as not taken, naming the bound; still, the attempt
// they claim is above every record lab3 signed, so every slot is run by an honest lab and
// counts, no lab3 result counts, the ledger report lists every flooded attempt against lab3
// (it reads the store, not the bound), and all three roots are equal.
//
// Without the bound the honest nodes log no refusal (it fails on that). With the bound as it
// was, a record past it also did not raise the attempt an honest node claims next: the
// honest node claimed and ran attempt 33, which lab3's refused record holds in every ledger,
// so its run did not count there while the slot stayed finished on every node — an empty
// cell (it fails on every slot counting).
func TestDishonestLabCannotFloodClaimRecords(t *testing.T) {
	skipShortFaults(t)
	a := startRecordsAttack(t)
	c, tasks, liar, liarLab, honest, honestLab, specs := a.c, a.tasks, a.liar, a.liarLab, a.honest, a.honestLab, a.specs
	ctx := context.Background()
	status := (*daemonProc).campaignStatus

	// Gated runs fill both honest nodes until the whole flood has reached them, so that what
	// they claim follows it; they end when the test removes the hold file.
	hold, busyID := c.fillWithGatedRuns(honest, tasks)

	// The flooded campaign: one where lab3 outranks both honest labs on attempt floodFill+1
	// of every slot (a quarter of slots by chance; the test picks the campaign so that the
	// attack bites on each).
	constant := specs["constant"]
	const seeds = 3
	next, last := floodFill+1, floodFill+16
	outranks := a.liarOutranks
	slotOf := func(id string, seed int) attest.Slot {
		return attest.Slot{Campaign: id, Task: tasks[0], Agent: constant.CID(), Seed: seed}
	}
	env, id := c.campaignWhere(1, "flooded", tasks, []*agentspec.Spec{constant}, seeds, time.Now().Add(time.Hour), func(id string) bool {
		for seed := 0; seed < seeds; seed++ {
			if !outranks(slotOf(id, seed), next) {
				return false
			}
		}
		return true
	})
	a.publishPrepared(ctx, env, id, "the flooded campaign")

	// lab3's records, signed by its daemon's own key and citing another lab's witness of the
	// campaign, as valid as any honest node's: first the filling ones, stored on both honest
	// nodes before the ones past the bound are signed, so that those are the ones refused.
	key, cert := c.nodeKey(2)
	witness := c.witnessOf(liar, id, honestLab)
	var records []string
	bySlot := map[string][]string{}
	flood := func(from, to int) {
		dir := t.TempDir()
		var batch []string
		for seed := 0; seed < seeds; seed++ {
			s := slotOf(id, seed)
			for a := from; a <= to; a++ {
				env, rid, err := attest.NewClaimRecord(key, cert, s, a, witness, time.Now())
				batch = append(batch, writeEnvelope(t, dir, env, rid, err))
				bySlot[protocol.SlotID(s)] = append(bySlot[protocol.SlotID(s)], rid)
			}
		}
		c.importInto(liar, dir)
		records = append(records, batch...)
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("lab3's records of attempts %d to %d stored on both honest nodes", from, to), func() bool {
			for _, d := range honest {
				if status(d, busyID).Running == 0 {
					t.Fatalf("%s finished its gated runs before lab3's flood reached it", d.lab.Name)
				}
				if d.holding(batch) != len(batch) {
					return false
				}
			}
			return true
		})
	}
	flood(1, floodFill)
	flood(next, last)
	t.Logf("lab3 floods %d slots with %d claim records each (%d in all), attempt %d of each outranking both honest labs", seeds, last, len(records), next)

	// Each honest node refuses every record past the bound, naming it; the test reads the
	// refusals before the gated runs end, when the honest nodes have claimed nothing of the
	// flooded campaign yet.
	refusal := regexp.MustCompile(`claim record (\S+) not taken: slot (\S+) has (\d+) records of lab (\S+) already`)
	refused := func(d *daemonProc) map[string]map[string]bool { // slot → record IDs
		out := map[string]map[string]bool{}
		for _, m := range refusal.FindAllStringSubmatch(fullLog(t, d.log), -1) {
			if m[3] != fmt.Sprint(floodFill) || m[4] != liarLab || !slices.Contains(bySlot[m[2]], m[1]) {
				t.Errorf("%s refused %s of slot %s (%s records of lab %s): not a record of lab3's flood past the bound", d.lab.Name, m[1], m[2], m[3], m[4])
				continue
			}
			if out[m[2]] == nil {
				out[m[2]] = map[string]bool{}
			}
			out[m[2]][m[1]] = true
		}
		return out
	}
	testutil.WaitFor(t, 30*time.Second, "each honest node refusing every record of lab3 past the bound", func() bool {
		for _, d := range honest {
			r := refused(d)
			for s, ids := range bySlot {
				if len(r[s]) != len(ids)-floodFill {
					return false
				}
			}
		}
		return true
	})
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}

	// Every slot run by an honest lab, above every attempt lab3 signed, none failed.
	testutil.WaitFor(t, 90*time.Second, "every flooded slot done on the honest nodes", func() bool {
		for _, d := range honest {
			st := status(d, id)
			if st.Failed > 0 {
				t.Fatalf("%s: %d flooded slots failed", d.lab.Name, st.Failed)
			}
			if st.Slots != seeds || st.Done != seeds {
				return false
			}
		}
		return true
	})
	listed := func(v ledgerView) int {
		n := 0
		for _, u := range v.unanswered {
			if u.Principal == liarLab && slices.Contains(records, u.Claim) {
				n++
			}
		}
		return n
	}
	views := c.settle("every flooded slot counted from an honest run and every flooded attempt listed against lab3", 90*time.Second, func(v ledgerView) bool {
		n := 0
		for _, r := range v.counted {
			if r.campaign == id {
				n++
			}
		}
		return n == seeds && listed(v) == len(records)
	})
	for i, v := range views {
		name := c.nodes[i].lab.Name
		for _, r := range v.counted {
			if r.campaign != id {
				continue
			}
			if r.lab == liarLab || r.attempt <= last {
				t.Errorf("%s: seed %d counts %+v: want an honest run above attempt %d", name, r.seed, r, last)
			}
		}
		for _, u := range v.unanswered {
			if u.Principal != liarLab || !slices.Contains(records, u.Claim) || u.Charged {
				t.Errorf("%s: unanswered %+v: want only lab3's flooded attempts, not charged before the deadline", name, u)
			}
		}
	}
	for _, d := range honest {
		r := refused(d)
		kept := map[string]int{}
		for s, ids := range bySlot {
			kept[s] = len(ids) - len(r[s])
		}
		for s, k := range kept {
			if k != floodFill {
				t.Errorf("%s keeps %d records of lab3 for slot %s, want %d", d.lab.Name, k, s, floodFill)
			}
		}
	}
	t.Logf("every flooded slot counted from an honest run above attempt %d; each honest node kept %d of lab3's %d records per slot and logged the rest as refused; %d attempts listed against lab3 on every node; root %.12s on all three",
		last, floodFill, last, len(records), views[0].root)
}

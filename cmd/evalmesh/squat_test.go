package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/examples/demo"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// recordsAttack is the start of the claim-record adversary tests (squat, flood, reopen):
// three labs' daemons under a document that requires claim records, connected, the
// arithmetic task added; lab3 (the liar) on the docker executor, so every claim of its lab
// is the attack's; lab2 (honestLab) signs the campaigns.
type recordsAttack struct {
	c         *cluster
	tasks     []string
	liar      *daemonProc
	liarLab   string
	honest    []*daemonProc
	honestLab string
	specs     map[string]*agentspec.Spec
}

func startRecordsAttack(t *testing.T) recordsAttack {
	t.Helper()
	c := newCluster(t, 3)
	c.useDoc(func(d *protocol.NetworkDoc) { d.Ledger.Claims = protocol.ClaimsRequired })
	c.onDocker(2)
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	a := recordsAttack{c: c, tasks: c.addTasks("arithmetic"), liar: c.nodes[2], liarLab: c.labs.Nodes[2].Lab.ID,
		honest: c.nodes[:2], honestLab: c.labs.Nodes[1].Lab.ID}
	var err error
	if a.specs, err = c.labs.AgentSpecs(); err != nil {
		t.Fatal(err)
	}
	return a
}

// liarOutranks says whether lab3's node outranks both honest nodes on attempt of s.
func (a recordsAttack) liarOutranks(s attest.Slot, attempt int) bool {
	r := attest.RankOf(s, attempt, a.liarLab, a.liar.peerID)
	return r.Less(attest.RankOf(s, attempt, a.c.labs.Nodes[0].Lab.ID, a.honest[0].peerID)) && r.Less(attest.RankOf(s, attempt, a.honestLab, a.honest[1].peerID))
}

// publishPrepared publishes campaign env (ID id, what in failures) on lab2's node and
// waits until both honest nodes have prepared it.
func (a recordsAttack) publishPrepared(ctx context.Context, env []byte, id, what string) {
	a.c.t.Helper()
	if _, err := a.honest[1].client.PublishCampaign(ctx, env); err != nil {
		a.c.t.Fatal(err)
	}
	testutil.WaitFor(a.c.t, 60*time.Second, what+" prepared on the honest nodes", func() bool {
		for _, d := range a.honest {
			if st, err := d.client.CampaignStatus(ctx, id); err != nil || !st.Ready {
				return false
			}
		}
		return true
	})
}

// onDocker puts lab i's daemon on the docker executor before it starts: it cannot run the
// process agents these tests use (runner.CheckRunnable), so its own claim machine claims
// nothing and every claim of that lab is the attack's.
func (c *cluster) onDocker(i int) {
	c.t.Helper()
	h := home.Home{Dir: c.labs.Nodes[i].Home.Dir}
	cfg, err := os.ReadFile(h.ConfigPath())
	if err != nil {
		c.t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "executor: process") {
		c.t.Fatalf("demo config has no process executor line:\n%s", cfg)
	}
	if err := os.WriteFile(h.ConfigPath(), []byte(strings.Replace(string(cfg), "executor: process", "executor: docker", 1)), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// holdFile creates a file that gated agents wait on while it exists. Its folder is open to
// every user: a node running as root runs agents as nobody, who cannot see into
// t.TempDir() (0700), and would find no file and end at once.
func holdFile(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "evalmesh-hold-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hold := filepath.Join(dir, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return hold
}

// writeEnvelope writes the envelope a signing call returned into dir, for `attest import`,
// and returns its ID.
func writeEnvelope(t *testing.T, dir string, env []byte, id string, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+".json"), env, 0o644); err != nil {
		t.Fatal(err)
	}
	return id
}

// campaignStatus is node d's status of campaign id (zero when it cannot say).
func (d *daemonProc) campaignStatus(id string) protocol.CampaignStatus {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := d.client.CampaignStatus(ctx, id)
	if err != nil || st == nil {
		return protocol.CampaignStatus{}
	}
	return st.Status
}

// holding is how many of ids node d has stored.
func (d *daemonProc) holding(ids []string) int {
	envs, err := d.client.StoredEnvelopes(context.Background(), vstore.SetAttestations)
	if err != nil {
		return 0
	}
	have := 0
	for _, env := range envs {
		if slices.Contains(ids, attest.EnvelopeID(env)) {
			have++
		}
	}
	return have
}

// fillWithGatedRuns fills the nodes' capacity (two runs each) with runs of a campaign by lab
// 1 that wait while the returned hold file exists, so that what the nodes claim next
// follows whatever the test does meanwhile; removing the file ends them. It returns the file
// and the campaign's ID.
func (c *cluster) fillWithGatedRuns(nodes []*daemonProc, tasks []string) (hold, id string) {
	c.t.Helper()
	hold = holdFile(c.t)
	gated := &agentspec.Spec{Name: "gated", Version: "1.0.0", Command: []string{"/bin/sh", "-c", "while [ -e " + hold + " ]; do sleep 0.1; done"}}
	slots, id := c.campaignOf(1, "busy", tasks, []*agentspec.Spec{gated}, 2*len(nodes))
	// Each node counts every run it hears of, its own and the other's.
	if err := testutil.Poll(60*time.Second, func() bool {
		for _, d := range nodes {
			if d.campaignStatus(id).Running != slots {
				return false
			}
		}
		return true
	}); err != nil {
		var b strings.Builder
		for _, d := range nodes {
			fmt.Fprintf(&b, "--- %s: %+v\n%s\n", d.lab.Name, d.campaignStatus(id), readLog(d.log))
		}
		c.t.Fatalf("the nodes running every gated slot: %v\n%s", err, b.String())
	}
	return hold, id
}

// campaignWhere signs, by lab signer, a campaign of specs over tasks × seeds with the given
// deadline for which bites(its ID) holds: claim ranks and re-scorer draws are drawn from the
// slot, so a test that needs a given draw picks the campaign (retitling it) until the draw is
// the one it needs.
func (c *cluster) campaignWhere(signer int, title string, tasks []string, specs []*agentspec.Spec, seeds int, deadline time.Time, bites func(id string) bool) (env []byte, id string) {
	c.t.Helper()
	var agents []protocol.CampaignAgent
	for _, spec := range specs {
		agents = append(agents, protocol.NewCampaignAgent(spec))
	}
	for try := 0; try < 100000; try++ {
		camp := &protocol.Campaign{Network: demo.NetworkName, Title: fmt.Sprint(title, " ", try), Tasks: tasks, Seeds: seeds, Replication: 1,
			Created: time.Now().Add(-time.Minute), Deadline: deadline, Agents: agents}
		env, id, err := protocol.SignCampaign(c.labs.Nodes[signer].Lab, camp)
		if err != nil {
			c.t.Fatal(err)
		}
		if bites(id) {
			return env, id
		}
	}
	c.t.Fatalf("no campaign %q in 100000 with the draw the test needs", title)
	return nil, ""
}

// squatRun is the run of attempts, from attempt 2, in which lab3 outranks both honest labs
// on seed 0 of the squatted campaign: long enough that, were a given-up attempt the
// runner's infrastructure failure, each honest lab would use up its MaxInfraAttempts on the
// slot and stop claiming it (rule 6), and the slot would be lost.
const squatRun = 2 * protocol.DefaultMaxInfraAttempts

// squatAttempts is the highest attempt lab3 squats by record.
const squatAttempts = squatRun + 2

// TestDishonestLabCannotSquatSlots (docs/design.md §9 "Starvation by squatting"): where
// claim records are required, lab3 (node 2) squats every slot of an honest lab's campaign.
// It claims attempt 1 of each on gossip and renews it (as a runner would) while the honest
// nodes are busy, signs claim records with its daemon's own valid key for attempt 1 and for
// every later attempt up to squatAttempts that its draw outranks both honest labs on — the
// attempts the honest nodes will retry at — and never runs or releases any. The campaign is
// one where lab3 outranks both honest labs on squatRun consecutive attempts of one slot (in
// a campaign of many slots such a run occurs by chance; the test picks one so the attack
// bites every time). On the honest daemons: every slot is still run by an honest lab (none
// lost or failed), the squatted campaign's leaderboard row equals a control campaign's of
// the same agent, every attempt lab3 took is charged to lab3 in the ledger report once the
// campaign's deadline passed, no honest lab is charged, all three roots are equal, and the
// honest logs name the attempts they gave up to lab3's records.
//
// Without the rule (a run given up to a better-ranked record is not its runner's failure:
// protocol.Coordinator.GivenUp, read by the claim machine and by the daemon's health streak)
// seed 0 is never run: each honest node took three given-up attempts in a row for its own
// failures and stopped claiming altogether (node/mesh/health.go), and the retry cap would
// have stopped each lab on the slot after three.
func TestDishonestLabCannotSquatSlots(t *testing.T) {
	skipShortFaults(t)
	a := startRecordsAttack(t)
	c, tasks, liar, liarLab, honest, honestLab, specs := a.c, a.tasks, a.liar, a.liarLab, a.honest, a.honestLab, a.specs
	ctx := context.Background()
	status := (*daemonProc).campaignStatus

	// Gated runs fill both honest nodes (two each, their capacity) until lab3's claims are
	// out, so lab3 claims first; they end when the test removes the hold file.
	hold, busyID := c.fillWithGatedRuns(honest, tasks)

	// The squatted campaign: the agent of the control below under another name, so the two
	// rows can be compared; a deadline close enough that the test sees it pass, after which
	// the ledger charges unanswered attempts.
	constant := specs["constant"]
	squatted := &agentspec.Spec{Name: "squatted", Version: "1.0.0", Command: constant.Command}
	const seeds = 3
	deadline := time.Now().Add(100 * time.Second)
	outranks := a.liarOutranks
	env, id := c.campaignWhere(1, "squatted", tasks, []*agentspec.Spec{squatted}, seeds, deadline, func(id string) bool {
		s := attest.Slot{Campaign: id, Task: tasks[0], Agent: squatted.CID(), Seed: 0}
		for a := 2; a <= squatRun+1; a++ {
			if !outranks(s, a) {
				return false
			}
		}
		return true
	})
	a.publishPrepared(ctx, env, id, "the squatted campaign")

	// lab3's claim records, signed by its daemon's own key and citing another lab's witness
	// of the campaign, as valid as any honest node's.
	key, cert := c.nodeKey(2)
	witness := c.witnessOf(liar, id, honestLab)
	dir := t.TempDir()
	var records []string
	var slots []string
	for seed := 0; seed < seeds; seed++ {
		s := attest.Slot{Campaign: id, Task: tasks[0], Agent: squatted.CID(), Seed: seed}
		slots = append(slots, protocol.SlotID(s))
		for a := 1; a <= squatAttempts; a++ {
			if a > 1 && !outranks(s, a) {
				continue
			}
			env, rid, err := attest.NewClaimRecord(key, cert, s, a, witness, time.Now())
			records = append(records, writeEnvelope(t, dir, env, rid, err))
		}
	}
	c.importInto(liar, dir)

	// On gossip: a claim of attempt 1 of every slot and a renew (a run, as far as anyone
	// can tell), both under a ten-minute lease so that no stall of this machine lets them
	// lapse before both honest nodes see them running; then a last renew under the
	// daemons' 3 s lease, and silence (the lease runs from the latest message, for its
	// length: protocol/testdata/claims/shortened-lease.txt).
	send := func(kind string, lease time.Duration) {
		for _, s := range slots {
			if err := liar.client.TestClaim(ctx, protocol.ClaimMessage{Kind: kind, Campaign: id, Slot: s, Lamport: 1, Attempt: 1, LeaseMS: lease.Milliseconds()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(protocol.ClaimKindClaim, 10*time.Minute)
	send(protocol.ClaimKindRenew, 10*time.Minute)
	testutil.WaitFor(t, 60*time.Second, "lab3 running every squatted slot and its records stored, as both honest nodes see them", func() bool {
		for _, d := range honest {
			if status(d, busyID).Running == 0 {
				t.Fatalf("%s finished its gated runs before lab3 squatted", d.lab.Name)
			}
			if status(d, id).Running != seeds || d.holding(records) != len(records) {
				return false
			}
		}
		return true
	})
	send(protocol.ClaimKindRenew, 3*time.Second)
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	t.Logf("lab3 squats %d slots: attempt 1 on gossip, %d claim records in all (%d of them attempts 2 to %d of seed 0)", seeds, len(records), squatRun, squatRun+1)

	// No slot lost: the honest nodes run every slot, none failed.
	if err := testutil.Poll(time.Until(deadline), func() bool {
		for _, d := range honest {
			st := status(d, id)
			if st.Failed > 0 {
				t.Fatalf("%s: %d squatted slots failed", d.lab.Name, st.Failed)
			}
			if st.Slots != seeds || st.Done != seeds {
				return false
			}
		}
		return true
	}); err != nil {
		var b strings.Builder
		for _, d := range honest {
			fmt.Fprintf(&b, "--- %s: %+v\n", d.lab.Name, status(d, id))
			for _, line := range strings.Split(fullLog(t, d.log), "\n") {
				if slices.ContainsFunc(slots, func(s string) bool { return strings.Contains(line, s) }) || strings.Contains(line, id) {
					fmt.Fprintln(&b, line)
				}
			}
		}
		t.Fatalf("every squatted slot done on the honest nodes before the deadline: %v\n%s", err, b.String())
	}

	// Once the deadline has passed, every node charges lab3 with every attempt it took: no
	// new input comes, so this is each daemon computing its ledger again as the deadline
	// passes (node/mesh/mesh.go, chargeAt).
	charged := func(v ledgerView) int {
		n := 0
		for _, u := range v.unanswered {
			if u.Charged {
				n++
			}
		}
		return n
	}
	c.settle("lab3's attempts charged once the deadline passed", time.Until(deadline)+60*time.Second, func(v ledgerView) bool {
		return charged(v) == len(records)
	})

	// The control: the same agent under its own name, in a campaign nobody squats.
	_, controlID := c.campaignOf(1, "control", tasks, []*agentspec.Spec{constant}, seeds)
	c.waitAllDone(honest, controlID, seeds)
	views := c.settle("every slot of both campaigns counted", 120*time.Second, func(v ledgerView) bool {
		n := 0
		for _, r := range v.counted {
			if r.campaign == id || r.campaign == controlID {
				n++
			}
		}
		return n == 2*seeds && charged(v) == len(records)
	})
	for i, v := range views {
		name := c.nodes[i].lab.Name
		bySeed := map[int]runInfo{}
		for _, r := range v.counted {
			if r.campaign == id {
				bySeed[r.seed] = r
			}
		}
		for seed := 0; seed < seeds; seed++ {
			r, ok := bySeed[seed]
			if !ok || r.lab == liarLab {
				t.Errorf("%s: seed %d of the squatted campaign counts %+v, want one honest run", name, seed, r)
			}
		}
		if r := bySeed[0]; r.attempt <= squatRun+1 {
			t.Errorf("%s: seed 0 counts attempt %d, which lab3 holds by its records", name, r.attempt)
		}
		for _, u := range v.unanswered {
			if u.Principal != liarLab || !u.Charged || !slices.Contains(records, u.Claim) {
				t.Errorf("%s: unanswered %+v: want only lab3's squatted attempts, charged", name, u)
			}
		}
	}

	// The ledger report's charges and the leaderboard rows, as any client reads them.
	for _, d := range c.nodes {
		l, err := d.client.MeshLedger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{liarLab: len(records)}; !maps.Equal(l.Report.UnansweredByLab, want) {
			t.Errorf("%s: charged_attempts %v, want %v", d.lab.Name, l.Report.UnansweredByLab, want)
		}
		rows := map[string]scoring.Agent{}
		for _, a := range l.Ledger.Agents {
			rows[a.Agent] = a
		}
		sq, ctl := rows["squatted"], rows["constant"]
		if sq.Runs != seeds || sq.Runs != ctl.Runs || !sameScore(sq.NormalizedScore, ctl.NormalizedScore) || !sameScore(sq.ValidSubmissionRate, ctl.ValidSubmissionRate) {
			t.Errorf("%s: the squatted campaign's row %+v differs from the control's %+v", d.lab.Name, sq, ctl)
		}
	}

	// The evidence on the honest side: each attempt given up to lab3's record is logged.
	gaveUp := 0
	for _, d := range honest {
		gaveUp += strings.Count(fullLog(t, d.log), "of slot "+slots[0]+" is held by node "+liar.peerID+" by the claim records")
	}
	// Not one per squatted attempt, and possibly none: a node that hears another's claim of
	// an attempt claims the next, and a claim record raises the attempt a node claims next
	// (protocol-claims.md rule 6), so an honest node that heard lab3's records first claims
	// above them and has nothing to give up. The evidence that always stays is the charge
	// (charged_attempts, asserted above) and the counted attempt above lab3's.
	if gaveUp == 0 {
		t.Logf("no attempt of seed 0 was given up: the honest nodes heard lab3's records before claiming and claimed above them")
	}
	t.Logf("%d squatted slots all run by honest labs; %d attempts of seed 0 given up to lab3's records; charged_attempts {%s: %d}; root %.12s on all three nodes",
		seeds, gaveUp, liarLab, len(records), views[0].root)
}

func sameScore(a, b *float64) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

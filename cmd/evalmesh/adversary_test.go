package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

// A dishonest trusted lab against honest `evalmesh daemon` processes (docs/design.md §9).
// The dishonest lab is lab3 (node 2): its daemon is the real program, and it attacks with
// statements hand-signed under its own valid node key and certificate, imported into its
// own daemon (`evalmesh attest import`) and spread from there by gossip and sync. Each
// stage asserts that the honest labs' counted results did not move, that the act left
// evidence, and the consequence the network document names.

// runInfo is what a node counts of one run attestation.
type runInfo struct {
	id, lab, node, campaign, task, agent string
	seed, attempt                        int
	submission                           string
	metric                               string
	valid                                bool
	score                                *float64
}

// ledgerView is one daemon's ledger: its root, the runs it counts and why it excludes the
// others, and the misconduct it has proof of.
type ledgerView struct {
	root        string
	counted     map[string]runInfo // by attestation ID
	all         map[string]runInfo // every run attestation in the store
	excluded    map[string]attest.ExcludeReason
	misconduct  []attest.Misconduct
	refused     []attest.RefusedCampaign   // campaigns refused at admission (ledger.caps)
	unanswered  []attest.Unanswered        // held attempts with no outcome by their holder
	refusedRuns map[string]string          // stored runs the ledger refuses now (a revocation since), by ID: why
	noVotes     []attest.NoVote            // re-scores of labs not drawn for their run (ledger.rescorers)
	held        []attest.HeldGroup         // (lab, agent) groups held as movers until audited (ledger.audits)
	rescoredBy  map[string]map[string]bool // run ID → the labs that re-scored it
	agents      []string                   // leaderboard rows' names
	envelopes   int                        // attestations in the store
}

func (d *daemonProc) ledgerView() (ledgerView, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v := ledgerView{counted: map[string]runInfo{}, all: map[string]runInfo{}, excluded: map[string]attest.ExcludeReason{}, refusedRuns: map[string]string{}, rescoredBy: map[string]map[string]bool{}}
	l, err := d.client.MeshLedger(ctx)
	if err != nil || l == nil || l.Report == nil {
		return v, fmt.Errorf("ledger: %v", err)
	}
	v.root, v.misconduct, v.unanswered, v.refused = l.Root, l.Report.Misconduct, l.Report.Unanswered, l.Report.RefusedCampaigns
	v.noVotes, v.held = l.Report.NoVotes, l.Report.Held
	for _, a := range l.Ledger.Agents {
		v.agents = append(v.agents, a.Agent)
	}
	for _, e := range l.Report.Excluded {
		v.excluded[e.ID] = e.Reason
	}
	envs, err := d.client.StoredEnvelopes(ctx, vstore.SetAttestations)
	if err != nil {
		return v, err
	}
	v.envelopes = len(envs)
	refused := map[string]string{}
	for _, r := range l.Report.Refused {
		refused[r.ID] = r.Reason + ": " + r.Detail
	}
	refusedRuns := 0
	for _, env := range envs {
		if why, ok := refused[attest.EnvelopeID(env)]; ok && countRuns([][]byte{env}) == 1 {
			v.refusedRuns[attest.EnvelopeID(env)] = why
			refusedRuns++
		}
	}
	if l.Attestations != len(envs) || l.Report.Counted+len(l.Report.Excluded)+refusedRuns != countRuns(envs) {
		return v, fmt.Errorf("the ledger (%d attestations, %d counted, %d excluded, %d refused) is older than the store (%d)", l.Attestations, l.Report.Counted, len(l.Report.Excluded), refusedRuns, len(envs))
	}
	for _, env := range envs {
		e, err := attest.DecodeEnvelope(env)
		if err != nil {
			return v, err
		}
		st, run, rs, err := attest.DecodeStatement(e.Payload)
		if err == nil && rs != nil {
			if v.rescoredBy[rs.Run] == nil {
				v.rescoredBy[rs.Run] = map[string]bool{}
			}
			v.rescoredBy[rs.Run][rs.Lab] = true
		}
		if err != nil || run == nil {
			continue
		}
		id := attest.EnvelopeID(env)
		if _, no := v.refusedRuns[id]; no {
			continue
		}
		r := runInfo{id: id, lab: run.Lab, node: run.Node, campaign: run.Slot.Campaign, task: run.Slot.Task, agent: run.Slot.Agent,
			seed: run.Slot.Seed, attempt: run.AttemptNumber(), submission: st.SubmissionDigest(), metric: run.Metric, valid: run.Valid, score: run.Score}
		v.all[id] = r
		if _, out := v.excluded[id]; !out {
			v.counted[id] = r
		}
	}
	return v, nil
}

func countRuns(envs [][]byte) int {
	n := 0
	for _, env := range envs {
		if e, err := attest.DecodeEnvelope(env); err == nil {
			if _, run, _, err := attest.DecodeStatement(e.Payload); err == nil && run != nil {
				n++
			}
		}
	}
	return n
}

// honestCounted is the counted runs of labs other than lab, by ID.
func (v ledgerView) honestCounted(dishonestLab string) []string {
	var ids []string
	for id, r := range v.counted {
		if r.lab != dishonestLab {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// stillCounted reports each of ids that node i's view v no longer counts.
func (c *cluster) stillCounted(t *testing.T, i int, v ledgerView, ids []string) {
	t.Helper()
	for _, id := range ids {
		if _, ok := v.counted[id]; !ok {
			t.Errorf("%s: honest run %s no longer counts (%s)", c.nodes[i].lab.Name, id, v.excluded[id])
		}
	}
}

// settle waits until every node has the same root and cond holds on each; it returns the
// views.
func (c *cluster) settle(what string, within time.Duration, cond func(ledgerView) bool) []ledgerView {
	c.t.Helper()
	return c.settleOn(c.nodes, what, within, cond)
}

// settleOn is settle over nodes only (the honest ones, where another node's ledger differs
// by design).
func (c *cluster) settleOn(nodes []*daemonProc, what string, within time.Duration, cond func(ledgerView) bool) []ledgerView {
	c.t.Helper()
	var views []ledgerView
	var lastErr error
	err := testutil.Poll(within, func() bool {
		views, lastErr = nil, nil
		for _, d := range nodes {
			v, err := d.ledgerView()
			if err != nil {
				lastErr = fmt.Errorf("%s: %w", d.lab.Name, err)
				return false
			}
			views = append(views, v)
		}
		for _, v := range views {
			if v.root != views[0].root || !cond(v) {
				return false
			}
		}
		return true
	})
	if err != nil {
		var b strings.Builder
		for i, v := range views {
			fmt.Fprintf(&b, "%s: root %.12s counted %d excluded %v misconduct %d agents %v\n", nodes[i].lab.Name, v.root, len(v.counted), v.excluded, len(v.misconduct), v.agents)
		}
		for _, d := range c.nodes {
			fmt.Fprintf(&b, "--- %s log tail:\n%s\n", d.lab.Name, readLog(d.log))
		}
		c.t.Fatalf("%s: not within %s (last error %v):\n%s", what, within, lastErr, b.String())
	}
	return views
}

// handSign signs statement with node i's own key and certificate, as its lab's operator
// could with the CLI, and writes the envelope into dir.
func (c *cluster) handSign(i int, statement []byte, dir string) string {
	c.t.Helper()
	key, cert := c.nodeKey(i)
	return signInto(c.t, key, cert, statement, dir)
}

// signInto signs statement with key and cert and writes the envelope into dir, named by
// its ID, which it returns.
func signInto(t *testing.T, key crypto.PrivKey, cert *attest.NodeCert, statement []byte, dir string) string {
	t.Helper()
	env, id, err := attest.Sign(key, cert, statement)
	return writeEnvelope(t, dir, env, id, err)
}

// signRun signs a run of slot by lab i's node with key and cert (the node's own, or a
// second node's the lab certified), submission naming its submission, into dir.
func (c *cluster) signRun(i int, key crypto.PrivKey, cert *attest.NodeCert, slot attest.Slot, attempt int, submission string, score float64, witness, dir string) string {
	c.t.Helper()
	nodeID, err := peer.IDFromPrivateKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	pred := attest.RunPredicate{Slot: slot, Attempt: attempt, Node: nodeID.String(), Lab: c.labs.Nodes[i].Lab.ID,
		Start: time.Now().Add(-time.Second), End: time.Now(), Valid: true, Score: &score, Metric: "accuracy", Evaluator: "builtin:accuracy",
		Executor: &attest.ExecutorInfo{Name: "process", Isolation: attest.IsolationProcess, Limits: "none"}, Witness: witness}
	st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": fmt.Sprintf("%064x", sha256.Sum256([]byte(submission)))},
		Annotations: map[string]any{attest.AnnotationRole: attest.RoleSubmission}}}, attest.PredicateRunV1, pred)
	if err != nil {
		c.t.Fatal(err)
	}
	return signInto(c.t, key, cert, st, dir)
}

// witnessOf waits until node d holds a witness record of campaign by a lab other than
// notLab (the campaign's), as a dishonest lab reads one from its own store to cite it, and
// returns its ID.
func (c *cluster) witnessOf(d *daemonProc, campaign, notLab string) string {
	c.t.Helper()
	var id string
	testutil.WaitFor(c.t, 60*time.Second, "a witness of "+campaign+" on "+d.lab.Name, func() bool {
		envs, err := d.client.StoredEnvelopes(context.Background(), vstore.SetAttestations)
		if err != nil {
			return false
		}
		for _, env := range envs {
			e, err := attest.DecodeEnvelope(env)
			if err != nil {
				continue
			}
			if w, err := attest.DecodeWitness(e.Payload); err == nil && w.Campaign == campaign && w.Lab != notLab {
				id = attest.EnvelopeID(env)
				return true
			}
		}
		return false
	})
	return id
}

// nodeKey is lab i's node's own key and certificate.
func (c *cluster) nodeKey(i int) (crypto.PrivKey, *attest.NodeCert) {
	c.t.Helper()
	h := c.labs.Nodes[i].Home
	key, err := h.Identity()
	if err != nil {
		c.t.Fatal(err)
	}
	cert, err := attest.LoadNodeCert(h.CertPath())
	if err != nil {
		c.t.Fatal(err)
	}
	return key, cert
}

func (c *cluster) importInto(d *daemonProc, dir string) {
	c.t.Helper()
	rep, err := importAttestations(context.Background(), d.client, []string{dir})
	if err != nil || rep.Refused > 0 || rep.New == 0 {
		c.t.Fatalf("attest import into %s: %+v %v", d.lab.Name, rep, err)
	}
}

func TestDishonestLabCannotSteerTheLedger(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 2)
	c.waitAllDone(c.nodes, id, slots)
	liarNode := c.labs.Nodes[2]
	liarLab := liarNode.Lab.ID
	liar := c.nodes[2]
	before := c.settle("the honest campaign counted everywhere", 120*time.Second, func(v ledgerView) bool {
		return len(v.counted) == slots
	})[0]
	honestBefore := before.honestCounted(liarLab)
	if len(honestBefore) == 0 {
		t.Fatal("no honest lab ran a slot: the test would prove nothing")
	}
	t.Logf("before: root %.12s, %d runs counted (%d by honest labs), agents %v", before.root, len(before.counted), len(honestBefore), before.agents)

	// Name squatting: lab3 publishes a campaign whose agent takes the name "solver" with
	// another command, and runs it honestly. Its results must form a row of their own,
	// qualified by lab, and never merge into the original solver's.
	t.Run("name squatting", func(t *testing.T) {
		c.in(t)
		specs, err := c.labs.AgentSpecs()
		if err != nil {
			t.Fatal(err)
		}
		squat := *specs["constant"]
		squat.Name = "solver"
		n, sid := c.campaignOf(2, "squatter", tasks, []*agentspec.Spec{&squat}, 2)
		c.waitAllDone(c.nodes, sid, n)
		views := c.settle("the squatter's runs counted in a row of their own", 120*time.Second, func(v ledgerView) bool {
			return len(v.counted) == slots+2
		})
		for i, v := range views {
			c.stillCounted(t, i, v, honestBefore)
			var solvers []string
			for _, a := range v.agents {
				if strings.HasPrefix(a, "solver") {
					solvers = append(solvers, a)
				}
			}
			if len(solvers) != 2 || slices.Contains(solvers, "solver") {
				t.Errorf("%s: leaderboard rows %v: want two solver rows, each qualified by its lab", c.nodes[i].lab.Name, v.agents)
			}
		}
		before = views[0]
	})

	specs, err := c.labs.AgentSpecs()
	if err != nil {
		t.Fatal(err)
	}
	solverCID := specs["solver"].CID()

	// Grinding the tie-break: lab3 runs the honest campaign's solver cells again in a
	// campaign of its own, then re-signs its runs of them with one field varied, over and
	// over, for attestation IDs that sort low. The earlier campaign fills each cell (FillKey),
	// whatever the IDs, so the honest campaign's solver results stay the ones counted.
	t.Run("grinding the tie-break", func(t *testing.T) {
		c.in(t)
		n, gid := c.campaignOf(2, "grinder", tasks, []*agentspec.Spec{specs["solver"]}, 2)
		c.waitAllDone(c.nodes, gid, n)
		key, cert := c.nodeKey(2)
		dir := t.TempDir()
		gw := c.witnessOf(c.nodes[2], gid, liarLab)
		for seed := 0; seed < 2; seed++ {
			for variant := 0; variant < 6; variant++ {
				// One submission per seed, re-signed: duplicates of one run, IDs varied.
				c.signRun(2, key, cert, attest.Slot{Campaign: gid, Task: tasks[0], Agent: solverCID, Seed: seed}, 9, fmt.Sprint("grind", seed), 1+float64(variant)*1e-12, gw, dir)
			}
		}
		c.importInto(c.nodes[2], dir)
		views := c.settle("the grinder's campaign run and its re-signed runs stored", 120*time.Second, func(v ledgerView) bool {
			return v.envelopes >= before.envelopes+n+12
		})
		for i, v := range views {
			c.stillCounted(t, i, v, honestBefore)
			for _, r := range v.counted {
				if r.campaign == gid {
					t.Errorf("%s: run %s of the later campaign counts in a cell the earlier one fills", c.nodes[i].lab.Name, r.id)
				}
			}
		}
		before = views[0]
	})

	// Withdraw and re-fill: lab3 withdraws one of its counted results by signing another
	// submission for the same slot and attempt from a second node it certifies (two nodes of
	// one lab can collide without fault, so no consequence), then fills the cell again from a
	// private campaign with a perfect score. The equivocated cell stays closed to lab3.
	t.Run("withdraw and re-fill", func(t *testing.T) {
		c.in(t)
		var mine *runInfo
		for _, r := range before.counted {
			if r.lab == liarLab && r.campaign == id {
				mine = &r
				break
			}
		}
		if mine == nil {
			t.Skip("lab3 ran no slot of the honest campaign in this run: nothing of its own to withdraw")
		}
		secondKey, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		secondID, _ := peer.IDFromPrivateKey(secondKey)
		secondCert, err := liarNode.Lab.Certify(secondID.String(), time.Now().Add(-time.Hour), 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		slot := attest.Slot{Campaign: mine.campaign, Task: mine.task, Agent: mine.agent, Seed: mine.seed}
		c.signRun(2, secondKey, secondCert, slot, mine.attempt, "withdraw", 0.5, c.witnessOf(c.nodes[2], mine.campaign, c.labs.Nodes[1].Lab.ID), dir)
		privEnv, pid, err := c.labs.CampaignOfSpecs(2, "private", tasks, []*agentspec.Spec{mustSpec(t, specs, mine.agent)}, mine.seed+1)
		if err != nil {
			t.Fatal(err)
		}
		// The re-fill takes attempt 1 from the second node; if lab3's own node also runs that
		// slot of the private campaign (every node runs every campaign), the two collide
		// again. Either way every lab3 run of the cell from the private campaign is out, and
		// the first of them by the withdrawal rule.
		if _, err := c.nodes[2].client.PublishCampaign(context.Background(), privEnv); err != nil {
			t.Fatal(err)
		}
		refill := c.signRun(2, secondKey, secondCert, attest.Slot{Campaign: pid, Task: mine.task, Agent: mine.agent, Seed: mine.seed}, 1, "perfect", 1,
			c.witnessOf(c.nodes[2], pid, liarLab), dir)
		c.importInto(c.nodes[2], dir)
		c.waitAllDone(c.nodes, pid, mine.seed+1)
		views := c.settle("the withdrawal and the re-fill stored everywhere", 120*time.Second, func(v ledgerView) bool {
			_, ok := v.excluded[refill]
			return ok
		})
		for i, v := range views {
			withdrawn := 0
			for rid, r := range v.all {
				if r.lab == liarLab && r.campaign == pid && r.seed == mine.seed {
					if v.excluded[rid] == attest.ExcludeWithdrawn {
						withdrawn++
					}
				}
			}
			if withdrawn == 0 {
				t.Errorf("%s: no lab3 run of the cell from its private campaign is excluded as %q (re-fill %s: %q)", c.nodes[i].lab.Name, attest.ExcludeWithdrawn, refill, v.excluded[refill])
			}
			if got := v.excluded[mine.id]; got != attest.ExcludeEquivocation {
				t.Errorf("%s: lab3's withdrawn run %s: %q, want %q", c.nodes[i].lab.Name, mine.id, got, attest.ExcludeEquivocation)
			}
			for _, r := range v.counted {
				if r.lab == liarLab && r.task == mine.task && r.agent == mine.agent && r.seed == mine.seed {
					t.Errorf("%s: lab3 fills the cell it withdrew again with %s", c.nodes[i].lab.Name, r.id)
				}
			}
			for _, m := range v.misconduct {
				t.Errorf("%s: misconduct %+v for two nodes of one lab colliding (no proof of a node's fault)", c.nodes[i].lab.Name, m)
			}
			c.stillCounted(t, i, v, honestBefore)
		}
		before = views[0]
	})

	// Runs before their campaign: lab3, cut off from the others, signs perfect runs of every
	// slot of a campaign of its own before anyone has seen the campaign, then hands both to
	// the network (the runs reach lab1 by sync; lab1 relays the campaign). No other lab had
	// seen the campaign when the runs were signed, so they cite no witness: they neither
	// count nor finish the slots, which the other labs run.
	t.Run("runs before their campaign", func(t *testing.T) {
		c.in(t)
		ctx := context.Background()
		if err := liar.client.Partition(ctx, []string{c.nodes[0].peerID, c.nodes[1].peerID}); err != nil {
			t.Fatal(err)
		}
		env, qid, err := c.labs.CampaignOfSpecs(2, "pre-run", tasks, []*agentspec.Spec{specs["flaky"]}, 2)
		if err != nil {
			t.Fatal(err)
		}
		key, cert := c.nodeKey(2)
		dir := t.TempDir()
		var pre []string
		for seed := 0; seed < 2; seed++ {
			pre = append(pre, c.signRun(2, key, cert, attest.Slot{Campaign: qid, Task: tasks[0], Agent: specs["flaky"].CID(), Seed: seed}, 1, fmt.Sprint("pre", seed), 1, "", dir))
		}
		c.importInto(c.nodes[0], dir)
		if _, err := c.nodes[0].client.PublishCampaign(ctx, env); err != nil {
			t.Fatal(err)
		}
		c.waitAllDone(c.nodes[:2], qid, 2)
		if err := liar.client.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		c.connect(liar, c.nodes[0])
		views := c.settle("the pre-signed runs set aside and the campaign run by the labs", 120*time.Second, func(v ledgerView) bool {
			cells := 0
			for _, r := range v.counted {
				if r.campaign == qid {
					cells++
				}
			}
			return cells == 2
		})
		for i, v := range views {
			for _, id := range pre {
				if got := v.excluded[id]; got != attest.ExcludeUnwitnessed {
					t.Errorf("%s: pre-signed run %s: %q, want %q", c.nodes[i].lab.Name, id, got, attest.ExcludeUnwitnessed)
				}
			}
			c.stillCounted(t, i, v, honestBefore)
		}
		before = views[0]
	})

	// Veto by dispute: lab3 contradicts, with hand-signed re-scores, every counted run of
	// the strongest agent by the honest labs. The vote (one per lab, majority decides, a
	// contradiction brings in more re-scorers) keeps them counted; lab3's re-scores are
	// proof against it, and the network document's default sets its own results aside.
	t.Run("veto by dispute", func(t *testing.T) {
		c.in(t)
		dir := t.TempDir()
		// The strongest agent, solver, where an honest lab ran one of its cells; lab3's
		// daemon may have run both (its 2 of the campaign's 6 slots, about 1 run in 15),
		// and then the agent of an honest run: the rule is the same for every agent.
		target := ""
		for _, id := range before.honestCounted(liarLab) {
			if a := before.counted[id].agent; target == "" || a == solverCID {
				target = a
			}
		}
		n := 0
		for _, r := range before.counted {
			if r.lab == liarLab || r.agent != target {
				continue
			}
			zero := 0.0
			st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": strings.Repeat("00", 32)}}},
				attest.PredicateRescoreV1, attest.RescorePredicate{Run: r.id, Valid: true, Score: &zero, Metric: r.metric,
					Evaluator: "builtin:" + r.metric, Node: liarNode.PeerID, Lab: liarLab, Time: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			c.handSign(2, st, dir)
			n++
		}
		if n == 0 {
			t.Fatal("no honest run to dispute")
		}
		c.importInto(c.nodes[2], dir)
		views := c.settle("the veto overruled and lab3 set aside", 120*time.Second, func(v ledgerView) bool {
			for _, r := range v.counted {
				if r.lab == liarLab {
					return false
				}
			}
			// Every honest run that counted still does; an honest run that lab3's result had
			// shadowed in its cell may now count too.
			for _, id := range before.honestCounted(liarLab) {
				if _, ok := v.counted[id]; !ok {
					return false
				}
			}
			return len(v.misconduct) > 0
		})
		for i, v := range views {
			for _, m := range v.misconduct {
				if m.Principal != liarLab || !m.SetAside {
					t.Errorf("%s: misconduct %+v: want lab3's, setting its results aside", c.nodes[i].lab.Name, m)
				}
			}
			offender := 0
			for id, r := range before.counted {
				if r.lab == liarLab && v.excluded[id] == attest.ExcludeOffender {
					offender++
				}
			}
			if offender == 0 {
				t.Errorf("%s: none of lab3's runs is excluded as an offender's: %v", c.nodes[i].lab.Name, v.excluded)
			}
		}
		t.Logf("after the veto: %d honest runs still counted on every node, %d misconduct entries against lab3, root %.12s", len(views[0].honestCounted(liarLab)), len(views[0].misconduct), views[0].root)
	})
}

// TestDishonestLabCannotStarveOrAbort: lab3 (node 2) sends, through its own daemon's
// test-only hook, infra releases for attempts it never claimed — as many per slot as the
// retry cap — and signs a "result" of a slot an honest node is running. The honest nodes
// ignore both, say so in their logs, run every slot, and the honest run is not cut short.
func TestDishonestLabCannotStarveOrAbort(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic")
	liar := c.nodes[2]
	specs, err := c.labs.AgentSpecs()
	if err != nil {
		t.Fatal(err)
	}
	// Campaign A keeps every node busy, two runs at once on each of three nodes, with a
	// gated agent (it leaves no submission: a valid, failed result) whose runs end only when
	// the test removes the hold file: the victim's run below is still live when the liar's
	// result reaches it, however slowly this machine gets it there.
	hold, busyID := c.fillWithGatedRuns(c.nodes, tasks)
	// Campaign B waits for room; meanwhile the liar forges the releases that would fail
	// each of its slots for good.
	constant := specs["constant"]
	_, id := c.campaignOf(1, "starved", tasks, []*agentspec.Spec{constant}, 3)
	var slots []string
	for seed := 0; seed < 3; seed++ {
		slots = append(slots, protocol.SlotID(attest.Slot{Campaign: id, Task: tasks[0], Agent: constant.CID(), Seed: seed}))
	}
	testutil.WaitFor(t, 60*time.Second, "the starved campaign prepared on the honest nodes", func() bool {
		for _, d := range c.nodes[:2] {
			if st, err := d.client.CampaignStatus(context.Background(), id); err != nil || !st.Ready {
				return false
			}
		}
		return true
	})
	for _, s := range slots {
		for attempt := 1; attempt <= protocol.DefaultMaxInfraAttempts; attempt++ {
			msg := protocol.ClaimMessage{Kind: protocol.ClaimKindRelease, Campaign: id, Slot: s, Lamport: 1, Attempt: attempt, Reason: protocol.ReleaseInfra}
			if err := liar.client.TestClaim(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Pre-emption: while an honest node runs a gated slot, the liar signs a perfect result of it.
	var victim *daemonProc
	var victimSlot node.SlotReport
	testutil.WaitFor(t, 60*time.Second, "an honest node running a gated slot", func() bool {
		for _, d := range c.nodes[:2] {
			st, err := d.client.CampaignStatus(context.Background(), busyID)
			if err != nil {
				continue
			}
			for _, s := range st.Slots {
				if s.State == "running" {
					victim, victimSlot = d, s
					return true
				}
			}
		}
		return false
	})
	perfect := 1.0
	pred := attest.RunPredicate{
		Slot: attest.Slot{Campaign: busyID, Task: victimSlot.Task, Agent: victimSlot.Agent, Seed: victimSlot.Seed}, Attempt: 1,
		Node: liar.peerID, Lab: liar.lab.Lab.ID, Start: time.Now().Add(-time.Second), End: time.Now(),
		Valid: true, Score: &perfect, Metric: "accuracy", Evaluator: "builtin:accuracy",
		Executor: &attest.ExecutorInfo{Name: "process", Isolation: attest.IsolationProcess, Limits: "none"},
		Witness:  c.witnessOf(liar, busyID, c.labs.Nodes[1].Lab.ID),
	}
	st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": strings.Repeat("ab", 32)},
		Annotations: map[string]any{attest.AnnotationRole: attest.RoleSubmission}}}, attest.PredicateRunV1, pred)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fake := c.handSign(2, st, dir)
	c.importInto(liar, dir)

	// The victim's run is held live until the victim has ignored the liar's result: only
	// then does it end and finish the slot with its own.
	ignored := "ignored from " + liar.peerID + " on slot " + victimSlot.ID
	if err := testutil.Poll(60*time.Second, func() bool { return victim.logHas(ignored) }); err != nil {
		t.Fatalf("%s's log does not name the result it ignored from the liar (%s), its run of %s live: %v\n%s", victim.lab.Name, fake, victimSlot.ID, err, fullLog(t, victim.log))
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}

	// Every slot of both campaigns is run on the honest nodes, none failed; the victim's own
	// run of its slot finished (it was not aborted); the honest logs name what they ignored.
	// A slot failed even for a moment is starved: nobody would claim it again.
	testutil.WaitFor(t, 120*time.Second, "every slot of both campaigns done on the honest nodes", func() bool {
		done := true
		for _, d := range c.nodes[:2] {
			for _, cid := range []string{busyID, id} {
				rep, err := d.client.CampaignStatus(context.Background(), cid)
				if err != nil {
					return false
				}
				if rep.Status.Failed != 0 {
					t.Fatalf("%s: %d slots of %s failed: forged releases starved them", d.lab.Name, rep.Status.Failed, cid)
				}
				done = done && rep.Status.Done == rep.Status.Slots
			}
		}
		return done
	})
	if err := testutil.Poll(60*time.Second, func() bool {
		rep, err := victim.client.CampaignStatus(context.Background(), busyID)
		if err != nil {
			return false
		}
		for _, s := range rep.Slots {
			if s.ID != victimSlot.ID {
				continue
			}
			for _, r := range s.Runs {
				if r.PeerID == victim.peerID {
					return true
				}
			}
		}
		return false
	}); err != nil {
		t.Fatalf("%s's own run of %s, which it was running when the liar published a result of it, never came: %v\n%s", victim.lab.Name, victimSlot.ID, err, fullLog(t, victim.log))
	}
	for _, d := range c.nodes[:2] {
		if log := fullLog(t, d.log); !strings.Contains(log, "infra release of attempt") {
			t.Errorf("%s's log does not name the forged releases it ignored:\n%s", d.lab.Name, log)
		}
	}
}

// campaignOf signs a campaign of specs by lab signer and publishes it on that lab's node;
// it returns the number of slots and the campaign ID.
func (c *cluster) campaignOf(signer int, title string, tasks []string, specs []*agentspec.Spec, seeds int) (slots int, id string) {
	c.t.Helper()
	env, id, err := c.labs.CampaignOfSpecs(signer, title, tasks, specs, seeds)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nodes[signer].client.PublishCampaign(context.Background(), env); err != nil {
		c.t.Fatal(err)
	}
	return len(tasks) * len(specs) * seeds, id
}

func fullLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustSpec is the example spec whose CID is cid.
func mustSpec(t *testing.T, specs map[string]*agentspec.Spec, cid string) *agentspec.Spec {
	t.Helper()
	for _, s := range specs {
		if s.CID() == cid {
			return s
		}
	}
	t.Fatalf("no example agent spec has CID %s", cid)
	return nil
}

// claimsCluster is runningCluster under a network document that requires claim records
// (ledger.claims "required", signed by every lab), as `evalmesh network create` writes.
func claimsCluster(t *testing.T, tasks ...string) (*cluster, []string) {
	t.Helper()
	return docCluster(t, func(d *protocol.NetworkDoc) { d.Ledger.Claims = protocol.ClaimsRequired }, tasks...)
}

// docCluster is runningCluster under the demo's network document changed by edit, signed by
// every lab.
func docCluster(t *testing.T, edit func(*protocol.NetworkDoc), tasks ...string) (*cluster, []string) {
	t.Helper()
	c := newCluster(t, 3)
	c.useDoc(edit)
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	return c, c.addTasks(tasks...)
}

// useDoc replaces the demo's network document by the one edit makes of it, signed by every
// lab, in every node's home (before the daemons start).
func (c *cluster) useDoc(edit func(*protocol.NetworkDoc)) {
	t := c.t
	t.Helper()
	doc, err := protocol.ParseNetworkDoc(c.labs.Doc.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	edit(doc)
	doc.Signatures = []protocol.NetworkSignature{}
	for _, n := range c.labs.Nodes {
		if err := doc.Sign(n.Name, n.Lab); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.labs.Nodes {
		if err := os.WriteFile(n.Home.NetworkDocPath(), doc.File(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.labs.Doc = doc
}

// secondNode is a node key lab i certifies besides its daemon's: a node that never claims
// anything through the protocol, only signs what the lab's operator hands it.
func (c *cluster) secondNode(i int) (crypto.PrivKey, *attest.NodeCert, string) {
	c.t.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(key)
	cert, err := c.labs.Nodes[i].Lab.Certify(id.String(), time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		c.t.Fatal(err)
	}
	return key, cert, id.String()
}

// TestDishonestLabCannotPreemptByRecord: where claim records are required, lab3 (node 2)
// signs, from a second node it certifies, (a) perfect "results" of every slot of a campaign
// before any node has claimed them, and (b) a claim record and a result for the attempt an
// honest node is running, ranked below the honest node's claim (class 6, pre-emption); then
// (d) a claim record ranked above an honest runner's, and (c) release records for attempts
// it never claimed (class 7, starvation by record). None of it finishes, fails or aborts
// anything on the honest nodes beyond what the drawn rank gives: they run every slot, the
// outranked honest runner gives its attempt up and the slot is run again, the attempt lab3
// took and never ran is listed against lab3, lab3's results are excluded as not its
// attempt's holder's, and its forged releases are proven misconduct that sets its results
// aside.
func TestDishonestLabCannotPreemptByRecord(t *testing.T) {
	skipShortFaults(t)
	c, tasks := claimsCluster(t, "arithmetic")
	liar := c.nodes[2]
	liarLab := c.labs.Nodes[2].Lab.ID
	ctx := context.Background()
	specs, err := c.labs.AgentSpecs()
	if err != nil {
		t.Fatal(err)
	}
	key, cert, second := c.secondNode(2)
	signClaim := func(slot attest.Slot, attempt int, witness, dir string) {
		env, id, err := attest.NewClaimRecord(key, cert, slot, attempt, witness, time.Now())
		writeEnvelope(t, dir, env, id, err)
	}

	// liarFirst says whether lab3's second node outranks both honest daemons on attempt 1 of
	// every seed of campaign id, or, with want false, both outrank it on every seed. The
	// rank is drawn from the slot (that is the rule), so (b) and (d) below choose their
	// campaigns by it: whichever slot an honest daemon runs, lab3's record falls the way the
	// part needs. Eight seeds: each costs a factor of 3 in tries, and the honest daemons
	// still run several.
	const seeds = 8
	liarFirst := func(id string, spec *agentspec.Spec, want bool) bool {
		for seed := 0; seed < seeds; seed++ {
			slot := attest.Slot{Campaign: id, Task: tasks[0], Agent: spec.CID(), Seed: seed}
			liarRank := attest.RankOf(slot, 1, liarLab, second)
			for _, d := range c.nodes[:2] {
				if liarRank.Less(attest.RankOf(slot, 1, d.lab.Lab.ID, d.peerID)) != want {
					return false
				}
			}
		}
		return true
	}
	publish := func(env []byte) {
		if _, err := c.nodes[1].client.PublishCampaign(ctx, env); err != nil {
			t.Fatal(err)
		}
	}

	// A slow campaign keeps every node busy; a second waits for room.
	slow := &agentspec.Spec{Name: "slow", Version: "1.0.0", Command: []string{"/bin/sleep", "8"}}
	busyEnv, busyID := c.campaignWhere(1, "busy", tasks, []*agentspec.Spec{slow}, seeds, time.Now().Add(24*time.Hour), func(id string) bool {
		return liarFirst(id, slow, false)
	})
	publish(busyEnv)
	busySlots := seeds
	constant := specs["constant"]
	laterSlots, laterID := c.campaignOf(1, "later", tasks, []*agentspec.Spec{constant}, 3)
	honestLab := c.labs.Nodes[1].Lab.ID // the campaigns' lab: a witness must be another's

	// (a) Results of slots nobody has claimed yet.
	dir := t.TempDir()
	var fabricated []string
	lw := c.witnessOf(liar, laterID, honestLab)
	for seed := 0; seed < laterSlots; seed++ {
		fabricated = append(fabricated, c.signRun(2, key, cert, attest.Slot{Campaign: laterID, Task: tasks[0], Agent: constant.CID(), Seed: seed}, 1, fmt.Sprint("fabricated", seed), 1, lw, dir))
	}

	// (b) The attempt an honest node runs, where lab3's claim ranks below the runner's.
	var victim *daemonProc
	var victimSlot node.SlotReport
	testutil.WaitFor(t, 120*time.Second, "an honest node running a slow slot that lab3's claim ranks below", func() bool {
		for _, d := range c.nodes[:2] {
			st, err := d.client.CampaignStatus(ctx, busyID)
			if err != nil {
				continue
			}
			for _, s := range st.Slots {
				slot := attest.Slot{Campaign: busyID, Task: s.Task, Agent: s.Agent, Seed: s.Seed}
				if s.State == "running" && attest.RankOf(slot, 1, d.lab.Lab.ID, d.peerID).Less(attest.RankOf(slot, 1, liarLab, second)) {
					victim, victimSlot = d, s
					return true
				}
			}
		}
		return false
	})
	vs := attest.Slot{Campaign: busyID, Task: victimSlot.Task, Agent: victimSlot.Agent, Seed: victimSlot.Seed}
	bw := c.witnessOf(liar, busyID, honestLab)
	signClaim(vs, 1, bw, dir)
	preempt := c.signRun(2, key, cert, vs, 1, "pre-empt", 1, bw, dir)
	c.importInto(liar, dir)

	// Every slot of both campaigns is run by the daemons, none failed, and the victim's own
	// run of its slot comes (it was not aborted).
	testutil.WaitFor(t, 180*time.Second, "every slot of both campaigns done on the honest nodes", func() bool {
		done := true
		for _, d := range c.nodes[:2] {
			for _, cid := range []string{busyID, laterID} {
				rep, err := d.client.CampaignStatus(ctx, cid)
				if err != nil {
					return false
				}
				if rep.Status.Failed != 0 {
					t.Fatalf("%s: %d slots of %s failed", d.lab.Name, rep.Status.Failed, cid)
				}
				done = done && rep.Status.Done == rep.Status.Slots
			}
		}
		return done
	})
	daemons := map[string]bool{}
	for _, d := range c.nodes {
		daemons[d.peerID] = true
	}
	// A fabricated result is excluded as not its attempt's holder's; where lab3's own daemon
	// also ran that slot's attempt, the two are lab3 equivocating (two of its nodes, no
	// misconduct), and lab3 loses its own result of the cell: its own doing.
	views := c.settle("every slot covered by a daemon's run, the fabricated ones excluded", 120*time.Second, func(v ledgerView) bool {
		if v.excluded[preempt] != attest.ExcludeNotHolder {
			return false
		}
		for _, id := range fabricated {
			if r := v.excluded[id]; r != attest.ExcludeNotHolder && r != attest.ExcludeEquivocation {
				return false
			}
		}
		cells := map[string]bool{}
		for id, r := range v.all {
			if (r.campaign != busyID && r.campaign != laterID) || !daemons[r.node] {
				continue
			}
			if _, ok := v.counted[id]; ok || (r.lab == liarLab && v.excluded[id] == attest.ExcludeEquivocation) {
				cells[fmt.Sprint(r.campaign, r.seed)] = true
			}
		}
		return len(cells) == busySlots+laterSlots
	})
	for i, v := range views {
		for id, r := range v.all {
			if daemons[r.node] && r.lab != liarLab && (r.campaign == busyID || r.campaign == laterID) {
				// Two honest nodes that raced for a slot both ran it: one fills the cell.
				if _, ok := v.counted[id]; !ok && v.excluded[id] != attest.ExcludeSuperseded {
					t.Errorf("%s: honest run %s of %s seed %d does not count (%s)", c.nodes[i].lab.Name, id, r.campaign, r.seed, v.excluded[id])
				}
			}
		}
		for _, r := range v.counted {
			if r.node == second {
				t.Errorf("%s: lab3's run %s from a node that claimed nothing counts", c.nodes[i].lab.Name, r.id)
			}
		}
		found := false
		for _, r := range v.counted {
			found = found || (r.node == victim.peerID && r.campaign == busyID && r.task == vs.Task && r.agent == vs.Agent && r.seed == vs.Seed)
		}
		if !found {
			t.Errorf("%s: the victim's own run of %s does not count", c.nodes[i].lab.Name, victimSlot.ID)
		}
	}
	if log := fullLog(t, victim.log); strings.Contains(log, "aborted run of slot "+victimSlot.ID) || strings.Contains(log, "giving the attempt up") {
		t.Errorf("%s gave up or aborted its run of %s:\n%s", victim.lab.Name, victimSlot.ID, log)
	}
	honestBefore := views[0].honestCounted(liarLab)
	notHeld := 0
	for _, id := range append(slices.Clone(fabricated), preempt) {
		if views[0].excluded[id] == attest.ExcludeNotHolder {
			notHeld++
		}
	}
	t.Logf("pre-emption: %d of %d fabricated results excluded as %q on every node (the rest collided with lab3's own runs: equivocation); %d honest runs counted; root %.12s",
		notHeld, len(fabricated)+1, attest.ExcludeNotHolder, len(honestBefore), views[0].root)

	// (d) A claim record that outranks the runner's: the runner gives the attempt up (the
	// rank is drawn, not chosen), the slot is run again under the next attempt, and the
	// attempt lab3 took and never ran is listed against lab3 on every node.
	// An agent of its own, so the busy campaign's runs of slow do not fill its cells.
	slowB := &agentspec.Spec{Name: "slow-b", Version: "1.0.0", Command: []string{"/bin/sleep", "8"}}
	outEnv, outID := c.campaignWhere(1, "outranked", tasks, []*agentspec.Spec{slowB}, seeds, time.Now().Add(24*time.Hour), func(id string) bool {
		return liarFirst(id, slowB, true)
	})
	publish(outEnv)
	outSlots := seeds
	var runner *daemonProc
	var runSlot node.SlotReport
	testutil.WaitFor(t, 60*time.Second, "an honest node running a slot that lab3's claim ranks above", func() bool {
		for _, d := range c.nodes[:2] {
			st, err := d.client.CampaignStatus(ctx, outID)
			if err != nil {
				continue
			}
			for _, s := range st.Slots {
				slot := attest.Slot{Campaign: outID, Task: s.Task, Agent: s.Agent, Seed: s.Seed}
				if s.State == "running" && attest.RankOf(slot, 1, liarLab, second).Less(attest.RankOf(slot, 1, d.lab.Lab.ID, d.peerID)) {
					runner, runSlot = d, s
					return true
				}
			}
		}
		return false
	})
	taken := attest.Slot{Campaign: outID, Task: runSlot.Task, Agent: runSlot.Agent, Seed: runSlot.Seed}
	dir = t.TempDir()
	signClaim(taken, 1, c.witnessOf(liar, outID, honestLab), dir)
	c.importInto(liar, dir)
	c.waitAllDone(c.nodes[:2], outID, outSlots)
	views = c.settle("the outranked attempt listed against lab3 and the slot run again", 120*time.Second, func(v ledgerView) bool {
		listed := slices.ContainsFunc(v.unanswered, func(u attest.Unanswered) bool {
			return u.Principal == liarLab && u.Node == second && u.Slot == taken && u.Attempt == 1
		})
		again := false
		for _, r := range v.counted {
			again = again || (r.campaign == outID && r.seed == taken.Seed && r.attempt > 1 && daemons[r.node])
		}
		return listed && again
	})
	// The runner gives the attempt up when the record reaches it while its run is live; when
	// the run finished first (a race the test cannot time: signing, importing and gossiping
	// the record against an 8 s run under load), its result is not the holder's and is
	// excluded as such on every node. Either way the slot ran again and counts (above).
	gaveUp := strings.Contains(fullLog(t, runner.log), "outranks this node's: giving the attempt up")
	finishedFirst := false
	for id, r := range views[0].all {
		if r.node == runner.peerID && r.campaign == outID && r.seed == taken.Seed && r.attempt == 1 {
			finishedFirst = true
			for i, v := range views {
				if v.excluded[id] != attest.ExcludeNotHolder {
					t.Errorf("%s: the outranked runner's finished run %s of attempt 1 is %q, want excluded as %q", c.nodes[i].lab.Name, id, v.excluded[id], attest.ExcludeNotHolder)
				}
			}
		}
	}
	if !gaveUp && !finishedFirst {
		t.Errorf("%s neither gave up the attempt lab3's record outranks nor finished it first:\n%s", runner.lab.Name, fullLog(t, runner.log))
	}
	t.Logf("outranked runner %s: gave the attempt up %v, finished its run before the record came %v", runner.lab.Name, gaveUp, finishedFirst)
	for i, v := range views {
		c.stillCounted(t, i, v, honestBefore)
	}
	honestBefore = views[0].honestCounted(liarLab)

	// (c) Release records of attempts lab3 never claimed, for every slot of a campaign
	// still to run: they fail nothing, and are proof against lab3.
	_, starvedID := c.campaignOf(1, "starved by record", tasks, []*agentspec.Spec{constant}, 2)
	dir = t.TempDir()
	var forged []string
	for seed := 0; seed < 2; seed++ {
		for attempt := 1; attempt <= protocol.DefaultMaxInfraAttempts; attempt++ {
			env, id, err := attest.NewReleaseRecord(key, cert, attest.Slot{Campaign: starvedID, Task: tasks[0], Agent: constant.CID(), Seed: seed}, attempt, attest.ReleaseInfra, "", time.Now())
			forged = append(forged, writeEnvelope(t, dir, env, id, err))
		}
	}
	c.importInto(liar, dir)
	c.waitAllDone(c.nodes[:2], starvedID, 2)
	views = c.settle("the forged releases proven against lab3 and its results set aside", 120*time.Second, func(v ledgerView) bool {
		n := 0
		for _, m := range v.misconduct {
			if m.Kind == attest.MisconductForgedRelease {
				n++
			}
		}
		for _, r := range v.counted {
			if r.lab == liarLab {
				return false
			}
		}
		return n == len(forged)
	})
	for i, v := range views {
		for _, m := range v.misconduct {
			if m.Kind == attest.MisconductForgedRelease && (m.Principal != liarLab || !m.SetAside || !slices.Contains(forged, m.Evidence)) {
				t.Errorf("%s: misconduct %+v: want lab3's forged release, setting its results aside", c.nodes[i].lab.Name, m)
			}
		}
		c.stillCounted(t, i, v, honestBefore)
	}
}

// witnessedByOthers waits until node d holds witness records of campaign by every lab of the
// cluster but notLab (the campaign's): from then on its admission time is fixed.
func (c *cluster) witnessedByOthers(d *daemonProc, campaign, notLab string) {
	c.t.Helper()
	testutil.WaitFor(c.t, 60*time.Second, "witnesses of "+campaign+" by every other lab on "+d.lab.Name, func() bool {
		envs, err := d.client.StoredEnvelopes(context.Background(), vstore.SetAttestations)
		if err != nil {
			return false
		}
		by := map[string]bool{}
		for _, env := range envs {
			if e, err := attest.DecodeEnvelope(env); err == nil {
				if w, err := attest.DecodeWitness(e.Payload); err == nil && w.Campaign == campaign && w.Lab != notLab {
					by[w.Lab] = true
				}
			}
		}
		return len(by) == len(c.labs.Nodes)-1
	})
}

// TestDishonestLabCannotChooseWhatCountsUnderCaps: under ledger.caps (2 agents, 2 campaigns
// per lab), lab3 (node 2) has a campaign of "solver" counted, then publishes a campaign of
// two agents named to sort first ("aaa-1", "aaa-2": under the old rule, which kept a lab's
// first agents by name, they pushed solver's counted runs out), then a campaign of one more
// agent, then a fourth campaign. Every honest node refuses the second (agents) and the
// fourth (campaigns) whole, lists them in its ledger report, and keeps counting the honest
// labs' runs and lab3's first and third campaigns: no counted run was dropped, and no later
// campaign displaced an earlier one. No honest node runs a slot of a refused campaign (its
// coordinator applies the ledger's admission rule and logs why); the result lab3 signs by
// hand for each is refused too.
func TestDishonestLabCannotChooseWhatCountsUnderCaps(t *testing.T) {
	skipShortFaults(t)
	c, tasks := docCluster(t, func(d *protocol.NetworkDoc) {
		d.Ledger.Caps = &protocol.LedgerCaps{AgentsPerLab: 2, CampaignsPerLab: 2}
	}, "arithmetic")
	liarLab := c.labs.Nodes[2].Lab.ID
	liar := c.nodes[2]
	specs, err := c.labs.AgentSpecs()
	if err != nil {
		t.Fatal(err)
	}
	honestID, honestSlots := c.publish(c.nodes[1], tasks, []string{"constant", "heuristic"}, 3)
	c.waitAllDone(c.nodes, honestID, honestSlots)
	before := c.settle("the honest campaign counted everywhere", 120*time.Second, func(v ledgerView) bool {
		return len(v.counted) == honestSlots
	})[0]
	// The honest campaign's results, whichever lab ran each slot.
	var honestBefore []string
	for id := range before.counted {
		honestBefore = append(honestBefore, id)
	}
	if len(before.honestCounted(liarLab)) == 0 {
		t.Fatal("no honest lab ran a slot: the test would prove nothing")
	}

	// publish signs and publishes one lab3 campaign, waits until both other labs have
	// witnessed it (its admission time fixed) and, for a campaign the caps admit, until every
	// node has run it; one they refuse no honest node runs: each says so in its log (the
	// coordinator applies the ledger's admission rule). It returns the campaign's ID.
	publish := func(title string, refused bool, agents ...*agentspec.Spec) string {
		n, id := c.campaignOf(2, title, tasks, agents, 1)
		c.witnessedByOthers(liar, id, liarLab)
		if !refused {
			c.waitAllDone(c.nodes, id, n)
			return id
		}
		for _, d := range c.nodes[:2] {
			testutil.WaitFor(t, 60*time.Second, d.lab.Name+" declining over-cap campaign "+id, func() bool {
				return strings.Contains(fullLog(t, d.log), "campaign "+id+" not taken: its campaign is over its lab's cap")
			})
		}
		return id
	}
	first := publish("first", false, specs["solver"])
	c.settle("lab3's first campaign counted", 120*time.Second, func(v ledgerView) bool {
		return len(v.counted) == honestSlots+1
	})
	a1, a2 := *specs["constant"], *specs["heuristic"]
	a1.Name, a2.Name = "aaa-1", "aaa-2"
	overAgents := publish("sorts first", true, &a1, &a2)
	third := publish("third", false, specs["flaky"])
	overCampaigns := publish("fourth", true, specs["solver"])
	// Nobody ran the refused campaigns; lab3 signs a result of each by hand, as its
	// operator could: the ledger still refuses it.
	dir := t.TempDir()
	key, cert := c.nodeKey(2)
	for _, r := range []struct {
		campaign string
		spec     *agentspec.Spec
	}{{overAgents, &a1}, {overCampaigns, specs["solver"]}} {
		slot := attest.Slot{Campaign: r.campaign, Task: tasks[0], Agent: r.spec.CID(), Seed: 0}
		c.signRun(2, key, cert, slot, 1, "refused "+r.campaign, 1, c.witnessOf(liar, r.campaign, liarLab), dir)
	}
	c.importInto(liar, dir)

	campaignRuns := func(v ledgerView, campaign string) (ids []string) {
		for id, r := range v.all {
			if r.campaign == campaign {
				ids = append(ids, id)
			}
		}
		return ids
	}
	views := c.settle("lab3's over-cap campaigns refused everywhere", 120*time.Second, func(v ledgerView) bool {
		return len(v.refused) == 2 && len(campaignRuns(v, overCampaigns)) > 0 && len(campaignRuns(v, overAgents)) > 0
	})
	for i, v := range views {
		name := c.nodes[i].lab.Name
		c.stillCounted(t, i, v, honestBefore)
		refused := map[string]attest.RefusedCampaign{}
		for _, r := range v.refused {
			refused[r.Campaign] = r
		}
		for _, want := range []struct{ id, says string }{{overAgents, "at most 2"}, {overCampaigns, "at most 2"}} {
			r, ok := refused[want.id]
			if !ok || r.Lab != liarLab || !strings.Contains(r.Reason, want.says) {
				t.Errorf("%s: campaign %s not refused as lab3's over its cap in the ledger report: %+v", name, want.id, v.refused)
			}
			for _, id := range campaignRuns(v, want.id) {
				if got := v.excluded[id]; got != attest.ExcludeCampaignOverCap {
					t.Errorf("%s: run %s of refused campaign %s: %q, want %q", name, id, want.id, got, attest.ExcludeCampaignOverCap)
				}
				if r := v.all[id]; r.lab != liarLab {
					t.Errorf("%s: node %s of %s ran slot %s/%s of campaign %s, which the caps refuse", name, r.node, r.lab, r.task, r.agent, want.id)
				}
			}
		}
		for _, admitted := range []string{first, third} {
			counted := 0
			for _, id := range campaignRuns(v, admitted) {
				if _, ok := v.counted[id]; ok {
					counted++
				} else if v.excluded[id] == attest.ExcludeCampaignOverCap {
					t.Errorf("%s: run %s of lab3's admitted campaign %s: %q", name, id, admitted, v.excluded[id])
				}
			}
			if counted != 1 { // one task, one agent, one seed
				t.Errorf("%s: %d counted runs of lab3's admitted campaign %s, want 1", name, counted, admitted)
			}
		}
	}
}

// drawnCluster is four labs under a network document that draws re-scorers (ledger.rescorers
// "drawn", replication 1, signed by every lab): daemons for lab1, lab2 and lab3 (node 2, the
// dishonest lab's, on the docker executor: it re-scores but runs nothing, so every run of
// the process agents is an honest lab's); lab4 runs no daemon, and its keys are in the
// test's hands — a lab colluding with lab3. With drawKeys the document names a draw key for
// every lab (`evalmesh network draw-key`), each daemon holds its lab's as HOME/draw.key, and
// the keys, by lab index, are returned.
func drawnCluster(t *testing.T, drawKeys bool, tasks ...string) (*cluster, []string, []crypto.PrivKey) {
	t.Helper()
	c := newCluster(t, 4)
	var keys []crypto.PrivKey
	c.useDoc(func(doc *protocol.NetworkDoc) {
		doc.Ledger.Rescorers, doc.Ledger.Replication = protocol.RescorersDrawn, 1
		if !drawKeys {
			return
		}
		for _, n := range c.labs.Nodes {
			d, _, err := networkDrawKey(writeDoc(t, doc), n.Name, n.Home.DrawKeyPath())
			if err != nil {
				t.Fatal(err)
			}
			// d is the document read back from the file the command wrote, a new value:
			// assigning it to doc would leave the draw keys out of the one useDoc signs.
			*doc = *d
			key, err := home.ReadKey(n.Home.DrawKeyPath(), "draw key")
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, key)
		}
	})
	c.onDocker(2)
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	return c, c.addTasks(tasks...), keys
}

// vetoesAreNoVotes waits until every daemon lists each of vetoes (re-score IDs, what they
// are) as a no vote whose why says why, and checks that the honest runs still count.
func (c *cluster) vetoesAreNoVotes(t *testing.T, what string, vetoes []string, why string, honest []string) {
	t.Helper()
	views := c.settle("the "+what+" vetoes stored and listed as no votes", 120*time.Second, func(v ledgerView) bool {
		n := 0
		for _, nv := range v.noVotes {
			if slices.Contains(vetoes, nv.Rescore) {
				n++
			}
		}
		return n == len(vetoes)
	})
	for i, v := range views {
		c.stillCounted(t, i, v, honest)
		for _, nv := range v.noVotes {
			if slices.Contains(vetoes, nv.Rescore) && !strings.Contains(nv.Why, why) {
				t.Errorf("%s: no-vote %+v: want its why to say %q", c.nodes[i].lab.Name, nv, why)
			}
		}
	}
}

// drawnSetup is a drawnCluster on the arithmetic task once lab2's campaign of the fault
// agents (10 seeds) counts on every node: the labs' IDs by index, a ledger view then, and
// its runs of labs other than lab3's. The campaign is chosen to have two slots where,
// whichever honest lab runs attempt 1, the other is drawn to re-score it and lab3 is not
// (vetoableSlots): the tests' vetoes need such runs, and left to chance the campaign had
// none about one time in 200.
type drawnSetup struct {
	c        *cluster
	tasks    []string
	drawKeys []crypto.PrivKey
	labIDs   []string
	before   ledgerView
	honest   []string
}

func newDrawnSetup(t *testing.T, drawKeys bool) drawnSetup {
	t.Helper()
	var s drawnSetup
	s.c, s.tasks, s.drawKeys = drawnCluster(t, drawKeys, "arithmetic")
	for _, n := range s.c.labs.Nodes {
		s.labIDs = append(s.labIDs, n.Lab.ID)
	}
	keys := s.drawKeys
	if !drawKeys {
		for i := 0; i < 3; i++ {
			key, _ := s.c.nodeKey(i)
			keys = append(keys, key)
		}
	}
	all, err := s.c.labs.AgentSpecs()
	if err != nil {
		t.Fatal(err)
	}
	var specs []*agentspec.Spec
	for _, name := range faultAgents {
		specs = append(specs, all[name])
	}
	const seeds = 10
	env, id := s.c.campaignWhere(1, "fault test", s.tasks, specs, seeds, time.Now().Add(24*time.Hour), func(id string) bool {
		return s.vetoableSlots(t, keys, id, specs, seeds) >= 2
	})
	if _, err := s.c.nodes[1].client.PublishCampaign(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	slots := len(s.tasks) * len(specs) * seeds
	// lab3's daemon lists the slots as not its to run, never done; its ledger is settled below.
	s.c.waitAllDone(s.c.nodes[:2], id, slots)
	s.before = s.c.settle("the honest campaign counted everywhere", 180*time.Second, func(v ledgerView) bool {
		return len(v.counted) == slots
	})[0]
	s.honest = s.before.honestCounted(s.labIDs[2])
	return s
}

// vetoableSlots is how many slots of campaign id (specs × seeds on s's tasks) are, on
// attempt 1, whichever of lab1 and lab2 runs them, drawn for the other (a draw under 1/3 by
// keys, the labs' re-scorer draw keys by index) and not for lab3 even after one re-score
// timeout (a draw of at least 2/3): lab3's daemon stands in for such a run only when the
// drawn lab has been silent for two timeouts, so it is left to the honest lab.
func (s drawnSetup) vetoableSlots(t *testing.T, keys []crypto.PrivKey, id string, specs []*agentspec.Spec, seeds int) int {
	t.Helper()
	n := 0
	for _, task := range s.tasks {
		for _, spec := range specs {
			for seed := 0; seed < seeds; seed++ {
				ok := true
				for runner := 0; runner < 2 && ok; runner++ {
					r := runInfo{campaign: id, task: task, agent: spec.CID(), seed: seed, attempt: 1, lab: s.labIDs[runner]}
					u, _ := rescoreDraw(t, keys[1-runner], r)
					u3, _ := rescoreDraw(t, keys[2], r)
					ok = u < attest.DrawThreshold(1, 3, 0) && u3 >= attest.DrawThreshold(1, 3, 1)
				}
				if ok {
					n++
				}
			}
		}
	}
	return n
}

// honestWhere is the honest runs of s for which keep says yes, given the index of the one
// honest lab that is a candidate to re-score each (the other of lab1 and lab2).
func (s drawnSetup) honestWhere(keep func(r runInfo, other int) bool) []runInfo {
	var out []runInfo
	for _, id := range s.honest {
		r := s.before.counted[id]
		if keep(r, 1-slices.Index(s.labIDs, r.lab)) {
			out = append(out, r)
		}
	}
	return out
}

// writeDoc writes doc to a file of its own, for the CLI's functions that edit one.
func writeDoc(t *testing.T, doc *protocol.NetworkDoc) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "network.json")
	if err := os.WriteFile(path, doc.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rescoreDraw is node key's re-scorer draw (attest.DrawFraction) for run r, and its proof.
func rescoreDraw(t *testing.T, key crypto.PrivKey, r runInfo) (float64, string) {
	t.Helper()
	pred := &attest.RunPredicate{Slot: attest.Slot{Campaign: r.campaign, Task: r.task, Agent: r.agent, Seed: r.seed}, Attempt: r.attempt, Lab: r.lab}
	proof, beta, err := attest.RescoreDraw(key, pred)
	if err != nil {
		t.Fatal(err)
	}
	return attest.DrawFraction(beta), proof
}

// signDrawnRescore signs a re-score of run r by lab i's node of key and cert, carrying that
// node's draw, into dir.
func (c *cluster) signDrawnRescore(i int, key crypto.PrivKey, cert *attest.NodeCert, r runInfo, valid bool, score float64, dir string) string {
	c.t.Helper()
	nodeID, err := peer.IDFromPrivateKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	_, proof := rescoreDraw(c.t, key, r)
	pred := attest.RescorePredicate{Run: r.id, Valid: valid, Metric: r.metric, Evaluator: "builtin:" + r.metric,
		Node: nodeID.String(), Lab: c.labs.Nodes[i].Lab.ID, Time: time.Now(), Draw: proof}
	if valid {
		pred.Score = &score
	}
	st, err := attest.NewStatement([]attest.Subject{{Name: "submission.csv", Digest: map[string]string{"sha256": strings.Repeat("00", 32)}}},
		attest.PredicateRescoreV1, pred)
	if err != nil {
		c.t.Fatal(err)
	}
	return signInto(c.t, key, cert, st, dir)
}

// TestDishonestLabCannotPickItsRescorers: where re-scorers are drawn (ledger.rescorers
// "drawn"), lab3 (node 2) and lab4 (a colluding lab with no daemon, its keys in the test's
// hands) try the two ways to choose who judges a run. With four labs and replication 1, a
// lab is drawn for a run when its node's VRF draw over the run's slot, attempt and lab is
// under 1/3.
//
//   - Veto from undrawn labs: for honest runs whose one honest candidate lab was drawn (and
//     re-scored), lab3 and lab4 sign contradicting re-scores with valid draws that did not
//     draw them. Under the old rule (every lab that re-scored votes) that is 2 votes to 2, a
//     tie that holds the honest runs aside; drawn, the re-scores are no votes, the runs keep
//     counting on every node, and every node lists the re-scores as no-vote evidence.
//   - Picking its re-scorers: lab3 fabricates a result (a score for a submission nobody can
//     fetch) and re-signs it, varying one field, until the old order by attestation ID puts
//     lab4 first; lab4, not drawn for the run, confirms it at once. Under the old rule the
//     confirmation fills the replication and no honest lab is ever asked: the result
//     counts. Drawn, the honest labs re-score it whatever its ID and the colluder's
//     confirmation, contradict it, and it counts on no node.
func TestDishonestLabCannotPickItsRescorers(t *testing.T) {
	skipShortFaults(t)
	s := newDrawnSetup(t, false)
	c, tasks, labIDs, before, honestBefore := s.c, s.tasks, s.labIDs, s.before, s.honest
	liar, liarLab := c.nodes[2], labIDs[2]
	const drawn = 1.0 / 3 // attest.DrawThreshold(1, 3, 0)
	keys := map[int]crypto.PrivKey{}
	for i := 0; i < 3; i++ {
		keys[i], _ = c.nodeKey(i)
	}

	t.Run("veto from undrawn labs", func(t *testing.T) {
		c.in(t)
		targets := s.honestWhere(func(r runInfo, other int) bool {
			// Not where lab3's daemon was drawn, or stood in before the drawn lab answered,
			// and re-scored it honestly: a veto then would be a hedge, another test's matter.
			u, _ := rescoreDraw(t, keys[other], r)
			u3, _ := rescoreDraw(t, keys[2], r)
			return u < drawn && u3 >= drawn && !before.rescoredBy[r.id][liarLab]
		})
		if len(targets) == 0 {
			t.Fatalf("none of %d honest runs has its honest candidate drawn and lab3's daemon not, though newDrawnSetup chose a campaign with two such slots", len(honestBefore))
		}
		dir := t.TempDir()
		var vetoes []string
		liarKey, liarCert := c.nodeKey(2)
		for _, r := range targets {
			vetoes = append(vetoes, c.signDrawnRescore(2, liarKey, liarCert, r, true, 0, dir))
			// lab4 certifies nodes until one is not drawn: the draw is per node key, so a
			// lab with many nodes chooses among their draws (docs/design.md §9 says what that
			// buys: it never removes a drawn lab's vote).
			for {
				key, cert, _ := c.secondNode(3)
				if u, _ := rescoreDraw(t, key, r); u >= drawn {
					vetoes = append(vetoes, c.signDrawnRescore(3, key, cert, r, true, 0, dir))
					break
				}
			}
		}
		c.importInto(liar, dir)
		c.vetoesAreNoVotes(t, "undrawn", vetoes, "not drawn", honestBefore)
		t.Logf("%d honest runs vetoed by two undrawn labs each: still counted on every node; %d no-vote re-scores listed", len(targets), len(vetoes))
	})

	t.Run("picking its re-scorers", func(t *testing.T) {
		c.in(t)
		specs, err := c.labs.AgentSpecs()
		if err != nil {
			t.Fatal(err)
		}
		// The bait's agent asks for a GPU, which no daemon here has: no honest node claims
		// and runs its slot, so its one result is the fabricated one (an honest run would
		// fill the cell first, and the fabricated result would be set aside as a second run
		// of it, never reaching its re-scorers).
		constant := *specs["constant"]
		constant.Name, constant.Resources.GPUs = "constant-gpu", 1
		// The claim is about an honest lab first in line: one drawn for the fabricated run
		// (its draw under 1/3). Where none is, the first due is the least draw, which may be
		// lab4's: then lab4 is the run's one re-scorer at replication 1, as a drawn colluder
		// is, and audits are what catch it (docs/design.md §9). The draw is fixed by the
		// slot, so lab3 signs bait campaigns (the title varied) until an honest lab is drawn
		// for the fabricated attempt, and publishes that one.
		key, cert, second := c.secondNode(2)
		var baitID string
		fab := runInfo{task: tasks[0], agent: constant.CID(), seed: 0, attempt: 1, lab: liarLab, node: second, metric: "accuracy"}
		for try := 0; baitID == ""; try++ {
			env, id, err := c.labs.CampaignOfSpecs(2, fmt.Sprintf("bait %d", try), tasks, []*agentspec.Spec{&constant}, 1)
			if err != nil {
				t.Fatal(err)
			}
			fab.campaign = id
			for _, honest := range []int{0, 1} {
				if u, _ := rescoreDraw(t, keys[honest], fab); u < drawn && baitID == "" {
					if _, err := c.nodes[2].client.PublishCampaign(context.Background(), env); err != nil {
						t.Fatal(err)
					}
					baitID = id
				}
			}
		}
		bw := c.witnessOf(liar, baitID, liarLab)
		colluderKey, colluderCert := c.nodeKey(3)
		slot := attest.Slot{Campaign: baitID, Task: tasks[0], Agent: constant.CID(), Seed: 0}
		for {
			if u, _ := rescoreDraw(t, colluderKey, fab); u >= drawn {
				break
			}
			colluderKey, colluderCert, _ = c.secondNode(3) // the colluder is not drawn for it
		}
		// Grind: re-sign the fabricated result until the old order by ID puts lab4 first.
		dir := t.TempDir()
		tries := 0
		for {
			tries++
			grind := t.TempDir()
			fid := c.signRun(2, key, cert, slot, 1, "fabricated", 0.5+float64(tries)*1e-9, bw, grind)
			if protocol.RescorerOrder(fid, liarLab, labIDs)[0] == labIDs[3] {
				b, err := os.ReadFile(filepath.Join(grind, fid+".json"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, fid+".json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
				fab.id = fid
				break
			}
		}
		confirm := c.signDrawnRescore(3, colluderKey, colluderCert, fab, true, 0.5+float64(tries)*1e-9, dir)
		c.importInto(liar, dir)
		views := c.settle("the fabricated result re-scored by the honest labs and counted nowhere", 300*time.Second, func(v ledgerView) bool {
			_, counted := v.counted[fab.id]
			return !counted && v.excluded[fab.id] == attest.ExcludeDisputed
		})
		for i, v := range views {
			c.stillCounted(t, i, v, honestBefore)
			if v.all[fab.id].id == "" {
				t.Errorf("%s: the fabricated run is not stored", c.nodes[i].lab.Name)
			}
		}
		t.Logf("lab3 re-signed its fabricated result %d times until the old order put lab4 first; lab4's confirmation %s did not end the honest labs' duty: excluded on every node as %q", tries, confirm, views[0].excluded[fab.id])
	})
}

// TestDishonestLabCannotDrawFromItsBestNode: under a network document that names one draw
// key per lab (`evalmesh network draw-key`), lab3 (node 2) and lab4 (colluding, no daemon)
// try what node-key draws allowed: each certifies nodes until one's own draw for an honest
// run is under the threshold (1/3: four labs, replication 1), whatever its lab's draw key
// drew, and vetoes the run from that node. Under node-key draws both vetoes vote, tie the
// run 2 to 2 with its lab and its honest re-scorer, and hold it aside on every node (the
// pure TestDrawKeyOnlyTheLabsDrawVotes shows the same set); with draw keys they are no
// votes, listed on every honest daemon as drawn under the wrong key, and the honest runs keep
// counting. The honest daemons re-score with their labs' draw keys: the campaign counting
// everywhere with replication 1 is their draws verified.
func TestDishonestLabCannotDrawFromItsBestNode(t *testing.T) {
	skipShortFaults(t)
	s := newDrawnSetup(t, true)
	c, drawKeys, labIDs, before, honestBefore := s.c, s.drawKeys, s.labIDs, s.before, s.honest
	liar, liarLab := c.nodes[2], labIDs[2]
	const drawn = 1.0 / 3 // attest.DrawThreshold(1, 3, 0)
	targets := s.honestWhere(func(r runInfo, other int) bool {
		// lab3's daemon re-scores what its draw key draws (a veto would then be a hedge, no
		// vote under either rule); lab4, with no daemon, is silent whatever its draw.
		u3, _ := rescoreDraw(t, drawKeys[2], r)
		return u3 >= drawn && !before.rescoredBy[r.id][liarLab] && before.rescoredBy[r.id][labIDs[other]]
	})
	if len(targets) == 0 {
		t.Fatalf("none of %d honest runs is one lab3's draw key does not draw and the honest lab alone re-scored", len(honestBefore))
	}
	dir := t.TempDir()
	var vetoes []string
	nodes := 0
	for _, r := range targets {
		for _, lab := range []int{2, 3} {
			for {
				nodes++
				key, cert, _ := c.secondNode(lab)
				if u, _ := rescoreDraw(t, key, r); u < drawn {
					vetoes = append(vetoes, c.signDrawnRescore(lab, key, cert, r, true, 0, dir))
					break
				}
			}
		}
	}
	c.importInto(liar, dir)
	c.vetoesAreNoVotes(t, "ground", vetoes, "draw key", honestBefore)
	t.Logf("%d honest runs vetoed by lab3 and lab4 from nodes whose own draws were under %.3f (%d nodes certified to find them): still counted on every node; %d no-vote re-scores listed",
		len(targets), drawn, nodes, len(vetoes))
}

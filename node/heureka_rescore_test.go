package node

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	heurekaexample "github.com/evalmesh/evalmesh/examples/heureka"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/process"
	"github.com/evalmesh/evalmesh/scoring"
)

// The judge re-score over the network: two labs, one node each, real libp2p hosts on
// 127.0.0.1 with the mesh (gossip, claims, bundle and submission transfer). A campaign of
// one HeurekaBench slot (cosci-thorough on the example task, seed 0) is published; one lab
// claims and runs it, judged by the task's judge on its node; the other lab fetches the
// submission by CID and re-runs the judge on its own node (Mesh.rescore →
// runner.RescoreSubmission → RescoreHeureka).

const heurekaNet = "heureka-rescore-test"

type heurekaLab struct {
	name string
	n    *Node
	m    *mesh.Mesh
}

// heurekaNetwork starts two labs' nodes with their meshes, connected, and publishes a
// campaign of one slot of the HeurekaBench task in taskDir (added on the first node only).
func heurekaNetwork(t *testing.T, taskDir string) (labs []heurekaLab, campaign string) {
	t.Helper()
	agent := &agentspec.Spec{Name: "cosci-thorough", Version: "1.0.0", Command: []string{"evalmesh", "agent", "cosci-thorough"}}
	return rescoreNetwork(t, taskDir, agent, func(int) (map[string]runner.Executor, string) {
		return map[string]runner.Executor{"process": process.New(process.Options{})}, "process"
	})
}

// rescoreNetwork starts two labs' nodes with their meshes (replication 1), connected, their
// runners on the executors executors returns for each (lab-a is 0), and publishes a campaign of one slot of agent
// on the task in taskDir (added on the first node only); it returns once lab-a ran the slot.
func rescoreNetwork(t *testing.T, taskDir string, agent *agentspec.Spec, executors func(lab int) (map[string]runner.Executor, string)) (labs []heurekaLab, campaign string) {
	t.Helper()
	trust := attest.NewTrustStore()
	type pending struct {
		name string
		h    home.Home
		lab  *attest.Lab
	}
	var ps []pending
	for _, name := range []string{"lab-a", "lab-b"} {
		lab, err := attest.InitLab(filepath.Join(t.TempDir(), name), name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trust.AddLab(name, lab.Pub); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, pending{name, newHome(t), lab})
	}
	nodes := make([]*Node, len(ps))
	for i, p := range ps {
		cfg := home.DefaultConfig()
		cfg.Network = heurekaNet
		opts := testOptions()
		opts.Config = &cfg
		opts.Logf = testutil.FailureLog(t, p.name)
		nodes[i] = startNodeAt(t, p.h, opts)
		cert, err := p.lab.Certify(nodes[i].ID().String(), time.Now().Add(-time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := home.WriteFileAtomic(p.h.CertPath(), cert.Raw(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	connect(t, nodes[1], nodes[0])
	startMesh := func(i int) heurekaLab {
		exs, executor := executors(i)
		r, err := runner.ForHome(ps[i].h, exs, executor, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		r.SelfExe = os.Args[0] // TestMain runs the agents and the judge
		m, err := StartMesh(context.Background(), nodes[i], mesh.Options{Trust: trust, Runner: r, Capacity: 1,
			Policy:  attest.AcceptPolicy{Replication: 1, AllowProcessRuns: true},
			Scoring: scoring.Options{BootstrapRounds: 20}, RescoreTimeout: 5 * time.Second, SyncInterval: time.Second,
			HeadsInterval: time.Second, Claims: protocol.ClaimConfig{Lease: 30 * time.Second, Settle: 100 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i].setMesh(m)
		t.Cleanup(func() { m.Close() })
		return heurekaLab{ps[i].name, nodes[i], m}
	}

	// lab-a's mesh alone publishes the campaign and runs the slot; lab-b's starts once the run
	// is attested, so it reconciles the run before it may claim and the slot has exactly one
	// run. (Two meshes that both claim at once may both run: a live run does not yield, the
	// duplicate the protocol allows and the ledger counts once. Under a loaded CI machine a
	// claim's gossip can take longer than the settle time, and these tests are about the
	// re-score, not the claim race, which protocol's and the mesh's claim tests cover.)
	labs = append(labs, startMesh(0))
	task, err := labs[0].n.Add(context.Background(), taskDir, AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env, id, err := protocol.SignCampaign(ps[0].lab, &protocol.Campaign{Network: heurekaNet, Title: "re-score over the network",
		Tasks: []string{task.String()}, Agents: []protocol.CampaignAgent{protocol.NewCampaignAgent(agent)}, Seeds: 1, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := labs[0].m.PublishCampaign(env); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 3*time.Minute, "lab-a's run of the slot", func() bool {
		rep, err := labs[0].m.CampaignStatus(context.Background(), id)
		return err == nil && len(rep.Slots) == 1 && len(rep.Slots[0].Runs) == 1
	})
	labs = append(labs, startMesh(1))
	return labs, id
}

// settled waits until both nodes hold the run and one re-score of it and compute the same
// ledger root over them, and returns the run as the first node reports it and each node's
// ledger.
func settled(t *testing.T, labs []heurekaLab, campaign string) (RunReport, []*MeshLedger) {
	t.Helper()
	var run RunReport
	var ledgers []*MeshLedger
	err := testutil.Poll(3*time.Minute, func() bool {
		ledgers = nil
		for _, l := range labs {
			rep, err := l.m.CampaignStatus(context.Background(), campaign)
			if err != nil || len(rep.Slots) != 1 || len(rep.Slots[0].Runs) != 1 || len(rep.Slots[0].Runs[0].Rescores) != 1 {
				return false
			}
			run = rep.Slots[0].Runs[0]
			ml := l.m.Ledger()
			if ml == nil || ml.Report.Rescores != 1 || (len(ledgers) > 0 && ml.Root != ledgers[0].Root) {
				return false
			}
			ledgers = append(ledgers, ml)
		}
		return true
	})
	if err != nil {
		// What each node holds says which step did not happen (claim, run, fetch, re-score,
		// ledger); the nodes' logs follow at cleanup.
		for _, l := range labs {
			rep, err := l.m.CampaignStatus(context.Background(), campaign)
			t.Logf("%s: campaign status %+v (err %v)", l.name, rep, err)
			if ml := l.m.Ledger(); ml != nil {
				t.Logf("%s: ledger root %s, report %+v", l.name, ml.Root, ml.Report)
			} else {
				t.Logf("%s: no ledger yet", l.name)
			}
		}
		t.Fatalf("the run, its re-score and one root on both nodes: %v", err)
	}
	return run, ledgers
}

func TestHeurekaNetworkRescoreAgrees(t *testing.T) {
	task, err := heurekaexample.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	labs, campaign := heurekaNetwork(t, task)
	run, ledgers := settled(t, labs, campaign)
	rs := run.Rescores[0]
	if rs.Lab == run.Lab || rs.PeerID == run.PeerID {
		t.Fatalf("run by %s re-scored by its own lab %s", run.Lab, rs.Lab)
	}
	// The deterministic judge gives the other lab's node the same OEQ score: the re-score
	// confirms the run, which counts, and the HeurekaBench table holds it.
	if !run.Valid || !rs.Valid || run.Score == nil || rs.Score == nil || *rs.Score != *run.Score {
		t.Fatalf("run valid %v score %v, re-score valid %v score %v: want the same valid OEQ score", run.Valid, run.Score, rs.Valid, rs.Score)
	}
	for i, ml := range ledgers {
		rep := ml.Report
		if rep.Counted != 1 || rep.Disagreements != 0 || len(rep.Excluded) != 0 {
			t.Errorf("%s: ledger report %+v; want the run counted, confirmed, nothing disputed", labs[i].name, rep)
		}
		h := ml.Ledger.Heureka
		if h == nil || len(h.Tasks) != 1 || h.Tasks[0] != heurekaexample.Name {
			t.Fatalf("%s: HeurekaBench table %+v", labs[i].name, h)
		}
		var row *scoring.HeurekaAgent
		for j := range h.Agents {
			if h.Agents[j].Agent == "cosci-thorough" {
				row = &h.Agents[j]
			}
		}
		if row == nil || row.ValidRuns != 1 || row.OEQ == nil || *row.OEQ != *run.Score {
			t.Errorf("%s: cosci-thorough row %+v; want its one run with OEQ %v", labs[i].name, row, *run.Score)
		}
	}
}

func TestHeurekaNetworkRescoreDisagrees(t *testing.T) {
	// A sampling judge (the stand-in's --sampling: scores jittered from its nonce, as an LLM
	// sampling at temperature > 0) on the same pinned task: each call draws a nonce, fixed
	// here to ones whose samples differ on this submission, the first for the run and the
	// next for the other lab's re-score.
	var mu sync.Mutex
	calls := 0
	old := runner.JudgeNonce
	runner.JudgeNonce = func() string {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return "lab-a-run"
		}
		return "lab-b-rescore"
	}
	t.Cleanup(func() { runner.JudgeNonce = old }) // after the meshes close (cleanups run last-in first-out)
	task, err := heurekaexample.GenerateWithJudge(t.TempDir(), "", append(slices.Clone(heurekaexample.JudgeCommand), "--sampling")...)
	if err != nil {
		t.Fatal(err)
	}
	labs, campaign := heurekaNetwork(t, task)
	run, ledgers := settled(t, labs, campaign)
	rs := run.Rescores[0]
	if rs.Lab == run.Lab {
		t.Fatalf("run by %s re-scored by its own lab", run.Lab)
	}
	if !run.Valid || !rs.Valid || run.Score == nil || rs.Score == nil || *rs.Score == *run.Score {
		t.Fatalf("run score %v, re-score %v: want two different valid OEQ scores from the sampling judge", run.Score, rs.Score)
	}
	// OEQCorrectness has tolerance 0: the two judges' scores are a disagreement on record,
	// the run is excluded as disputed, and nothing averages them into the table.
	for i, ml := range ledgers {
		rep := ml.Report
		if rep.Disagreements != 1 || rep.Counted != 0 || len(rep.Excluded) != 1 {
			t.Fatalf("%s: ledger report %+v; want 1 disagreement, the run excluded", labs[i].name, rep)
		}
		ex := rep.Excluded[0]
		if ex.ID != run.AttestationID || ex.Reason != attest.ExcludeDisputed || !strings.Contains(ex.Detail, rs.AttestationID) {
			t.Errorf("%s: excluded %+v; want run %s disputed by re-score %s", labs[i].name, ex, run.AttestationID, rs.AttestationID)
		}
		if ml.Ledger.Heureka != nil {
			t.Errorf("%s: a disputed run reached the HeurekaBench table: %+v", labs[i].name, ml.Ledger.Heureka)
		}
	}
}

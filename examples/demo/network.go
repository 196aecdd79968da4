package demo

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/examples/agents"
	heurekaexample "github.com/evalmesh/evalmesh/examples/heureka"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/protocol/recon"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/process"
	"github.com/evalmesh/evalmesh/scoring"
)

// The network demo: several labs on one machine, each with its own lab key, node home and
// daemon on 127.0.0.1 (real libp2p, gossipsub and transfer). The example tasks are added on
// the first lab's node only and reach the others over the network; two campaigns signed by
// the second lab are published on its node — the baselines on the AIRS-style tasks, and the
// co-scientists on the HeurekaBench task (heureka.go) — the slots spread over all nodes,
// every run is re-scored by another lab (a HeurekaBench run by re-running the task's judge
// on the submission, runner.RescoreSubmission), and every node computes the same ledger
// root, which covers both the AIRS-Bench rows and the HeurekaBench table. The network
// audits by re-execution (ledger.audits): each lab re-runs the runs of other labs its VRF
// draw picks, and every ledger judges the audits.

// NetworkName is the demo network's name (its pubsub topics are /evalmesh/<name>/...).
const NetworkName = "evalmesh-demo"

// NetOptions tune the network demo. The zero value runs three labs.
type NetOptions struct {
	// Dir holds the labs and node homes; "" means a new temporary folder (kept, printed).
	Dir string
	// Nodes is the number of labs, one node each; 0 means 3.
	Nodes int
	// Seeds per (task, agent); 0 means 3.
	Seeds int
	// Agents and Tasks restrict the grid; empty means all baselines and co-scientists / all
	// example tasks. The co-scientists answer only the HeurekaBench task, the baselines
	// only the others.
	Agents, Tasks []string
	// SelfExe is the evalmesh binary the agents run as; "" means os.Executable().
	SelfExe string
	// Keep leaves the daemons running after the result until ctx ends (`demo --keep`);
	// Ready, if set, is called with the result first.
	Keep  bool
	Ready func(*NetResult)
	// Dashboard, when non-empty, is the first node's dashboard address (host:port); the
	// other nodes then serve theirs on free loopback ports. "" serves none.
	Dashboard string
	// Timeout bounds the wait for the campaign to finish everywhere (default 5 minutes).
	Timeout time.Duration
	// Log receives progress lines; nil discards.
	Log io.Writer
}

// NetNode is one lab's node in the result.
type NetNode struct {
	Lab        string   `json:"lab"`
	LabID      string   `json:"lab_id"`
	PeerID     string   `json:"peer_id"`
	Home       string   `json:"home"`
	Addrs      []string `json:"addrs"`
	API        string   `json:"api"`
	Dashboard  string   `json:"dashboard,omitempty"` // the node's dashboard URL, when served
	LedgerRoot string   `json:"ledger_root"`
	// Runs and Rescores count the run and re-score attestations this node signed.
	Runs     int `json:"runs"`
	Rescores int `json:"rescores"`
	// Audits counts the runs of other labs this node's lab audited by re-execution, as the
	// first node's ledger judged them (0 where the network document sets no ledger.audits).
	Audits int `json:"audits"`
}

// NetRun is one run signed in the demo: who ran it, who re-scored it, and whether the
// ledger counts it. The ledger counts one run per slot; two nodes that claimed a slot at
// the same moment (a race the settle time makes rare, not impossible) both run it, and the
// other run is listed with the reason it does not count (under claim records: its node
// does not hold the slot's attempt).
type NetRun struct {
	Task       string   `json:"task"`
	Agent      string   `json:"agent"`
	Seed       int      `json:"seed"`
	ID         string   `json:"attestation_id"`
	RanBy      string   `json:"ran_by"`
	RescoredBy []string `json:"rescored_by"`
	Valid      bool     `json:"valid"`
	Score      *float64 `json:"score"`
	// Unscored: run by a lab without the task's labels and signed without a score; Valid
	// and Score are then a scoring lab's verdict (ledger.scorers).
	Unscored bool   `json:"unscored,omitempty"`
	Counted  bool   `json:"counted"`
	Excluded string `json:"excluded,omitempty"` // why the ledger does not count it
}

// NetResult is what the network demo did.
type NetResult struct {
	Dir      string `json:"dir"`
	Network  string `json:"network"`
	Campaign string `json:"campaign"`
	// HeurekaCampaign is the HeurekaBench campaign's ID (the co-scientists on heureka-sc);
	// "" when the grid leaves HeurekaBench out. Its runs are in Runs and its table in
	// Ledger.Heureka, under the same root.
	HeurekaCampaign string    `json:"heureka_campaign,omitempty"`
	Nodes           []NetNode `json:"nodes"`
	Runs            []NetRun  `json:"runs"`
	// LedgerRoot is the root every node computed (the demo fails if they differ).
	LedgerRoot string          `json:"ledger_root"`
	Ledger     *scoring.Ledger `json:"ledger"`
	// Rescores and Disagreements count, in the first node's ledger, the re-scores that
	// confirmed a run and those that contradicted one (a judge that scored differently:
	// reported, never averaged).
	Rescores      int `json:"rescores"`
	Disagreements int `json:"disagreements"`
	// Policy says what the network counts; the demo counts process-executor runs, which a
	// real network's default policy does not.
	Policy string `json:"policy"`
	// LedgerCommand recomputes LedgerRoot from the files the demo exported.
	LedgerCommand []string `json:"ledger_command"`
	Seconds       float64  `json:"seconds"`
	// Slots is the campaigns' size; DuplicateRuns the runs signed beyond one per slot.
	Slots         int `json:"slots"`
	DuplicateRuns int `json:"duplicate_runs"`
	// ConvergeSeconds is the time from the first node seeing every slot done to every
	// node announcing the same root over every run counted.
	ConvergeSeconds float64 `json:"converge_seconds"`
	// CPUSeconds is this process's CPU time (the daemons: evalmesh's own share);
	// AgentCPUSeconds the agents' and evaluators' (child processes).
	CPUSeconds      float64 `json:"cpu_seconds"`
	AgentCPUSeconds float64 `json:"agent_cpu_seconds"`
	// ClaimToStartMS are the p50 and p99 over every run of every node, in milliseconds.
	ClaimToStartMS struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"claim_to_start_ms"`
}

type demoNode struct {
	name  string
	lab   *attest.Lab
	h     home.Home
	n     *node.Node
	api   string
	dash  string
	done  chan error
	ready chan struct{}
}

// ExecuteNetwork runs the network demo.
func ExecuteNetwork(ctx context.Context, opts NetOptions) (res *NetResult, err error) {
	start := time.Now()
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.Nodes < 2 {
		return nil, errors.New("the network demo needs at least 2 nodes (re-scores come from another lab)")
	}
	if opts.Seeds <= 0 {
		opts.Seeds = 3
	}
	baselines, coScientists, err := splitAgents(opts.Agents)
	if err != nil {
		return nil, err
	}
	heureka := wantsHeureka(opts.Tasks, len(opts.Tasks) == 0) && len(coScientists) > 0
	if len(opts.Tasks) == 0 {
		opts.Tasks = exampletasks.Names
	}
	opts.Tasks = slices.DeleteFunc(slices.Clone(opts.Tasks), func(n string) bool { return n == heurekaexample.Name })
	if len(baselines) == 0 {
		opts.Tasks = nil
	}
	if len(opts.Tasks) == 0 && !heureka {
		return nil, errors.New("nothing to run: the baselines answer the AIRS-style tasks, the co-scientists only heureka-sc")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "evalmesh-demo-net-"); err != nil {
			return nil, err
		}
	} else if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty: the network demo makes its labs and node homes in a new folder (omit --home or pass a new one)", dir)
	}
	res = &NetResult{Dir: dir, Network: NetworkName}

	// Labs, node homes, certificates, the network document (under the rules `evalmesh
	// network create` writes: claim records required, re-scorers drawn, per-lab caps) and a
	// trust file listing every lab.
	labs, err := NewLabsUnder(dir, opts.Nodes, asDemoNetwork)
	if err != nil {
		return nil, err
	}
	scored, err := sealScoredTask(ctx, labs, dir, opts.Tasks, log) // scorers.go
	if err != nil {
		return nil, err
	}
	trust, doc := labs.Trust, labs.Doc
	nodes := make([]*demoNode, opts.Nodes)
	for i, l := range labs.Nodes {
		nodes[i] = &demoNode{name: l.Name, lab: l.Lab, h: l.Home, done: make(chan error, 1), ready: make(chan struct{})}
	}
	fmt.Fprintf(log, "%d labs, one node each, in %s; trust file lists all %d labs; this network counts process-executor runs (a real network's default counts only isolated runs)\n", opts.Nodes, dir, opts.Nodes)
	res.Policy = fmt.Sprintf("replication 1; witness and claim records required; re-scorers drawn; caps %d agents, %d campaigns per lab; process-executor runs counted (demo opt-in: agents are not isolated)",
		labs.Doc.Ledger.Caps.AgentsPerLab, labs.Doc.Ledger.Caps.CampaignsPerLab) +
		fmt.Sprintf("; audits by re-execution at rate %g", labs.Doc.AuditRate()) + scored.policy()

	// Daemons, in this process, each with its own home, host, store and API.
	dctx, stopDaemons := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		if opts.Keep && err == nil {
			<-ctx.Done()
		}
		stopDaemons()
		wg.Wait()
	}()
	pol := doc.AcceptPolicy()
	sc := doc.ScoringOptions()
	for i, d := range nodes {
		d := d
		dashboard := opts.Dashboard
		if dashboard != "" && i > 0 {
			dashboard = "127.0.0.1:0"
		}
		r, err := runner.ForHome(d.h, map[string]runner.Executor{"process": process.New(process.Options{})}, "process", io.Discard)
		if err != nil {
			return nil, err
		}
		r.SelfExe = opts.SelfExe
		wg.Add(1)
		go func() {
			defer wg.Done()
			logPath := filepath.Join(d.h.Dir, "daemon.log")
			lf, lerr := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if lerr != nil {
				d.done <- lerr
				return
			}
			defer lf.Close()
			var lmu sync.Mutex
			logf := func(format string, args ...any) {
				lmu.Lock()
				defer lmu.Unlock()
				fmt.Fprintf(lf, time.Now().UTC().Format("15:04:05.000 ")+format+"\n", args...)
			}
			d.done <- node.Run(dctx, d.h, node.Options{
				Logf:            logf,
				DashboardListen: dashboard,
				Mesh: func(n *node.Node) (*mesh.Options, error) {
					// Re-scorers are drawn: with 2 candidate labs and replication 1, about one run
					// in four draws neither and waits a whole RescoreTimeout for stand-ins. A demo
					// re-score takes milliseconds, so 1 s (5 s took the demo from about 3.5 s to 8 s).
					return &mesh.Options{Trust: trust, Runner: r, Capacity: 2, Policy: pol, Scoring: sc, NetworkDoc: doc,
						RescoreTimeout: time.Second, SyncInterval: 3 * time.Second,
						Claims: protocol.ClaimConfig{Lease: 30 * time.Second, Settle: 150 * time.Millisecond}}, nil
				},
			}, func(n *node.Node, api string) {
				d.n, d.api = n, api
				if a := n.DashboardAddr(); a != "" {
					d.dash = "http://" + a + "/"
				}
				close(d.ready)
			})
		}()
	}
	for _, d := range nodes {
		select {
		case <-d.ready:
		case err := <-d.done:
			return nil, fmt.Errorf("daemon of %s: %w", d.name, err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// A full mesh of connections on loopback.
	for i, d := range nodes {
		for _, o := range nodes[:i] {
			if err := d.n.Connect(ctx, o.n.Addrs()[0]); err != nil {
				return nil, fmt.Errorf("connect %s to %s: %w", d.name, o.name, err)
			}
		}
	}
	for _, d := range nodes {
		res.Nodes = append(res.Nodes, NetNode{Lab: d.name, LabID: d.lab.ID, PeerID: d.n.ID().String(), Home: d.h.Dir, Addrs: d.n.Addrs(), API: d.api, Dashboard: d.dash})
	}

	// The example tasks, on the first lab's node only.
	tasksDir := filepath.Join(dir, "examples", "tasks")
	if _, err := exampletasks.Generate(tasksDir); err != nil {
		return nil, err
	}
	if err := scored.install(tasksDir); err != nil {
		return nil, err
	}
	if heureka {
		if _, err := heurekaexample.Generate(tasksDir); err != nil {
			return nil, err
		}
	}
	names := map[string]string{} // bundle CID → task name
	addTasks := func(list []string) ([]string, error) {
		var cids []string
		for _, name := range list {
			c, err := nodes[0].n.Add(ctx, filepath.Join(tasksDir, name), node.AddOptions{})
			if err != nil {
				return nil, fmt.Errorf("add task %s on %s: %w", name, nodes[0].name, err)
			}
			cids = append(cids, c.String())
			names[c.String()] = name
			fmt.Fprintf(log, "task %-12s %s added on %s\n", name, c, nodes[0].name)
		}
		return cids, nil
	}
	agentsDir := filepath.Join(dir, "examples", "agents")
	specs, err := writeAgentSpecs(agentsDir)
	if err != nil {
		return nil, err
	}
	// One campaign per benchmark, both signed by the second lab and published on its node.
	var campaigns []string
	slots := 0
	publish := func(title string, taskCIDs, agentNames []string) (string, error) {
		env, id, err := labs.Campaign(1, title, taskCIDs, agentNames, opts.Seeds)
		if err != nil {
			return "", err
		}
		if _, err := nodes[1].n.Mesh().PublishCampaign(env); err != nil {
			return "", err
		}
		n := len(taskCIDs) * len(agentNames) * opts.Seeds
		campaigns, slots = append(campaigns, id), slots+n
		fmt.Fprintf(log, "campaign %s %q (%d slots, replication 1) signed by %s, published on its node\n", id, title, n, nodes[1].name)
		return id, nil
	}
	if len(opts.Tasks) > 0 {
		cids, err := addTasks(opts.Tasks)
		if err != nil {
			return nil, err
		}
		if res.Campaign, err = publish("evalmesh demo: example agents x example tasks", cids, baselines); err != nil {
			return nil, err
		}
	}
	if heureka {
		cids, err := addTasks([]string{heurekaexample.Name})
		if err != nil {
			return nil, err
		}
		if res.HeurekaCampaign, err = publish("evalmesh demo: co-scientists x HeurekaBench (stand-in keyword judge)", cids, coScientists); err != nil {
			return nil, err
		}
	}

	// Wait until every slot's run is counted, every run is re-scored (a duplicate run's
	// re-score can come after the slots are counted, and moves the root), every node holds
	// the same attestations and has computed its ledger over them, no node owes an audit,
	// and all roots agree: the root printed is then the one the exported files give.
	deadline := time.Now().Add(opts.Timeout)
	lastDone := -1
	var allDone time.Time
	prog := newProgress()
	for {
		roots := map[string]bool{}
		sets := map[recon.Fingerprint]bool{}
		counted := 0
		for i, d := range nodes {
			l := d.n.Mesh().Ledger()
			set := d.n.Store().Attestations()
			sets[set.Fingerprint()] = true
			if i == 0 && l != nil && l.Report != nil {
				// The progress line shows the latest ledger, though runs may have arrived
				// since: with runs arriving all the time, one over the whole set is rare
				// until the end, and the line stood still at its first figure.
				prog.counted(l.Report.Counted)
			}
			if l == nil || l.Report == nil || l.Attestations != set.Len() {
				roots[""] = true
				continue
			}
			roots[l.Root] = true
			counted = l.Report.Counted
		}
		unrescored := 0
		for _, id := range campaigns {
			if rep, err := nodes[0].n.Mesh().CampaignStatus(ctx, id); err == nil {
				prog.campaignDone(id, rep.Status.Done)
				for _, s := range rep.Slots {
					for _, r := range s.Runs {
						if len(r.Rescores) == 0 {
							unrescored++ // a duplicate run's re-score is still to come
						}
					}
				}
			}
		}
		done := prog.slotsDone()
		if done != lastDone {
			fmt.Fprintln(log, prog.line(slots, nodes[0].name))
			lastDone = done
		}
		if done == slots && allDone.IsZero() {
			allDone = time.Now()
		}
		if len(roots) == 1 && !roots[""] && len(sets) == 1 && counted == slots && unrescored == 0 && auditsSettled(ctx, nodes) {
			if allDone.IsZero() {
				allDone = time.Now()
			}
			res.ConvergeSeconds = time.Since(allDone).Seconds()
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the campaign did not finish with equal roots within %s (%d/%d slots done, roots %v)", opts.Timeout, done, slots, keys(roots))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}

	// Who ran and who re-scored what, as the first node's store says.
	peerLab := map[string]string{}
	for i, d := range nodes {
		peerLab[d.n.ID().String()] = d.name
		_ = i
	}
	first := nodes[0].n.Mesh()
	for _, id := range campaigns {
		rep, err := first.CampaignStatus(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, s := range rep.Slots {
			for _, r := range s.Runs {
				nr := NetRun{Task: names[s.Task], Agent: specNameByCID(specs, s.Agent), Seed: s.Seed, ID: r.AttestationID,
					RanBy: peerLab[r.PeerID], Valid: r.Valid, Score: r.Score, RescoredBy: []string{}}
				for _, x := range r.Rescores {
					nr.RescoredBy = append(nr.RescoredBy, peerLab[x.PeerID])
				}
				if scored.unscored(s.Task) && len(r.Rescores) > 0 {
					// Signed without a score: the result is its scoring labs' verdict.
					nr.Unscored, nr.Valid, nr.Score = true, r.Rescores[0].Valid, r.Rescores[0].Score
				}
				res.Runs = append(res.Runs, nr)
				for j := range res.Nodes {
					if res.Nodes[j].PeerID == r.PeerID {
						res.Nodes[j].Runs++
					}
					for _, x := range r.Rescores {
						if res.Nodes[j].PeerID == x.PeerID {
							res.Nodes[j].Rescores++
						}
					}
				}
			}
		}
	}
	// Which runs the ledger counts, by the first node's report (every node's is the same:
	// equal roots).
	if rep := first.Ledger().Report; rep != nil {
		why := map[string]string{}
		for _, e := range rep.Excluded {
			why[e.ID] = string(e.Reason)
		}
		for i := range res.Runs {
			r := &res.Runs[i]
			r.Counted = slices.Contains(rep.CountedIDs, r.ID)
			if !r.Counted {
				r.Excluded = cmp.Or(why[r.ID], "not in the ledger")
			}
		}
	}
	for i, d := range nodes {
		l := d.n.Mesh().Ledger()
		res.Nodes[i].LedgerRoot = l.Root
		res.LedgerRoot, res.Ledger = l.Root, l.Ledger
		if i == 0 {
			res.Rescores, res.Disagreements = l.Report.Rescores-l.Report.Disagreements, l.Report.Disagreements
			for _, a := range l.Report.Audits {
				for j := range res.Nodes {
					if res.Nodes[j].LabID == a.Lab {
						res.Nodes[j].Audits++
					}
				}
			}
		}
	}

	// The files anyone can recompute the root from: every envelope of the first node's
	// store, the tasks, the agent specs, the trust file.
	exportDir := filepath.Join(dir, "ledger-input", "attestations")
	if err := os.MkdirAll(exportDir, 0o755); err != nil {
		return nil, err
	}
	err = nodes[0].n.Store().Attestations().Each(func(_ recon.ID, env []byte) error {
		return home.WriteFileAtomic(filepath.Join(exportDir, attest.EnvelopeID(env)+".json"), env, 0o644)
	})
	if err != nil {
		return nil, err
	}
	res.LedgerCommand = append([]string{"evalmesh", "ledger", "--network-doc", nodes[0].h.NetworkDocPath(),
		"--tasks", tasksDir, "--agents", agentsDir, "--attestations", exportDir}, demoLedgerFlags...)
	res.Seconds = time.Since(start).Seconds()
	res.Slots, res.DuplicateRuns = slots, len(res.Runs)-slots
	res.CPUSeconds, res.AgentCPUSeconds = cpuSeconds()
	var c2s []time.Duration
	for _, d := range nodes {
		ds, err := d.n.Mesh().ClaimToStart(ctx)
		if err != nil {
			return nil, err
		}
		c2s = append(c2s, ds...)
	}
	if len(c2s) > 0 {
		slices.Sort(c2s)
		pct := func(q float64) float64 { return float64(c2s[int(q*float64(len(c2s)-1))]) / 1e6 }
		res.ClaimToStartMS.P50, res.ClaimToStartMS.P99 = pct(0.50), pct(0.99)
	}
	if opts.Keep && opts.Ready != nil {
		opts.Ready(res)
	}
	return res, nil
}

// auditsSettled says whether no node owes an audit: the audits drawn have been signed and
// reached every node (the caller also wants equal sets), so the counts it prints are final.
func auditsSettled(ctx context.Context, nodes []*demoNode) bool {
	for _, d := range nodes {
		if n, err := d.n.Mesh().AuditsPending(ctx); err != nil || n > 0 {
			return false
		}
	}
	return true
}

func specNameByCID(specs map[string]*agentspec.Spec, c string) string {
	for name, s := range specs {
		if s.CID() == c {
			return name
		}
	}
	return c
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LabNode is one lab of a demo network and its node's home.
type LabNode struct {
	Name   string
	Lab    *attest.Lab
	Home   home.Home
	PeerID string
}

// Labs is a network of labs on this machine, ready for daemons: each node home has a
// config (network NetworkName, listening on 127.0.0.1 with free ports, process executor,
// two runs at once), its lab certificate, the network document and a trust file.
type Labs struct {
	Dir   string
	Nodes []LabNode
	Trust *attest.TrustStore
	Doc   *protocol.NetworkDoc
}

// NewLabs makes n labs (lab1 … labN), one node home each, under dir, under the base network
// document: witness records required and misconduct set aside (the defaults); claim records,
// drawn re-scorers and caps off. The fault tests start real daemon processes on these homes
// and turn on what each one tests.
func NewLabs(dir string, n int) (*Labs, error) { return NewLabsUnder(dir, n, nil) }

// AsNetworkCreate turns on in a ledger policy the rules `evalmesh network create` writes
// beyond the base document, through the one function that command calls
// (protocol.NewNetworkRules): claim records required, re-scorers drawn, protocol.DefaultCaps
// (witness records and misconduct set aside are on in the base document already). The demo
// network runs under it, so it exercises signed claim records, drawn re-scorers and
// admission caps as a real network does.
func AsNetworkCreate(p *protocol.LedgerPolicy) { protocol.NewNetworkRules(p) }

// asDemoNetwork is the demo network's ledger policy: what `evalmesh network create` writes
// (AsNetworkCreate) and audits by re-execution (ledger.audits) at the default rate, so the
// demo's labs draw and re-run each other's runs and its ledger judges the audits, as a
// network that turns audits on does.
func asDemoNetwork(p *protocol.LedgerPolicy) {
	AsNetworkCreate(p)
	p.Audits = &protocol.AuditPolicy{}
}

// NewLabsUnder is NewLabs with the network document's ledger policy changed by ledger
// (nil: none) before every lab signs it. The demo starts daemons in this process on these
// homes.
func NewLabsUnder(dir string, n int, ledger func(*protocol.LedgerPolicy)) (*Labs, error) {
	ls := &Labs{Dir: dir, Trust: attest.NewTrustStore()}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("lab%d", i+1)
		lab, err := attest.InitLab(filepath.Join(dir, "labs", name), name)
		if err != nil {
			return nil, err
		}
		if _, err := ls.Trust.AddLab(name, lab.Pub); err != nil {
			return nil, err
		}
		h := home.Home{Dir: filepath.Join(dir, "nodes", name)}
		if _, err := h.Init(); err != nil {
			return nil, err
		}
		cfg := home.DefaultConfig()
		cfg.Network = NetworkName
		cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
		cfg.API = "127.0.0.1:0"
		cfg.Runner.Executor = "process"
		cfg.Runner.MaxParallel = 2
		raw, err := yaml.Marshal(cfg)
		if err != nil {
			return nil, err
		}
		if err := home.WriteFileAtomic(h.ConfigPath(), raw, 0o644); err != nil {
			return nil, err
		}
		key, err := h.Identity()
		if err != nil {
			return nil, err
		}
		pid, err := peerIDOfKey(key)
		if err != nil {
			return nil, err
		}
		if _, err := certifyNode(h, lab, pid, time.Now()); err != nil {
			return nil, err
		}
		ls.Nodes = append(ls.Nodes, LabNode{Name: name, Lab: lab, Home: h, PeerID: pid})
	}
	doc := &protocol.NetworkDoc{Version: protocol.NetworkDocVersion, Network: NetworkName,
		Ledger: protocol.LedgerPolicy{Worst: Scoring.Worst, BootstrapRounds: Scoring.BootstrapRounds, Replication: 1,
			Executors: []string{attest.IsolationContainer, attest.IsolationProcess}}}
	if ledger != nil {
		ledger(&doc.Ledger)
	}
	for _, n := range ls.Nodes {
		doc.Labs = append(doc.Labs, protocol.NetworkLab{Name: n.Name, Key: base64.StdEncoding.EncodeToString(n.Lab.Pub)})
	}
	var err error
	if ls.Doc, err = protocol.ParseNetworkDoc(doc.Canonical()); err != nil {
		return nil, err
	}
	// Every lab signs the document, as a real network's labs do (evalmesh network sign):
	// the daemons refuse a signed document that a majority has not signed.
	ls.Doc.Signatures = []protocol.NetworkSignature{}
	for _, n := range ls.Nodes {
		if err := ls.Doc.Sign(n.Name, n.Lab); err != nil {
			return nil, err
		}
	}
	for _, n := range ls.Nodes {
		if err := ls.Trust.Save(n.Home.TrustPath()); err != nil {
			return nil, err
		}
		if err := home.WriteFileAtomic(n.Home.NetworkDocPath(), ls.Doc.File(), 0o644); err != nil {
			return nil, err
		}
	}
	return ls, nil
}

// Campaign signs a campaign of agents (example agent names) x tasks (bundle CIDs) x seeds
// with replication 1 by lab signer, writing the agents' specs under Dir/examples/agents.
func (ls *Labs) Campaign(signer int, title string, tasks []string, agentNames []string, seeds int) (env []byte, id string, err error) {
	specs, err := ls.AgentSpecs()
	if err != nil {
		return nil, "", err
	}
	var chosen []*agentspec.Spec
	for _, a := range agentNames {
		spec, ok := specs[a]
		if !ok {
			return nil, "", fmt.Errorf("no example agent %q (have %v)", a, agents.Names())
		}
		chosen = append(chosen, spec)
	}
	return ls.CampaignOfSpecs(signer, title, tasks, chosen, seeds)
}

// AgentSpecs writes the example agents' specs under Dir/examples/agents and returns them
// by name.
func (ls *Labs) AgentSpecs() (map[string]*agentspec.Spec, error) {
	return writeAgentSpecs(filepath.Join(ls.Dir, "examples", "agents"))
}

// CampaignOfSpecs signs a campaign of the given agent specs x tasks x seeds with
// replication 1 by lab signer.
func (ls *Labs) CampaignOfSpecs(signer int, title string, tasks []string, specs []*agentspec.Spec, seeds int) (env []byte, id string, err error) {
	c := &protocol.Campaign{Network: NetworkName, Title: title, Tasks: tasks, Seeds: seeds, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(24 * time.Hour)}
	for _, spec := range specs {
		c.Agents = append(c.Agents, protocol.NewCampaignAgent(spec))
	}
	return protocol.SignCampaign(ls.Nodes[signer].Lab, c)
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"go.yaml.in/yaml/v3"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node/dashboard"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner/executortest"
)

// TestDishonestLabFabricatingRunsIsCaughtByAudits is issue 44's Show: three labs of real
// `evalmesh daemon` processes, running agents in containers of the local Docker engine,
// under a network document with ledger.audits on. lab3's daemon fabricates
// (--test-fabricate): every run it signs carries a submission written from the task's
// private data, a perfect score for a weak deterministic agent (the example constant agent,
// a static binary in a FROM scratch image), re-scored in
// agreement by the honest labs (re-scoring checks arithmetic, not authorship). The honest
// nodes draw audits of lab3's runs with their VRF, re-execute them on their own executor,
// find another submission, and sign audits; with two labs finding a mismatch the ledger has
// proof. Once audits complete, on every node: no lab3 result counts, lab3 is listed for
// misconduct with its results set aside, every honest run still counts, and the evidence
// (the audits, judged, and the misconduct) is in the ledger report and on the dashboard's
// evidence page. Before any audit is in (every node's audits wait on a test-only gate
// file, --test-hold-audits), lab3's perfect results, which would lift an agent's rank (the
// weak agent above the middling one, the example heuristic agent) or are a pivotal group's
// outliers, are held on every node as movers (attest.ExcludeMoverHeld) with one root, and
// the weak agent is not ranked above the middling one.
func TestDishonestLabFabricatingRunsIsCaughtByAudits(t *testing.T) {
	skipShortFaults(t)
	cli := executortest.DockerClient(t)
	image := executortest.GoImage(t, cli, "evalmesh-test-audit-constant", "/agent",
		[]executortest.GoBinary{{Name: "agent", Package: "./examples/agents/cmd/constant"}, {Name: "heuristic", Package: "./examples/agents/cmd/heuristic"}}, nil)
	gate := filepath.Join(t.TempDir(), "hold-audits")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dash := []string{"--dashboard-listen", "127.0.0.1:0", "--test-hold-audits", gate}
	// Rate 0.2: a run whose results lie far from other labs' weighs 20 (λ = 4), and one no
	// other lab has a result of yet is drawn at λ = 3: both certain with two other labs.
	c := startAuditedCluster(t, cli, "", nil, protocol.AuditPolicy{Rate: 0.2, HoldMovers: true}, map[int][]string{0: dash, 1: dash, 2: append([]string{"--test-fabricate"}, dash...)})
	tasks := c.addTasks("arithmetic")
	liarLab := c.labs.Nodes[2].Lab.ID

	// Deterministic: the same bundle, seed and GPU model give the same submission.
	weak := &agentspec.Spec{Name: "constant", Version: "1.0.0", Image: image, Command: []string{"/agent"}, Deterministic: true}
	mid := &agentspec.Spec{Name: "heuristic", Version: "1.0.0", Image: image, Command: []string{"/heuristic"}, Deterministic: true}
	slots, id := c.campaignOf(1, "audited", tasks, []*agentspec.Spec{weak, mid}, 6)
	c.waitAllDone(c.nodes, id, slots)
	stored := c.settle("every run stored everywhere", 120*time.Second, func(v ledgerView) bool { return len(v.all) >= slots })[0]
	fabricated := 0
	for _, r := range stored.all {
		if r.lab == liarLab {
			fabricated++
			if r.score == nil || *r.score != 1 {
				t.Fatalf("lab3's run %s scores %v: the hook did not fabricate a perfect submission", r.id, r.score)
			}
		}
	}
	if fabricated == 0 {
		t.Fatalf("lab3 claimed none of the %d slots: nothing fabricated to catch (claims are drawn; rerun)", slots)
	}

	// No audit is in yet: lab3's lifted results are held as movers on every node (the same
	// root everywhere: a rank move, or the outliers of a group whose noise could move one),
	// and the weak agent is not ranked above the middling one.
	heldViews := c.settle("every node's ledger over every run, before any audit", 120*time.Second, func(v ledgerView) bool {
		return len(v.all) >= slots
	})
	liarWeak := 0
	for _, r := range stored.all {
		if r.lab == liarLab && r.agent == weak.CID() {
			liarWeak++
		}
	}
	for i, v := range heldViews {
		name := c.nodes[i].lab.Name
		held := 0
		for _, g := range v.held {
			for _, rid := range g.Runs {
				if r, ok := v.all[rid]; ok && r.lab == liarLab && r.agent == weak.CID() && v.excluded[rid] == attest.ExcludeMoverHeld {
					held++
				}
			}
		}
		t.Logf("%s: %d of lab3's %d perfect results of the weak agent held as movers", name, held, liarWeak)
		l, err := c.nodes[i].client.MeshLedger(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rank := map[string]int{}
		for _, a := range l.Ledger.Agents {
			rank[a.Agent] = a.Rank
		}
		// An agent all of whose results are held is not on the ledger: not above anyone.
		if rw, ok := rank[weak.Name]; ok && rw < rank[mid.Name] {
			t.Errorf("%s: the weak agent ranks %d, above the middling one (%d), before any audit", name, rank[weak.Name], rank[mid.Name])
		}
		if len(l.Report.Audits) != 0 {
			t.Fatalf("%s: %d audits in before the gate opened", name, len(l.Report.Audits))
		}
	}
	t.Logf("held before audits: %+v", heldViews[0].held)
	// The dashboard's evidence page shows them per lab while they wait.
	var heldEv dashboard.Evidence
	getJSON(t, "http://"+dashboardAddr(t, c.nodes[0])+"/api/v1/evidence", &heldEv)
	if len(heldEv.Held) != len(heldViews[0].held) {
		t.Errorf("dashboard evidence held %+v, the ledger report %+v", heldEv.Held, heldViews[0].held)
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}

	views := c.settleSetAside("lab3's fabricated runs proven by audits and set aside", liarLab)
	// The evidence: the report lists the audits as the ledger judged them (lab3's runs
	// proven, by at least two labs' mismatches), and the dashboard's evidence page shows
	// them per audited lab, with the misconduct.
	l, err := c.nodes[0].client.MeshLedger(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	proven, mismatchBy := 0, map[string]bool{}
	for _, a := range l.Report.Audits {
		if a.RunLab == liarLab && a.Outcome == "proven" {
			proven++
			if a.Verdict == attest.VerdictMismatch {
				mismatchBy[a.Lab] = true
			}
		}
		if a.RunLab != liarLab && a.Verdict == attest.VerdictMismatch {
			t.Errorf("an honest run %s audited as a mismatch by %s: %s", a.Run, a.Lab, a.Reason)
		}
	}
	if proven == 0 || len(mismatchBy) < 2 {
		t.Fatalf("ledger report audits %+v: want lab3's runs proven by two labs' mismatches", l.Report.Audits)
	}
	t.Logf("%d runs, %d audits in the report; lab3's runs proven by %d labs; root %.12s", len(views[0].all), len(l.Report.Audits), len(mismatchBy), views[0].root)

	addr := dashboardAddr(t, c.nodes[0])
	var ev dashboard.Evidence
	getJSON(t, "http://"+addr+"/api/v1/evidence", &ev)
	if !slices.ContainsFunc(ev.Misconduct, func(m dashboard.Misconduct) bool {
		return m.Principal == liarLab && m.Kind == string(attest.MisconductFabricated) && m.SetAside
	}) {
		t.Errorf("dashboard evidence misconduct %+v: want lab3's fabricated runs, set aside", ev.Misconduct)
	}
	if !slices.ContainsFunc(ev.Audits, func(a dashboard.AuditEvidence) bool {
		return a.RunLabName == "lab3" && a.Outcome == "proven" && a.Verdict == attest.VerdictMismatch
	}) {
		t.Errorf("dashboard evidence audits %+v: want lab3's runs proven", ev.Audits)
	}
	page := getText(t, "http://"+addr+"/evidence")
	for _, want := range []string{"Audits by re-execution (per audited lab)", "lab3", "proven", string(attest.MisconductFabricated)} {
		if !strings.Contains(page, want) {
			t.Errorf("the evidence page does not show %q", want)
		}
	}
}

// startAuditedCluster starts three labs of real daemons (from exe; "" is this test binary)
// running agents in containers of the local Docker engine (their configs further changed by
// edit, when set), under a network document with ledger.audits set to audits. args are lab
// i's daemon flags (the dishonest lab's hook).
func startAuditedCluster(t *testing.T, cli *client.Client, exe string, edit func(*home.Config), audits protocol.AuditPolicy, args map[int][]string) *cluster {
	t.Helper()
	c := newCluster(t, 3)
	c.exe = exe
	c.editConfigs(func(cfg *home.Config) {
		cfg.Runner.Executor = "docker"
		if edit != nil {
			edit(cfg)
		}
	})
	c.useDoc(func(d *protocol.NetworkDoc) { d.Ledger.Audits = &audits })
	c.args = args
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	// The daemons are killed at the end, perhaps in the middle of an audit (honest runs are
	// audited too, some after the assertions): its container and the size-limited output
	// mount under the run folder would outlive them.
	t.Cleanup(func() {
		for _, d := range c.nodes {
			d.kill()
		}
		removeLeftovers(t, cli, c.labs.Dir)
	})
	return c
}

// settleSetAside waits until every node has proof that liarLab's runs were disproven by
// re-execution, with its results set aside, and checks each node's ledger: none of
// liarLab's runs counts (each set aside or disproven), every other lab's still does.
func (c *cluster) settleSetAside(what, liarLab string) []ledgerView {
	t := c.t
	t.Helper()
	views := c.settle(what, 420*time.Second, func(v ledgerView) bool {
		liarRuns, proven := 0, false
		// Proof against the lab sets aside all its runs; until then its runs may count.
		for _, r := range v.all {
			if r.lab == liarLab {
				liarRuns++
			}
		}
		for _, m := range v.misconduct {
			proven = proven || (m.Principal == liarLab && m.Kind == attest.MisconductFabricated && m.SetAside)
		}
		return proven && len(v.counted) == len(v.all)-liarRuns
	})
	for i, v := range views {
		name := c.nodes[i].lab.Name
		honest := 0
		for rid, r := range v.all {
			_, counted := v.counted[rid]
			switch {
			case r.lab == liarLab && counted:
				t.Errorf("%s: the dishonest lab's run %s counts", name, rid)
			case r.lab == liarLab && v.excluded[rid] != attest.ExcludeOffender && v.excluded[rid] != attest.ExcludeDisproven:
				t.Errorf("%s: the dishonest lab's run %s excluded as %q, want set aside for misconduct", name, rid, v.excluded[rid])
			case r.lab != liarLab && !counted:
				t.Errorf("%s: honest run %s no longer counts (%s)", name, rid, v.excluded[rid])
			case r.lab != liarLab:
				honest++
			}
		}
		if honest == 0 {
			t.Errorf("%s: no honest run counted", name)
		}
	}
	return views
}

// editConfigs changes every node home's config (before its daemon starts).
func (c *cluster) editConfigs(edit func(*home.Config)) {
	c.t.Helper()
	for _, n := range c.labs.Nodes {
		cfg, err := n.Home.Config()
		if err != nil {
			c.t.Fatal(err)
		}
		edit(&cfg)
		raw, err := yaml.Marshal(cfg)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := os.WriteFile(n.Home.ConfigPath(), raw, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
}

// removeLeftovers removes what killed daemons left of their runs under dir: the containers
// of each run folder (named after the run) and size-limited output mounts.
func removeLeftovers(t *testing.T, cli *client.Client, dir string) {
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil || !e.IsDir():
		case filepath.Base(filepath.Dir(p)) == "runs":
			cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("name", "evalmesh-"+e.Name()))})
			if err == nil {
				for _, ct := range cs {
					_ = cli.ContainerRemove(context.Background(), ct.ID, container.RemoveOptions{Force: true})
				}
			}
		case strings.HasSuffix(p, ".limited"):
			if syscall.Unmount(p, syscall.MNT_DETACH) == nil {
				t.Logf("unmounted a leftover output mount %s", p)
			}
			return filepath.SkipDir
		}
		return nil
	})
}

var dashboardLine = regexp.MustCompile(`dashboard +http://([0-9.:]+)/`)

// dashboardAddr is the dashboard address daemon d printed when it was ready.
func dashboardAddr(t *testing.T, d *daemonProc) string {
	t.Helper()
	var addr string
	testutil.WaitFor(t, 30*time.Second, d.lab.Name+"'s dashboard address in its log", func() bool {
		m := dashboardLine.FindStringSubmatch(fullLog(t, d.log))
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	return addr
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, url)), v); err != nil {
		t.Fatal(fmt.Errorf("GET %s: %w", url, err))
	}
}

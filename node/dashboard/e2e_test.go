package dashboard_test

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/examples/agents"
	"github.com/evalmesh/evalmesh/examples/demo"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/dashboard"
)

// The demo's agents run as this test binary (SelfExe): `TEST agent NAME ...`.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "agent" {
		os.Exit(agents.Run(os.Args[2], os.Args[3:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// demoNetwork runs the example campaign on a network of two in-process daemons (real
// libp2p, gossip, runs, re-scores, ledger) with their dashboards on, until the test ends.
func demoNetwork(t *testing.T) *demo.NetResult {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "net") // removed after the cleanup below stops the daemons
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *demo.NetResult, 1)
	done := make(chan error, 1)
	go func() {
		_, err := demo.ExecuteNetwork(ctx, demo.NetOptions{Dir: dir, Nodes: 2, Seeds: 2,
			SelfExe: os.Args[0], Keep: true, Dashboard: "127.0.0.1:0", Ready: func(r *demo.NetResult) { ready <- r }})
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case r := <-ready:
		return r
	case err := <-done:
		t.Fatalf("demo network: %v", err)
	case <-time.After(4 * time.Minute):
		t.Fatal("the demo network did not finish its campaign in 4 minutes")
	}
	return nil
}

// fetch GETs a dashboard URL, waiting out the rate limit (429) if the test hits it.
func fetch(t *testing.T, u string) (int, http.Header, []byte) {
	t.Helper()
	var code int
	var hdr http.Header
	var body []byte
	testutil.WaitFor(t, 20*time.Second, "GET "+u+" past the rate limit", func() bool {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		code, hdr = resp.StatusCode, resp.Header
		return code != http.StatusTooManyRequests
	})
	return code, hdr, body
}

func fetchJSON(t *testing.T, u string, v any) {
	t.Helper()
	code, _, body := fetch(t, u)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", u, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, body)
	}
}

// TestDashboardOfADemoNetwork checks every JSON endpoint of a real daemon's dashboard
// against what the demo network ran, that the dashboard's address serves none of the
// control API, and then (when Debian's chromium is installed) drives a browser through
// every page.
func TestDashboardOfADemoNetwork(t *testing.T) {
	res := demoNetwork(t)
	base := strings.TrimSuffix(res.Nodes[0].Dashboard, "/")
	if base == "" {
		t.Fatal("the demo's first node serves no dashboard")
	}
	peerLab := map[string]string{}
	for _, n := range res.Nodes {
		peerLab[n.PeerID] = n.Lab
	}

	var lb dashboard.Leaderboard
	fetchJSON(t, base+"/api/v1/leaderboard", &lb)
	if lb.LedgerRoot != res.LedgerRoot || len(lb.Rows) != len(res.Ledger.Agents) {
		t.Fatalf("leaderboard root %s with %d rows; the demo's ledger %s has %d", lb.LedgerRoot, len(lb.Rows), res.LedgerRoot, len(res.Ledger.Agents))
	}
	if doc, err := node.LoadNetworkDoc(home.Home{Dir: res.Nodes[0].Home}); err != nil || doc == nil || lb.NetworkDoc != doc.Hash() {
		t.Errorf("leaderboard network_doc %q; the node's network document: %v (%v)", lb.NetworkDoc, doc, err)
	}
	var order []string
	for i, r := range lb.Rows {
		a := res.Ledger.Agents[i]
		if r.Agent != a.Agent || r.Rank != a.Rank || r.Elo != a.Elo || r.EloCI != a.EloCI || r.Runs != a.Runs {
			t.Errorf("row %d %+v, ledger %+v", i, r, a)
		}
		if !r.Reference {
			order = append(order, r.Agent)
		}
	}
	code, hdr, canonical := fetch(t, base+"/api/v1/ledger.json")
	if sum := sha256.Sum256(canonical); code != 200 || hex.EncodeToString(sum[:]) != res.LedgerRoot || hdr.Get("X-Evalmesh-Ledger-Root") != res.LedgerRoot {
		t.Errorf("ledger.json (%d) does not hash to the ledger root %s", code, res.LedgerRoot)
	}
	_, _, csvBody := fetch(t, base+"/api/v1/leaderboard.csv")
	rows, err := csv.NewReader(strings.NewReader(string(csvBody))).ReadAll()
	if err != nil || len(rows) != len(lb.Rows)+1 {
		t.Errorf("leaderboard.csv: %v, %d rows", err, len(rows))
	}

	var hm dashboard.Heatmap
	fetchJSON(t, base+"/api/v1/heatmap", &hm)
	if !slices.Equal(hm.Agents, order) || len(hm.Tasks) != 3 || len(hm.Cells) != len(order)*3 {
		t.Fatalf("heatmap agents %v (want %v), %d tasks, %d cells", hm.Agents, order, len(hm.Tasks), len(hm.Cells))
	}
	for _, c := range hm.Cells {
		if c.Runs != 2 || c.Score == nil {
			t.Errorf("heatmap cell %s × %s: %d runs, score %v; want both seeds counted", c.Agent, c.Task, c.Runs, c.Score)
		}
	}

	invalid := map[string]int{}
	for _, r := range res.Runs {
		if !r.Valid {
			invalid[r.Agent]++
		}
	}
	for _, a := range order {
		var av dashboard.AgentView
		fetchJSON(t, base+"/api/v1/agents/"+url.PathEscape(a), &av)
		seeds := 0
		for _, at := range av.Tasks {
			seeds += len(at.Seeds)
		}
		if av.Row == nil || len(av.Tasks) != 3 || seeds != 6 || len(av.Failures) != invalid[a] {
			t.Errorf("agent %s: row %v, %d tasks, %d seeds, %d failures (want 3, 6, %d)", a, av.Row, len(av.Tasks), seeds, len(av.Failures), invalid[a])
		}
		for _, f := range av.Failures {
			if f.InvalidReason == "" {
				t.Errorf("agent %s: failure %s without its reason", a, f.ID)
			}
		}
	}
	for _, task := range hm.Tasks {
		var tv dashboard.TaskView
		fetchJSON(t, base+"/api/v1/tasks/"+url.PathEscape(task), &tv)
		if len(tv.Runs) != len(order)*2 || tv.Metric == "" || tv.CID == "" || tv.Worst == nil {
			t.Errorf("task %s: %d runs, metric %q, bundle %q, worst %v", task, len(tv.Runs), tv.Metric, tv.CID, tv.Worst)
		}
	}

	// The HeurekaBench campaign's runs (the co-scientists on heureka-sc, judged and
	// re-judged through the daemons) give the leaderboard its HeurekaBench table, the
	// network ledger's own.
	if lb.Heureka == nil || res.Ledger.Heureka == nil || len(lb.Heureka.Agents) != len(res.Ledger.Heureka.Agents) || len(lb.Heureka.Tasks) != 1 || lb.Heureka.Tasks[0] != "heureka-sc" {
		t.Fatalf("leaderboard HeurekaBench table %+v; the demo's ledger has %+v", lb.Heureka, res.Ledger.Heureka)
	}
	var heurekaAgents []string
	for i, a := range lb.Heureka.Agents {
		if w := res.Ledger.Heureka.Agents[i]; a.Agent != w.Agent || a.Elo != w.Elo || a.ValidRuns != w.ValidRuns {
			t.Errorf("HeurekaBench row %d %+v, ledger %+v", i, a, w)
		}
		if a.Agent != "sota" {
			heurekaAgents = append(heurekaAgents, a.Agent)
			if a.ValidRuns != 2 || a.OEQ == nil {
				t.Errorf("HeurekaBench row %s: %d valid runs, OEQ %v; want both seeds judged", a.Agent, a.ValidRuns, a.OEQ)
			}
		}
	}
	if !slices.Equal(heurekaAgents, []string{"cosci-thorough", "cosci-hasty"}) {
		t.Errorf("HeurekaBench rows %v, want the thorough co-scientist above the hasty one", heurekaAgents)
	}
	if _, _, page := fetch(t, base+"/"); !strings.Contains(string(page), `<table id="heureka">`) ||
		!strings.Contains(string(page), `data-agent="cosci-thorough"`) || !strings.Contains(string(page), `data-agent="cosci-hasty"`) {
		t.Error("the leaderboard page shows no HeurekaBench table with both co-scientists")
	}

	var camps []dashboard.Campaign
	fetchJSON(t, base+"/api/v1/campaigns", &camps)
	slots := map[string]int{}
	for _, r := range res.Runs {
		if r.Task == "heureka-sc" {
			slots[res.HeurekaCampaign]++
		} else {
			slots[res.Campaign]++
		}
	}
	if len(camps) != 2 {
		t.Errorf("campaigns %+v; want %s and the HeurekaBench campaign %s", camps, res.Campaign, res.HeurekaCampaign)
	}
	for _, c := range camps {
		// A scoring lab's node never runs its task's slots (ledger.scorers): they are
		// NotHere, outside its own count.
		if n, ok := slots[c.ID]; !ok || c.Status.Done != c.Status.Slots || c.Status.Slots+c.Status.NotHere != n || !c.Ready {
			t.Errorf("campaign %+v; want one of %v with all its slots done", c, slots)
		}
	}

	var runs dashboard.RunsPage
	fetchJSON(t, base+"/api/v1/runs?per_page=500", &runs)
	if runs.Total != len(res.Runs) || len(runs.Runs) != len(res.Runs) {
		t.Fatalf("runs: total %d, listed %d; the demo ran %d", runs.Total, len(runs.Runs), len(res.Runs))
	}
	want := map[string]demo.NetRun{}
	for _, r := range res.Runs {
		want[r.ID] = r
	}
	// A run's log is here when this node ran it, or when a run of its own wrote the same
	// bytes (logs are content-addressed: a deterministic agent logs alike on every seed); it
	// may also be here because this node's lab holds it for the network's pin factor
	// (docs/protocol-sync.md §8: repair fetches what fewer labs hold than the factor).
	ownLogs := map[string]bool{}
	for _, r := range runs.Runs {
		if r.PeerID == res.Nodes[0].PeerID {
			ownLogs[r.LogCID] = true
		}
	}
	var own *dashboard.Run
	for i, r := range runs.Runs {
		w, ok := want[r.ID]
		if !ok || r.Seed != w.Seed || r.Valid != w.Valid || r.LabName != peerLab[r.PeerID] || peerLab[r.PeerID] != w.RanBy || !r.Counted ||
			r.Rescores < 1 || r.LogCID == "" || (ownLogs[r.LogCID] && !r.LogsHere) || r.WallSeconds <= 0 {
			t.Errorf("run %s: %+v; the demo says %+v", r.ID, r, w)
		}
		if i > 0 && r.End.After(runs.Runs[i-1].End) {
			t.Errorf("runs are not newest first at %d", i)
		}
		if r.PeerID == res.Nodes[0].PeerID && own == nil {
			own = &runs.Runs[i]
		}
	}
	if own == nil {
		t.Fatal("the first node ran none of the runs")
	}
	// Who holds the objects: once a repair round (every 5 s) has restored the factor, every
	// task's bundle and every run's objects are held by both labs (pin factor 2 of 2), and
	// the task page says what `evalmesh pin status` says of the bundle.
	var tv dashboard.TaskView
	taskName := runs.Runs[0].Task
	var notYet string
	t.Cleanup(func() {
		if t.Failed() && notYet != "" {
			t.Logf("last seen on the dashboard: %s", notYet)
		}
	})
	testutil.WaitFor(t, 60*time.Second, "every task's and run's objects held by both labs on the dashboard", func() bool {
		fetchJSON(t, base+"/api/v1/tasks/"+url.PathEscape(taskName), &tv)
		if tv.Pin == nil || !tv.Pin.Met || len(tv.Runs) == 0 {
			notYet = fmt.Sprintf("task %s pin %+v", taskName, tv.Pin)
			return false
		}
		var all dashboard.RunsPage
		fetchJSON(t, base+"/api/v1/runs?per_page=500", &all)
		for _, r := range all.Runs {
			if sum := r.HeldBy(); !sum.Known || !sum.Met || len(sum.Labs) != 2 {
				notYet = fmt.Sprintf("run %s pins %+v", r.ID, r.Pins)
				return false
			}
		}
		notYet = ""
		return true
	})
	cl, err := node.NewClient(home.Home{Dir: res.Nodes[0].Home})
	if err != nil {
		t.Fatal(err)
	}
	bc, _ := cid.Decode(tv.Pin.CID)
	ps, err := cl.PinStatus(context.Background(), bc)
	if err != nil {
		t.Fatal(err)
	}
	var psNames []string
	for _, l := range ps.Labs {
		if l.Holds && l.Counts {
			psNames = append(psNames, l.Name)
		}
	}
	slices.Sort(psNames)
	if got := slices.Sorted(slices.Values(tv.Pin.Holding)); tv.Pin.Factor != ps.Factor || tv.Pin.Met != ps.Met || !slices.Equal(got, psNames) {
		t.Errorf("task %s's bundle on the dashboard: %+v; pin status says factor %d met %v held by %v", taskName, tv.Pin, ps.Factor, ps.Met, psNames)
	}
	if _, _, page := fetch(t, base+"/tasks/"+url.PathEscape(taskName)); !strings.Contains(string(page), `<p id="task-pin">Bundle held by`) ||
		!strings.Contains(string(page), `<span class="good">factor met</span>`) {
		t.Errorf("the task page of %s does not show who holds its bundle and its runs' objects", taskName)
	}

	_, _, env := fetch(t, base+"/api/v1/runs/"+own.ID+"/attestation")
	if attest.EnvelopeID(env) != own.ID {
		t.Errorf("the attestation endpoint of %s serves an envelope with ID %s", own.ID, attest.EnvelopeID(env))
	}
	// The run's page, from a real daemon (the demo's agents have no model: no transcript).
	var rp dashboard.RunPage
	fetchJSON(t, base+"/api/v1/runs/"+own.ID, &rp)
	if rp.Run.ID != own.ID || rp.Run.TranscriptCID != "" || rp.Transcript != nil {
		t.Errorf("run page of %s: %+v", own.ID, rp)
	}
	if code, _, page := fetch(t, base+"/runs/"+own.ID); code != 200 || !strings.Contains(string(page), "No transcript") {
		t.Errorf("run page of %s: %d", own.ID, code)
	}
	code, _, logs := fetch(t, base+"/api/v1/runs/"+own.ID+"/logs")
	lc, _ := cid.Decode(own.LogCID)
	if got, err := lc.Prefix().Sum(logs); code != 200 || err != nil || !got.Equals(lc) {
		t.Errorf("logs of %s: %d, %d bytes that do not hash to %s", own.ID, code, len(logs), own.LogCID)
	}

	var peers []dashboard.Peer
	testutil.WaitFor(t, 30*time.Second, "the other node's head to agree on the dashboard", func() bool {
		peers = nil
		fetchJSON(t, base+"/api/v1/peers", &peers)
		return len(peers) == 1 && peers[0].Agrees
	})
	if p := peers[0]; p.PeerID != res.Nodes[1].PeerID || p.LabName != res.Nodes[1].Lab || p.LedgerRoot != res.LedgerRoot || p.LastHeard.IsZero() {
		t.Errorf("peer %+v; want %s of %s with root %s", p, res.Nodes[1].PeerID, res.Nodes[1].Lab, res.LedgerRoot)
	}
	var ev dashboard.Evidence
	fetchJSON(t, base+"/api/v1/evidence", &ev)
	if len(ev.Equivocations)+len(ev.Disputed)+len(ev.Refused) != 0 {
		t.Errorf("evidence in an honest network: %+v", ev)
	}

	code, _, metrics := fetch(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, series := range []string{`evalmesh_runs_total{outcome="valid"}`, `evalmesh_heads{state="agree"} 1`, "evalmesh_sync_rounds_total",
		"evalmesh_ledger_recompute_seconds_count", `evalmesh_claims_total{direction="sent",kind="claim"}`, `evalmesh_pubsub_verdicts_total{kind="attestations"`,
		`evalmesh_store_envelopes{set="attestations",status="accepted"}`, "go_goroutines", "process_cpu_seconds_total", "go_build_info"} {
		if !strings.Contains(string(metrics), series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
	if ids := regexp.MustCompile(`12D3KooW\w+|baf[a-z2-7]{20,}`).FindAllString(string(metrics), 3); len(ids) > 0 {
		t.Errorf("/metrics carries peer IDs or CIDs: %v", ids)
	}

	// The dashboard's address is not the API's and serves none of its endpoints, with or
	// without a token; nothing but GET and HEAD.
	if strings.Contains(base, res.Nodes[0].API) {
		t.Fatalf("dashboard and API share %s", res.Nodes[0].API)
	}
	token, err := os.ReadFile(filepath.Join(res.Nodes[0].Home, "api.token"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"id", "peers", "connect", "pin/ls", "pin/add", "task/add", "task/get", "dag/import", "repo/gc",
		"campaign/publish", "campaign/ls", "rescore", "mesh/ledger", "ledger/status", "test/partition"} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			var code int
			testutil.WaitFor(t, 20*time.Second, "the dashboard to answer "+method+" "+ep, func() bool {
				// A new request each try: a retried one (after a 429) would have no body left.
				req, _ := http.NewRequest(method, base+"/api/v0/"+ep, strings.NewReader("{}"))
				req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				code = resp.StatusCode
				return code != http.StatusTooManyRequests
			})
			if (method == http.MethodPost && code != http.StatusMethodNotAllowed) || (method == http.MethodGet && code != http.StatusNotFound) {
				t.Errorf("dashboard %s /api/v0/%s: %d, want 405 for POST and 404 for GET", method, ep, code)
			}
		}
	}

	// Nothing the dashboard serves names a path of the node's machine.
	for _, p := range []string{"/", "/runs?per_page=500", "/evidence", "/api/v1/runs?per_page=500", "/api/v1/campaigns", "/api/v1/tasks/" + url.PathEscape(hm.Tasks[0])} {
		_, _, body := fetch(t, base+p)
		if strings.Contains(string(body), res.Dir) {
			t.Errorf("%s shows the demo's folder %s", p, res.Dir)
		}
	}

	t.Run("browser", func(t *testing.T) { browse(t, base, order, hm) })
}

// browse drives headless Chromium through every page in one browser session.
func browse(t *testing.T, base string, order []string, hm dashboard.Heatmap) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH: apt-get install -y chromium (.ci/run installs it)")
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelTimeout()

	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}

	pages := []string{"/", "/heatmap", "/campaigns", "/runs", "/peers", "/evidence"}
	for _, a := range order {
		pages = append(pages, "/agents/"+url.PathEscape(a))
	}
	for _, task := range hm.Tasks {
		pages = append(pages, "/tasks/"+url.PathEscape(task))
	}
	links := map[string]bool{}
	shots := os.Getenv("EVALMESH_DASHBOARD_SCREENSHOTS")
	for _, p := range pages {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p), chromedp.WaitReady("footer")); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		title, err := chromedp.Run(ctx, chromedp.Title())
		if err != nil || !strings.Contains(title, "evalmesh") {
			t.Errorf("%s: title %q (%v)", p, title, err)
		}
		hrefs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('a')).map(a => new URL(a.getAttribute('href'), location.href).href)`))
		if err != nil {
			t.Fatalf("%s: links: %v", p, err)
		}
		for _, h := range hrefs {
			links[h] = true
		}
		switch p {
		case "/":
			shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#leaderboard tr.player a.agent')).map(a => a.textContent)`))
			if err != nil || !slices.Equal(shown, order) {
				t.Errorf("leaderboard shows agents %v (%v), want %v in that order", shown, err, order)
			}
			hshown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#heureka tr.heureka-player')).map(r => r.dataset.agent)`))
			if err != nil || !slices.Contains(hshown, "cosci-thorough") || !slices.Contains(hshown, "cosci-hasty") {
				t.Errorf("the HeurekaBench table shows %v (%v), want both co-scientists", hshown, err)
			}
		case "/heatmap":
			cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('svg.heatmap rect.cell')).map(r => r.querySelector('title').textContent.split(':')[0])`))
			var want []string
			for _, c := range hm.Cells {
				want = append(want, c.Agent+" · "+c.Task)
			}
			if err != nil || !slices.Equal(cells, want) {
				t.Errorf("heatmap cells %v (%v), want one per (agent, task): %v", cells, err, want)
			}
		}
		if shots != "" && (p == "/" || p == "/heatmap") {
			png, err := chromedp.Run(ctx, chromedp.Screenshot("body"))
			if err != nil {
				t.Fatal(err)
			}
			name := map[string]string{"/": "dashboard-leaderboard.png", "/heatmap": "dashboard-heatmap.png"}[p]
			if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every link resolves (pages, JSON, downloads, attestations, logs).
	for l := range links {
		if !strings.HasPrefix(l, base) {
			t.Errorf("a link leaves the dashboard: %s", l)
			continue
		}
		if code, _, body := fetch(t, l); code != 200 {
			t.Errorf("link %s: %d %s", l, code, body)
		}
	}
	if len(links) < len(pages)+10 {
		t.Errorf("only %d distinct links on %d pages", len(links), len(pages))
	}
	if p := seen(); len(p) > 0 {
		t.Errorf("console errors and warnings:\n%s", strings.Join(p, "\n"))
	}
	// The console watch itself: a missing page logs an error it must catch.
	before := len(seen())
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/no-such-page")); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the console watch to see the 404 of a missing page", func() bool { return len(seen()) > before })
}

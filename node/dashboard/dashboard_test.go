package dashboard

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// synthSnapshot is a snapshot over a real ledger (scoring.ComputeLedger) of agents × tasks
// × seeds runs: agent i's score on a task grows with i, every seventh run is invalid.
func synthSnapshot(tb testing.TB, agents, tasks, seeds int) *Snapshot {
	tb.Helper()
	var infos []scoring.TaskInfo
	var results []scoring.Result
	s := &Snapshot{Network: "synthetic", NetworkDoc: strings.Repeat("d0c", 21) + "f", PeerID: "12D3KooWSynthetic", At: time.Unix(1_800_000_000, 0).UTC(),
		Tasks: []Task{}, Campaigns: []Campaign{}, Runs: []Run{}, Peers: []Peer{},
		Evidence: Evidence{Equivocations: []Exclusion{}, Disputed: []Exclusion{}, Refused: []Refusal{}, Misconduct: []Misconduct{}}}
	for t := 0; t < tasks; t++ {
		name := fmt.Sprintf("Task%02dAccuracy", t)
		infos = append(infos, scoring.TaskInfo{Name: name, Optimum: 1, SOTA: 0.95})
		s.Tasks = append(s.Tasks, Task{Name: name, CID: fmt.Sprintf("bafytask%02d", t), Metric: "Accuracy", SOTA: 0.95, Optimum: 1})
	}
	k := 0
	for a := 0; a < agents; a++ {
		agent := fmt.Sprintf("agent-%02d", a)
		for t := 0; t < tasks; t++ {
			for seed := 0; seed < seeds; seed++ {
				k++
				r := scoring.Result{Task: infos[t].Name, Agent: agent, Seed: seed, AttestationID: fmt.Sprintf("bafyrun%06d", k)}
				run := Run{ID: r.AttestationID, Task: r.Task, Agent: agent, Seed: seed, PeerID: "12D3KooWPeer", Lab: "lab:x", LabName: "lab1",
					Attempt: 1, LogCID: "bafylogs" + r.AttestationID[7:], LogsHere: true, WallSeconds: 12.5, GPUSeconds: 12.5, EnergyJoules: 3000, End: s.At.Add(-time.Duration(k) * time.Second), Counted: true}
				if k%7 == 0 {
					r.Status = "FAILED"
					run.InvalidReason = "no submission"
				} else {
					v := 0.2 + 0.7*float64(a+1)/float64(agents+1) + 0.05*math.Sin(float64(k))
					r.Status, r.Score = scoring.StatusSuccess, &v
					run.Valid, run.Score = true, &v
				}
				results = append(results, r)
				s.Runs = append(s.Runs, run)
			}
		}
	}
	l, err := scoring.ComputeLedger(results, infos, scoring.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s.Ledger, s.LedgerRoot, s.LedgerAt, s.Attestations = l, l.Root(), s.At, len(results)
	s.Campaigns = append(s.Campaigns, Campaign{ID: "bafycampaign", Title: "synthetic", LabName: "lab1", Tasks: tasks, Agents: agents, Seeds: seeds,
		Status: protocol.CampaignStatus{Slots: len(results), Done: len(results) - 3, Running: 2, Claimed: 1}})
	return s
}

type fixedSource struct{ s *Snapshot }

func (f fixedSource) Snapshot(context.Context) (*Snapshot, error) { return f.s, nil }
func (f fixedSource) Envelope(_ context.Context, id string) ([]byte, error) {
	if f.s.run(id) == nil {
		return nil, ErrNotFound
	}
	return []byte(`{"payloadType":"application/vnd.in-toto+json"}`), nil
}
func (f fixedSource) Object(context.Context, string, int) ([]byte, error) { return []byte("logs"), nil }

func newTestHandler(t testing.TB, s *Snapshot, opts Options) *Handler {
	t.Helper()
	opts.Source = fixedSource{s}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func get(t testing.TB, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestLeaderboardJSONAndCSVFollowTheLedger(t *testing.T) {
	s := synthSnapshot(t, 6, 3, 2)
	h := newTestHandler(t, s, Options{})
	var lb Leaderboard
	rec := get(t, h, "/api/v1/leaderboard")
	if err := json.Unmarshal(rec.Body.Bytes(), &lb); err != nil || rec.Code != 200 {
		t.Fatalf("%d %v: %s", rec.Code, err, rec.Body)
	}
	if lb.LedgerRoot != s.Ledger.Root() || len(lb.Rows) != len(s.Ledger.Agents) {
		t.Fatalf("root %s rows %d, want %s and %d", lb.LedgerRoot, len(lb.Rows), s.Ledger.Root(), len(s.Ledger.Agents))
	}
	// The network document's hash, as `evalmesh network hash` prints it, in the JSON and
	// beside the network's name in every page's header (whole in its title).
	if lb.NetworkDoc != s.NetworkDoc {
		t.Errorf("leaderboard network_doc %q, want %q", lb.NetworkDoc, s.NetworkDoc)
	}
	page := get(t, h, "/").Body.String()
	if want := `network synthetic (document <span class="mono" id="network-doc" title="` + s.NetworkDoc + `">` + shortID(s.NetworkDoc) + `</span>)`; !strings.Contains(page, want) {
		t.Errorf("page header does not show the network document's hash %s beside the network's name", s.NetworkDoc)
	}
	for i, r := range lb.Rows {
		a := s.Ledger.Agents[i]
		if r.Agent != a.Agent || r.Rank != a.Rank || r.Elo != a.Elo || r.EloCI != a.EloCI {
			t.Errorf("row %d: %+v, ledger %+v", i, r, a)
		}
		// Chatbot Arena's rule, checked independently of package scoring.
		rank := 1
		for _, o := range lb.Rows {
			if o.EloCI[0] > r.EloCI[1] {
				rank++
			}
		}
		if r.Rank != rank {
			t.Errorf("%s rank %d, want %d", r.Agent, r.Rank, rank)
		}
	}
	rec = get(t, h, "/api/v1/leaderboard.csv")
	rows, err := csv.NewReader(rec.Body).ReadAll()
	if err != nil || len(rows) != len(lb.Rows)+1 || rows[0][1] != "agent" {
		t.Fatalf("csv %v: %v", err, rows)
	}
	for i, r := range lb.Rows {
		if rows[i+1][1] != r.Agent || rows[i+1][len(rows[i+1])-1] != s.LedgerRoot {
			t.Errorf("csv row %d %v, want %s", i+1, rows[i+1], r.Agent)
		}
	}
	rec = get(t, h, "/api/v1/ledger.json")
	if rec.Body.String() != string(s.Ledger.Canonical()) || rec.Header().Get("X-Evalmesh-Ledger-Root") != s.LedgerRoot {
		t.Errorf("ledger.json is not the canonical ledger")
	}
}

func TestHeatmapHasOneCellPerAgentAndTaskMatchingTheLedger(t *testing.T) {
	s := synthSnapshot(t, 5, 4, 3)
	hm := s.Heatmap()
	if len(hm.Agents) != 5 || len(hm.Tasks) != 4 || len(hm.Cells) != 20 {
		t.Fatalf("%d agents, %d tasks, %d cells", len(hm.Agents), len(hm.Tasks), len(hm.Cells))
	}
	// With every agent on every task over the same seeds, an agent's normalized score is
	// the mean of its row.
	for _, a := range s.Ledger.Agents {
		if a.NormalizedScore == nil {
			continue
		}
		sum, n := 0.0, 0
		for _, c := range hm.Cells {
			if c.Agent == a.Agent {
				sum += *c.Score
				n++
			}
		}
		if got := sum / float64(n); math.Abs(got-*a.NormalizedScore) > 1e-6 {
			t.Errorf("%s: heatmap row mean %.9f, ledger normalized score %.9f", a.Agent, got, *a.NormalizedScore)
		}
	}
	page := get(t, newTestHandler(t, s, Options{}), "/heatmap").Body.String()
	if got := strings.Count(page, `<rect class="cell"`); got != 20 {
		t.Errorf("heatmap page has %d cells, want 20", got)
	}
}

func TestEveryEndpointAnswers(t *testing.T) {
	s := synthSnapshot(t, 3, 2, 2)
	h := newTestHandler(t, s, Options{RatePerSecond: 1000, Burst: 1000})
	for _, p := range []string{"/", "/heatmap", "/agents/agent-01", "/tasks/Task01Accuracy", "/campaigns", "/runs", "/peers", "/evidence",
		"/api/v1/", "/api/v1/heatmap", "/api/v1/agents/agent-01", "/api/v1/tasks/Task01Accuracy", "/api/v1/campaigns", "/api/v1/runs",
		"/api/v1/peers", "/api/v1/evidence", "/api/v1/runs/bafyrun000001/attestation", "/api/v1/runs/bafyrun000001/logs", "/runs/bafyrun000001", "/api/v1/runs/bafyrun000001",
		"/style.css", "/favicon.svg"} {
		if rec := get(t, h, p); rec.Code != 200 {
			t.Errorf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
	for _, p := range []string{"/agents/nobody", "/tasks/none", "/api/v1/agents/nobody", "/api/v1/runs/bafynone/attestation", "/api/v0/id", "/metrics",
		"/runs/bafynone", "/api/v1/runs/bafynone", "/api/v1/runs/bafyrun000001/transcript"} {
		if rec := get(t, h, p); rec.Code != 404 {
			t.Errorf("%s: %d, want 404", p, rec.Code)
		}
	}
	var av AgentView
	if err := json.Unmarshal(get(t, h, "/api/v1/agents/agent-01").Body.Bytes(), &av); err != nil {
		t.Fatal(err)
	}
	if av.Row == nil || len(av.Tasks) != 2 || len(av.Tasks[0].Seeds) != 2 {
		t.Errorf("agent view %+v", av)
	}
	var tv TaskView
	if err := json.Unmarshal(get(t, h, "/api/v1/tasks/Task01Accuracy").Body.Bytes(), &tv); err != nil {
		t.Fatal(err)
	}
	if len(tv.Runs) != 3*2 || tv.Metric != "Accuracy" || tv.Worst == nil {
		t.Errorf("task view: %d runs, metric %q, worst %v", len(tv.Runs), tv.Metric, tv.Worst)
	}
}

func TestRunsArePagedWithinBounds(t *testing.T) {
	s := synthSnapshot(t, 4, 3, 5) // 60 runs
	h := newTestHandler(t, s, Options{RatePerSecond: 1000, Burst: 1000})
	var p RunsPage
	_ = json.Unmarshal(get(t, h, "/api/v1/runs?page=2&per_page=25").Body.Bytes(), &p)
	if p.Total != 60 || p.Pages != 3 || p.Page != 2 || len(p.Runs) != 25 || p.Runs[0].ID != s.Runs[25].ID {
		t.Errorf("page 2 of 25: %+v", p)
	}
	_ = json.Unmarshal(get(t, h, "/api/v1/runs?page=99&per_page=100000").Body.Bytes(), &p)
	if p.PerPage != MaxPerPage || p.Page != 1 || len(p.Runs) != 60 {
		t.Errorf("per_page is not clamped to %d: %+v", MaxPerPage, p.PerPage)
	}
}

func TestReadOnlyAndRateLimited(t *testing.T) {
	s := synthSnapshot(t, 2, 1, 1)
	now := time.Unix(0, 0)
	h := newTestHandler(t, s, Options{RatePerSecond: 2, Burst: 3, Now: func() time.Time { return now }})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/api/v1/leaderboard", strings.NewReader("{}")))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, rec.Code)
		}
	}
	// The three POSTs above took the burst: the next GET waits for a token.
	if rec := get(t, h, "/"); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("over the rate: %d", rec.Code)
	}
	now = now.Add(time.Second) // two tokens
	if rec := get(t, h, "/"); rec.Code != 200 {
		t.Errorf("after a second: %d", rec.Code)
	}
	other := httptest.NewRequest(http.MethodGet, "/", nil)
	other.RemoteAddr = "192.0.2.7:5555"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, other)
	if rec.Code != 200 {
		t.Errorf("another address shares the first's bucket: %d", rec.Code)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestNamesAreEscaped(t *testing.T) {
	s := synthSnapshot(t, 2, 1, 1)
	s.Runs[0].InvalidReason = `<script>alert(1)</script>`
	s.Runs[0].Valid = false
	for i := range s.Ledger.Agents {
		if s.Ledger.Agents[i].Agent == "agent-00" {
			s.Ledger.Agents[i].Agent = `<img src=x onerror=alert(1)>`
		}
	}
	h := newTestHandler(t, s, Options{RatePerSecond: 1000, Burst: 1000})
	for _, p := range []string{"/", "/runs", "/heatmap"} {
		body := get(t, h, p).Body.String()
		if strings.Contains(body, "<script>") || strings.Contains(body, "<img") {
			t.Errorf("%s renders markup from a name or reason", p)
		}
	}
}

func TestSnapshotIsReusedForMaxAge(t *testing.T) {
	s := synthSnapshot(t, 2, 1, 1)
	now := time.Unix(0, 0)
	src := &countingSource{fixedSource: fixedSource{s}}
	h, err := New(Options{Source: src, MaxAge: time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	get(t, h, "/")
	get(t, h, "/heatmap")
	if src.n != 1 {
		t.Fatalf("%d snapshots for two requests within MaxAge", src.n)
	}
	now = now.Add(2 * time.Second)
	get(t, h, "/")
	if src.n != 2 {
		t.Fatalf("%d snapshots after MaxAge passed", src.n)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countingSource struct {
	fixedSource
	n int
}

func (c *countingSource) Snapshot(ctx context.Context) (*Snapshot, error) {
	c.n++
	return c.fixedSource.Snapshot(ctx)
}

// FuzzRequest sends any path and query (outside input) to the dashboard: it answers every
// one without a server error, and never with a method other than GET's pages.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{"/", "/runs?page=-1&per_page=0", "/runs?page=9999999999999999999", "/agents/%00", "/tasks/..%2f..%2fetc",
		"/api/v1/runs/x/attestation", "/api/v1/runs/bafyrun000001/logs", "/api/v1/agents/agent-00", "//heatmap", "/api/v1/runs?per_page=abc"} {
		f.Add(seed)
	}
	s := synthSnapshot(f, 2, 2, 1)
	h := newTestHandler(f, s, Options{RatePerSecond: 1e9, Burst: 1 << 30})
	f.Fuzz(func(t *testing.T, target string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \r\n\t#") {
			return
		}
		req, err := http.NewRequest(http.MethodGet, "http://dash"+target, nil)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			b, _ := io.ReadAll(rec.Body)
			t.Fatalf("%s: %d %s", target, rec.Code, b)
		}
	})
}

// BenchmarkLeaderboardPage renders the leaderboard of 50 agents × 20 tasks × 5 seeds
// (issue 14's goals: at most 200 KB and 50 ms of server time); it reports the page's bytes.
// The snapshot is cached (MaxAge), as between a daemon's refreshes.
func BenchmarkLeaderboardPage(b *testing.B) {
	benchPage(b, "/")
}

// BenchmarkHeatmapPage is the same for the heatmap (1000 cells).
func BenchmarkHeatmapPage(b *testing.B) {
	benchPage(b, "/heatmap")
}

func benchPage(b *testing.B, path string) {
	s := synthSnapshot(b, 50, 20, 5)
	h := newTestHandler(b, s, Options{RatePerSecond: 1e9, Burst: 1 << 30, MaxAge: time.Hour})
	size := 0
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := get(b, h, path)
		if rec.Code != 200 {
			b.Fatalf("%d", rec.Code)
		}
		size = rec.Body.Len()
	}
	b.StopTimer()
	b.ReportMetric(float64(size)/1024, "KB/page")
	// CPU time (user + system, all threads) per page: on a shared machine wall time counts
	// other processes' turns, CPU time does not.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

func TestRateLimiterTableIsBounded(t *testing.T) {
	s := synthSnapshot(t, 2, 1, 1)
	h := newTestHandler(t, s, Options{RatePerSecond: 1, Burst: 1})
	for i := 0; i < maxClients+50; i++ {
		req := httptest.NewRequest(http.MethodGet, "/style.css", nil)
		req.RemoteAddr = fmt.Sprintf("[2001:db8::%x]:1", i)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if n := len(h.limiters); n != maxClients+1 {
		t.Errorf("%d buckets, want at most %d", n, maxClients+1)
	}
}

func TestLeaderboardShowsTheHeurekaBenchTable(t *testing.T) {
	s := synthSnapshot(t, 3, 2, 1)
	h := newTestHandler(t, s, Options{})
	if body := get(t, h, "/").Body.String(); strings.Contains(body, `id="heureka"`) {
		t.Fatal("a ledger without HeurekaBench runs shows a HeurekaBench table")
	}
	oeq, acc := 4.87, 0.967
	s.Ledger.Heureka = &scoring.HeurekaTable{Tasks: []string{"heureka-sc"}, EloFit: "mle", Agents: []scoring.HeurekaAgent{
		{Agent: "cosci-thorough", Rank: 1, Elo: 1711, EloCI: [2]float64{1694, 1725}, Runs: 3, ValidRuns: 3, OEQ: &oeq, OEQCI: &[2]float64{4.6, 5}, MCQAccuracy: &acc, MCQAccuracyCI: &[2]float64{0.9, 1}},
		{Agent: "sota", Rank: 2, Elo: 998, EloCI: [2]float64{983, 1023}},
	}}
	h = newTestHandler(t, s, Options{})
	var lb Leaderboard
	if err := json.Unmarshal(get(t, h, "/api/v1/leaderboard").Body.Bytes(), &lb); err != nil {
		t.Fatal(err)
	}
	if lb.Heureka == nil || len(lb.Heureka.Agents) != 2 || lb.Heureka.Agents[0].Agent != "cosci-thorough" {
		t.Fatalf("leaderboard JSON heureka = %+v, want the ledger's table", lb.Heureka)
	}
	body := get(t, h, "/").Body.String()
	i, j := strings.Index(body, `data-agent="cosci-thorough"`), strings.Index(body, `class="heureka-player" data-agent="sota"`)
	if !strings.Contains(body, `<table id="heureka">`) || i < 0 || j < i || !strings.Contains(body, "4.87") {
		t.Fatalf("leaderboard page lacks the HeurekaBench rows in ledger order:\n%s", body)
	}
	// An agent that ran only HeurekaBench tasks has a page, linked from its row, with its
	// HeurekaBench figures; the reference player has none.
	if !strings.Contains(body, `href="/agents/cosci-thorough"`) {
		t.Fatalf("the HeurekaBench row does not link the agent's page:\n%s", body)
	}
	page := get(t, h, "/agents/cosci-thorough")
	if page.Code != 200 || !strings.Contains(page.Body.String(), `id="agent-heureka"`) || !strings.Contains(page.Body.String(), "4.87") {
		t.Fatalf("agent page of a HeurekaBench agent: %d\n%s", page.Code, page.Body.String())
	}
	var av AgentView
	if err := json.Unmarshal(get(t, h, "/api/v1/agents/cosci-thorough").Body.Bytes(), &av); err != nil || av.Heureka == nil || av.Heureka.Runs != 3 {
		t.Fatalf("agent JSON heureka = %+v (%v), want its HeurekaBench row", av.Heureka, err)
	}
	if code := get(t, h, "/agents/sota").Code; code != 404 {
		t.Fatalf("the reference player's page: %d, want 404", code)
	}
}

// The campaign progress bar draws each count to scale, the slots awaiting a sealed
// bundle's key among them, and its title says the counts.
func TestProgressBarShowsSlotsAwaitingAKey(t *testing.T) {
	bar := string(progressSVG(Campaign{Status: protocol.CampaignStatus{Slots: 4, Done: 1, Running: 1, AwaitingKey: 2}}))
	for _, want := range []string{
		`<title>1 of 4 slots done, 1 running, 0 claimed, 0 failed, 2 awaiting a key</title>`,
		`<rect x="0" y="0" width="60" height="14" class="done"/>`,
		`<rect x="60" y="0" width="60" height="14" class="running"/>`,
		`<rect x="120" y="0" width="120" height="14" class="awaiting-key"/>`,
	} {
		if !strings.Contains(bar, want) {
			t.Errorf("progress bar %s\nlacks %s", bar, want)
		}
	}
	if plain := string(progressSVG(Campaign{Status: protocol.CampaignStatus{Slots: 2, Done: 2}})); strings.Contains(plain, "awaiting") {
		t.Errorf("no slot awaits a key, yet the bar says so: %s", plain)
	}
}

// The evidence page says, per lab, what it is proven to have done and whether its results
// are set aside for it.
func TestEvidencePageShowsMisconductPerLab(t *testing.T) {
	s := synthSnapshot(t, 2, 1, 1)
	s.Evidence.Misconduct = []Misconduct{
		{Principal: "lab:liar", LabName: "lab3", Kind: "re-score overruled by a majority of labs", Evidence: "bafyveto", Run: "bafyrun000001", SetAside: true},
		{Principal: "lab:other", LabName: "lab4", Kind: "equivocation by one node", Evidence: "bafyeq", SetAside: false},
	}
	h := newTestHandler(t, s, Options{RatePerSecond: 1000, Burst: 1000})
	body := get(t, h, "/evidence").Body.String()
	for _, want := range []string{"lab3", "re-score overruled by a majority of labs", "its results are set aside", "lab4", "recorded (pardoned, or the network records only)"} {
		if !strings.Contains(body, want) {
			t.Errorf("/evidence lacks %q", want)
		}
	}
	var ev Evidence
	if err := json.Unmarshal(get(t, h, "/api/v1/evidence").Body.Bytes(), &ev); err != nil || len(ev.Misconduct) != 2 || !ev.Misconduct[0].SetAside {
		t.Errorf("/api/v1/evidence misconduct %+v (%v)", ev.Misconduct, err)
	}
}

// The task page says who holds the task's bundle and whether the pin factor is met, and
// the runs page who holds each run's objects (the labs holding all of them, and whether each
// object meets its factor), as the node's last repair round decided (Task.Pin, Run.Pins).
func TestTaskAndRunPagesShowWhoHoldsTheObjects(t *testing.T) {
	s := synthSnapshot(t, 2, 1, 1)
	task := s.Tasks[0].Name
	s.Tasks[0].Pin = &Pin{CID: s.Tasks[0].CID, What: "bundle", Factor: 2, Holding: []string{"lab2", "lab1"}, Met: true}
	s.Runs[0].Pins = []Pin{{CID: "bafysub", What: "submission", Factor: 2, Holding: []string{"lab1", "lab3"}, Met: true},
		{CID: "bafylogs", What: "logs", Factor: 2, Holding: []string{"lab3"}, Met: false}}
	s.Runs[1].Pins = []Pin{{CID: "bafysub2", What: "submission"}} // not surveyed yet
	h := newTestHandler(t, s, Options{RatePerSecond: 1000, Burst: 1000})
	page := get(t, h, "/tasks/"+task).Body.String()
	for _, want := range []string{`<p id="task-pin">Bundle held by lab2, lab1 · pin factor 2: <span class="good">met</span>`, "evalmesh pin status " + s.Tasks[0].CID,
		`lab3 <span class="bad">under factor</span>`, "logs bafylogs: held by lab3 (factor 2, UNDER FACTOR)"} {
		if !strings.Contains(page, want) {
			t.Errorf("/tasks/%s lacks %q", task, want)
		}
	}
	runs := get(t, h, "/runs").Body.String()
	if !strings.Contains(runs, `lab3 <span class="bad">under factor</span>`) || strings.Count(runs, `<span class="meta">–</span>`) != len(s.Runs)-1 {
		t.Errorf("/runs does not show run 0's objects under factor (held by lab3 alone) and '–' for the %d runs not surveyed:\n%s", len(s.Runs)-1, runs)
	}
	var v TaskView
	if err := json.Unmarshal(get(t, h, "/api/v1/tasks/"+task).Body.Bytes(), &v); err != nil || v.Pin == nil || !v.Pin.Met || v.Pin.Factor != 2 || len(v.Runs[0].Pins) != 2 {
		t.Errorf("/api/v1/tasks/%s pin %+v, run pins %+v (%v)", task, v.Pin, v.Runs[0].Pins, err)
	}
	s.Tasks[0].Pin = &Pin{CID: s.Tasks[0].CID, What: "bundle", Holding: []string{}}
	h = newTestHandler(t, s, Options{RatePerSecond: 1000, Burst: 1000})
	if page := get(t, h, "/tasks/"+task).Body.String(); !strings.Contains(page, "not yet surveyed") {
		t.Errorf("a bundle no repair round covered yet: /tasks/%s does not say so", task)
	}
}

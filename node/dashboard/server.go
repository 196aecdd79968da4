package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
)

// Source is what the dashboard reads from: the node.
type Source interface {
	// Snapshot returns what the node holds now. The dashboard never mutates it.
	Snapshot(ctx context.Context) (*Snapshot, error)
	// Envelope returns the stored attestation envelope (DSSE JSON) with that ID.
	Envelope(ctx context.Context, id string) ([]byte, error)
	// Object returns the block with that CID if the node holds it (no fetch from peers),
	// refusing one over max bytes.
	Object(ctx context.Context, cid string, max int) ([]byte, error)
}

// ErrNotFound is what a Source returns for an ID or CID it does not hold.
var ErrNotFound = errors.New("not found")

// Options configure a Handler. Zero fields take the defaults in brackets.
type Options struct {
	Source Source
	// Metrics, when set, is served on /metrics (the node's own registry).
	Metrics prometheus.Gatherer
	// MaxAge is how long a Snapshot is reused (1 s).
	MaxAge time.Duration
	// RatePerSecond and Burst bound each client address's requests (20/s, burst 60);
	// a request over the bound gets 429 with Retry-After.
	RatePerSecond float64
	Burst         int
	// MaxObjectBytes bounds a log archive served (32 MiB).
	MaxObjectBytes int
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Handler serves the dashboard. Build it with New.
type Handler struct {
	opts Options
	mux  *http.ServeMux
	tmpl *template.Template

	snapMu  sync.Mutex
	snap    *Snapshot
	snapAt  time.Time
	refresh sync.Mutex // one refresh at a time

	limMu    sync.Mutex
	limiters map[string]*clientLimiter
	sweptAt  time.Time
}

type clientLimiter struct {
	lim  *rate.Limiter
	seen time.Time
}

//go:embed templates/*.html templates/style.css templates/favicon.svg
var templateFS embed.FS

// New returns a Handler reading from opts.Source.
func New(opts Options) (*Handler, error) {
	if opts.Source == nil {
		return nil, errors.New("dashboard: no source")
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = time.Second
	}
	if opts.RatePerSecond <= 0 {
		opts.RatePerSecond = 20
	}
	if opts.Burst <= 0 {
		opts.Burst = 60
	}
	if opts.MaxObjectBytes <= 0 {
		opts.MaxObjectBytes = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now // wall clock: the default where no Now is given (node passes its clock's)
	}
	t, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	h := &Handler{opts: opts, tmpl: t, mux: http.NewServeMux(), limiters: map[string]*clientLimiter{}}
	h.routes()
	return h, nil
}

// Server wraps h in an http.Server with the dashboard's timeouts and header bound.
func Server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}
}

// viewData is what a page renders and its JSON twin answers, from one snapshot.
type viewData func(r *http.Request, s *Snapshot) (any, error)

// routes registers every page and endpoint on h.mux.
func (h *Handler) routes() {
	h.viewRoutes()
	h.runFileRoutes()
	h.downloadRoutes()
	h.staticRoutes()
}

// page serves a page rendered with template name from data.
func (h *Handler) page(path, name string, data viewData) {
	h.mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.snapshot(w, r)
		if !ok {
			return
		}
		d, err := data(r, s)
		if err != nil {
			h.errorPage(w, http.StatusNotFound, err)
			return
		}
		h.render(w, name, s, d)
	})
}

// api serves data as JSON under /api/v1/.
func (h *Handler) api(path string, data viewData) {
	h.mux.HandleFunc("GET /api/v1/"+path, func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.snapshot(w, r)
		if !ok {
			return
		}
		d, err := data(r, s)
		if err != nil {
			writeError(w, http.StatusNotFound, err)
			return
		}
		writeJSON(w, d)
	})
}

// both serves data as a page and as its JSON twin.
func (h *Handler) both(pagePath, apiPath, name string, data viewData) {
	h.page(pagePath, name, data)
	h.api(apiPath, data)
}

// viewRoutes adds every page with its JSON twin, and the /api/v1/ index.
func (h *Handler) viewRoutes() {
	h.both("/{$}", "leaderboard", "leaderboard", func(_ *http.Request, s *Snapshot) (any, error) { return s.Leaderboard(), nil })
	h.both("/heatmap", "heatmap", "heatmap", func(_ *http.Request, s *Snapshot) (any, error) { return s.Heatmap(), nil })
	h.both("/agents/{name}", "agents/{name}", "agent", func(r *http.Request, s *Snapshot) (any, error) {
		v, ok := s.Agent(r.PathValue("name"))
		if !ok {
			return nil, fmt.Errorf("no agent %q on this ledger (the leaderboard lists them)", r.PathValue("name"))
		}
		return v, nil
	})
	h.both("/tasks/{name}", "tasks/{name}", "task", func(r *http.Request, s *Snapshot) (any, error) {
		v, ok := s.TaskPage(r.PathValue("name"))
		if !ok {
			return nil, fmt.Errorf("no task %q in this node's campaigns (the heatmap lists them)", r.PathValue("name"))
		}
		return v, nil
	})
	h.both("/campaigns", "campaigns", "campaigns", func(_ *http.Request, s *Snapshot) (any, error) { return orEmpty(s.Campaigns), nil })
	h.both("/runs", "runs", "runs", func(r *http.Request, s *Snapshot) (any, error) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		per, err := strconv.Atoi(r.URL.Query().Get("per_page"))
		if err != nil {
			per = DefaultPerPage
		}
		return s.RunsPage(page, per), nil
	})
	h.both("/runs/{id}", "runs/{id}", "run", func(r *http.Request, s *Snapshot) (any, error) {
		run := s.run(r.PathValue("id"))
		if run == nil {
			return nil, fmt.Errorf("no run attestation %q on this node (the runs page lists them)", r.PathValue("id"))
		}
		p := RunPage{Run: *run}
		if run.TranscriptCID != "" {
			tv, err := transcriptView(r.Context(), h.opts.Source, run.TranscriptCID)
			if err != nil {
				p.TranscriptErr = err.Error()
			}
			p.Transcript = tv
		}
		return p, nil
	})
	h.both("/peers", "peers", "peers", func(_ *http.Request, s *Snapshot) (any, error) { return orEmpty(s.Peers), nil })
	h.both("/evidence", "evidence", "evidence", func(_ *http.Request, s *Snapshot) (any, error) { return s.Evidence, nil })
	h.api("{$}", func(_ *http.Request, _ *Snapshot) (any, error) { return endpoints, nil })
}

// runFileRoutes adds the files of a run and the objects they name: its transcript, its
// attestation, its log archive and a transcript's bodies.
func (h *Handler) runFileRoutes() {
	h.mux.HandleFunc("GET /api/v1/runs/{id}/transcript", func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.snapshot(w, r)
		if !ok {
			return
		}
		run := s.run(r.PathValue("id"))
		if run == nil || run.TranscriptCID == "" {
			writeError(w, http.StatusNotFound, fmt.Errorf("run %s: no such run, or it has no transcript (only runs of agents with a model do)", r.PathValue("id")))
			return
		}
		data, err := h.opts.Source.Object(r.Context(), run.TranscriptCID, attest.MaxTranscriptBytes)
		if err != nil {
			writeError(w, statusOf(err), fmt.Errorf("transcript %s of run %s: %w", run.TranscriptCID, run.ID, err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	h.mux.HandleFunc("GET /api/v1/objects/{cid}", func(w http.ResponseWriter, r *http.Request) {
		// A transcript's bodies, by the CIDs its document lists (served as bytes: never
		// rendered by the browser).
		data, err := h.opts.Source.Object(r.Context(), r.PathValue("cid"), h.opts.MaxObjectBytes)
		if err != nil {
			writeError(w, statusOf(err), fmt.Errorf("object %s: %w", r.PathValue("cid"), err))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(data)
	})
	h.mux.HandleFunc("GET /api/v1/runs/{id}/attestation", func(w http.ResponseWriter, r *http.Request) {
		env, err := h.opts.Source.Envelope(r.Context(), r.PathValue("id"))
		if err != nil {
			writeError(w, statusOf(err), fmt.Errorf("attestation %s: %w", r.PathValue("id"), err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(env)
	})
	h.mux.HandleFunc("GET /api/v1/runs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.snapshot(w, r)
		if !ok {
			return
		}
		run := s.run(r.PathValue("id"))
		if run == nil || !run.LogsHere {
			writeError(w, http.StatusNotFound, fmt.Errorf("run %s: no such run, or this node does not hold its log archive (the node that ran it does)", r.PathValue("id")))
			return
		}
		data, err := h.opts.Source.Object(r.Context(), run.LogCID, h.opts.MaxObjectBytes)
		if err != nil {
			writeError(w, statusOf(err), fmt.Errorf("log archive %s of run %s: %w", run.LogCID, run.ID, err))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+run.ID+`-logs.tar.gz"`)
		_, _ = w.Write(data)
	})
}

// downloadRoutes adds the ledger's downloads: the leaderboard as CSV and the canonical ledger.
func (h *Handler) downloadRoutes() {
	h.mux.HandleFunc("GET /api/v1/leaderboard.csv", func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.snapshot(w, r)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="leaderboard.csv"`)
		_ = writeLeaderboardCSV(w, s.Leaderboard())
	})
	h.mux.HandleFunc("GET /api/v1/ledger.json", func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.snapshot(w, r)
		if !ok {
			return
		}
		if s.Ledger == nil {
			writeError(w, http.StatusServiceUnavailable, errors.New("no ledger yet: this node has computed none (it knows no campaign whose bundles it holds)"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Disposition", `attachment; filename="ledger-`+s.LedgerRoot+`.json"`)
		w.Header().Set("X-Evalmesh-Ledger-Root", s.LedgerRoot)
		_, _ = w.Write(s.Ledger.Canonical())
	})
}

// staticRoutes adds the stylesheet, the icon and, when a registry is set, /metrics.
func (h *Handler) staticRoutes() {
	for file, ctype := range map[string]string{"style.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"} {
		body, _ := templateFS.ReadFile("templates/" + file)
		h.mux.HandleFunc("GET /"+file, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Cache-Control", "max-age=3600")
			_, _ = w.Write(body)
		})
	}
	if h.opts.Metrics != nil {
		h.mux.Handle("GET /metrics", promhttp.HandlerFor(h.opts.Metrics, promhttp.HandlerOpts{}))
	}
}

// endpoints is /api/v1/: the index docs/api.md documents.
var endpoints = map[string]string{
	"leaderboard":               "/api/v1/leaderboard",
	"leaderboard_csv":           "/api/v1/leaderboard.csv",
	"ledger":                    "/api/v1/ledger.json",
	"heatmap":                   "/api/v1/heatmap",
	"agent":                     "/api/v1/agents/{name}",
	"task":                      "/api/v1/tasks/{name}",
	"campaigns":                 "/api/v1/campaigns",
	"runs":                      "/api/v1/runs?page=1&per_page=100",
	"attestation":               "/api/v1/runs/{id}/attestation",
	"logs":                      "/api/v1/runs/{id}/logs",
	"run":                       "/api/v1/runs/{id}",
	"transcript":                "/api/v1/runs/{id}/transcript",
	"object":                    "/api/v1/objects/{cid}",
	"peers":                     "/api/v1/peers",
	"evidence":                  "/api/v1/evidence",
	"metrics (Prometheus text)": "/metrics",
}

// ServeHTTP bounds each client's rate, refuses every method but GET and HEAD, sets the
// headers that keep the pages inert (no script, nothing from elsewhere), then routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if !h.allow(r) {
		hd.Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, fmt.Errorf("more than %g requests a second from your address: slow down", h.opts.RatePerSecond))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: the dashboard is read-only (GET and HEAD only)", r.Method, r.URL.Path))
		return
	}
	h.mux.ServeHTTP(w, r)
}

// maxClients bounds the rate limiter's table.
const maxClients = 10000

// allow takes a token from the client address's bucket. Buckets idle for a minute are
// dropped (at most once a minute), so the table stays as small as the recent visitors, and
// never holds more than maxClients (+1 shared bucket).
func (h *Handler) allow(r *http.Request) bool {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	now := h.opts.Now()
	h.limMu.Lock()
	defer h.limMu.Unlock()
	if now.Sub(h.sweptAt) > time.Minute {
		for k, l := range h.limiters {
			if now.Sub(l.seen) > time.Minute {
				delete(h.limiters, k)
			}
		}
		h.sweptAt = now
	}
	l := h.limiters[ip]
	if l == nil && len(h.limiters) >= maxClients {
		ip = "overflow" // many addresses at once (a botnet, IPv6 sprays): they share one bucket
		l = h.limiters[ip]
	}
	if l == nil {
		l = &clientLimiter{lim: rate.NewLimiter(rate.Limit(h.opts.RatePerSecond), h.opts.Burst)}
		h.limiters[ip] = l
	}
	l.seen = now
	return l.lim.AllowN(now, 1)
}

// snapshot returns a Snapshot at most MaxAge old, asking the Source when the last is older.
func (h *Handler) snapshot(w http.ResponseWriter, r *http.Request) (*Snapshot, bool) {
	h.snapMu.Lock()
	s, at := h.snap, h.snapAt
	h.snapMu.Unlock()
	if s != nil && h.opts.Now().Sub(at) < h.opts.MaxAge {
		return s, true
	}
	h.refresh.Lock()
	defer h.refresh.Unlock()
	h.snapMu.Lock()
	s, at = h.snap, h.snapAt
	h.snapMu.Unlock()
	if s != nil && h.opts.Now().Sub(at) < h.opts.MaxAge {
		return s, true
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second) // wall clock: bounds an HTTP request its browser waits on
	defer cancel()
	s, err := h.opts.Source.Snapshot(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("the node cannot answer now: %w", err))
		return nil, false
	}
	h.snapMu.Lock()
	h.snap, h.snapAt = s, h.opts.Now()
	h.snapMu.Unlock()
	return s, true
}

// pageData is what every template gets.
type pageData struct {
	Snap *Snapshot
	Data any
	Page string
}

func (h *Handler) render(w http.ResponseWriter, name string, s *Snapshot, d any) {
	var buf bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&buf, name, pageData{Snap: s, Data: d, Page: name}); err != nil {
		h.errorPage(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

func (h *Handler) errorPage(w http.ResponseWriter, code int, err error) {
	var buf bytes.Buffer
	if h.tmpl.ExecuteTemplate(&buf, "error", pageData{Data: err.Error(), Page: "error"}) != nil {
		writeError(w, code, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func statusOf(err error) int {
	if errors.Is(err, ErrNotFound) {
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeLeaderboardCSV writes the leaderboard rows, one per player, with empty cells where
// a value does not apply (the reference player has no normalized score).
func writeLeaderboardCSV(w io.Writer, lb Leaderboard) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"rank", "agent", "elo", "elo_ci_low", "elo_ci_high", "normalized_score", "normalized_score_ci_low",
		"normalized_score_ci_high", "valid_submission_rate", "runs", "ledger_root"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 9, 64) }
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return f(*v)
	}
	for _, r := range lb.Rows {
		lo, hi := "", ""
		if r.NormalizedScoreCI != nil {
			lo, hi = f(r.NormalizedScoreCI[0]), f(r.NormalizedScoreCI[1])
		}
		_ = cw.Write([]string{strconv.Itoa(r.Rank), r.Agent, f(r.Elo), f(r.EloCI[0]), f(r.EloCI[1]), opt(r.NormalizedScore), lo, hi,
			opt(r.ValidSubmissionRate), strconv.Itoa(r.Runs), lb.LedgerRoot})
	}
	cw.Flush()
	return cw.Error()
}

// shortID shortens a long hex or base58 identifier for display (the title attribute keeps
// the whole).
func shortID(s string) string {
	if len(s) <= 14 {
		return s
	}
	return s[:6] + "…" + s[len(s)-6:]
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

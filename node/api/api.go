package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/tasks"
)

// The HTTP API, served on 127.0.0.1 (by default on a free port, written to HOME/api). It is
// the owner's alone: every request must carry the token of HOME/api.token (mode 0600, new at
// each daemon start) as `Authorization: Bearer TOKEN`, name the API's own loopback address in
// Host, carry no Origin, and send a JSON body (or a CAR on dag/import) within a size bound;
// guard refuses anything else before a handler runs (docs/api.md). Every endpoint is POST,
// JSON in and out; long operations answer with a stream of Event lines (NDJSON) ending in
// one with Done or Error set.
//
//	POST /api/v0/id                          → IDInfo
//	POST /api/v0/peers                       → []PeerInfo
//	POST /api/v0/peers/known                 → []KnownPeer
//	POST /api/v0/connect    {addr}           → {}
//	POST /api/v0/pin/ls                      → []PinInfo
//	POST /api/v0/pin/add    {cid, name}      → Event stream (fetch progress)
//	POST /api/v0/pin/rm     {cid}            → {}
//	POST /api/v0/task/add   {dir, unchecked} → Event stream (pack progress; Done.CID)
//	POST /api/v0/task/get   {cid, dir, timeout_seconds} → Event stream (fetch progress, unpack phase)
//	POST /api/v0/dag/export?cid=CID          → CARv1 bytes
//	POST /api/v0/dag/import (body: CAR)      → {roots}
//	POST /api/v0/repo/gc    {dry_run}        → Event stream (mark, sweep, compact; Done.GC)
//
// Paths in requests are absolute paths on the daemon's machine: the CLI resolves them.
const Prefix = "/api/v0/"

// fetchDone is the final event of a fetch: the CID and, when it resumed, what it kept.
func fetchDone(c cid.Cid, rep FetchReport) Event {
	e := Event{CID: c.String()}
	if rep.Resumed() {
		e.KeptBlocks, e.KeptBytes, e.Total = rep.KeptBlocks, rep.KeptBytes, rep.Total
	}
	return e
}

// ErrorBody is the JSON body of every refusal and failure: {"error": "..."}.
type ErrorBody struct {
	Error string `json:"error"`
}

// ConnectRequest is the body of connect.
type ConnectRequest struct {
	Addr string `json:"addr"`
}

// PinRequest is the body of pin/add and pin/rm.
type PinRequest struct {
	CID  string `json:"cid"`
	Name string `json:"name,omitempty"`
}

// AddRequest is the body of task/add.
type AddRequest struct {
	Dir       string `json:"dir"`
	Unchecked bool   `json:"unchecked,omitempty"`
}

// GetRequest is the body of task/get.
type GetRequest struct {
	CID string `json:"cid"`
	Dir string `json:"dir"`
	// TimeoutSeconds, when positive, is GetOptions.Timeout.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// GCRequest is the body of repo/gc.
type GCRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// ImportResponse is the answer of dag/import.
type ImportResponse struct {
	Roots []string `json:"roots"`
}

// Handler returns the HTTP API served from n, every route behind guard.
func Handler(n Node, o Options) http.Handler {
	mux := http.NewServeMux()
	meshRoutes(mux, n, o)
	pinRoutes(mux, n, o)
	if o.TestControls != nil {
		testRoutes(mux, o.TestControls)
	}
	peerRoutes(mux, n)
	pinSetRoutes(mux, n, o)
	taskRoutes(mux, n, o)
	dagRoutes(mux, n)
	storeRoutes(mux, n)
	fileRoutes(mux, n)
	repoRoutes(mux, n, o)
	return guard(mux, o)
}

// peerRoutes adds id, peers, peers/known and connect: who this node is and whom it reaches.
func peerRoutes(mux *http.ServeMux, n Node) {
	mux.HandleFunc("POST "+Prefix+"id", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, IDInfo{PeerID: n.ID().String(), Addrs: n.Addrs()})
	})
	mux.HandleFunc("POST "+Prefix+"peers", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, OrEmpty(n.Peers()))
	})
	mux.HandleFunc("POST "+Prefix+"peers/known", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, OrEmpty(n.KnownPeers()))
	})
	mux.HandleFunc("POST "+Prefix+"connect", func(w http.ResponseWriter, r *http.Request) {
		var req ConnectRequest
		if !readJSON(w, r, &req) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second) // wall clock: bounds a dial
		defer cancel()
		if err := n.Connect(ctx, req.Addr); err != nil {
			writeErr(w, http.StatusBadGateway, err)
			return
		}
		writeJSON(w, struct{}{})
	})
}

// pinSetRoutes adds pin/ls, pin/rm and pin/add: the pins the owner sets.
func pinSetRoutes(mux *http.ServeMux, n Node, o Options) {
	mux.HandleFunc("POST "+Prefix+"pin/ls", func(w http.ResponseWriter, r *http.Request) {
		pins, err := n.Pins(r.Context())
		if err != nil {
			writeErr(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, OrEmpty(pins))
	})
	mux.HandleFunc("POST "+Prefix+"pin/rm", func(w http.ResponseWriter, r *http.Request) {
		var req PinRequest
		c, ok := readCIDBody(w, r, &req)
		if !ok {
			return
		}
		if err := n.Unpin(r.Context(), c); err != nil {
			writeErr(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, struct{}{})
	})
	mux.HandleFunc("POST "+Prefix+"pin/add", func(w http.ResponseWriter, r *http.Request) {
		var req PinRequest
		c, ok := readCIDBody(w, r, &req)
		if !ok {
			return
		}
		streamEvent(w, o.now(), func(send func(Event)) (Event, error) {
			rep, err := n.PinFetch(r.Context(), c, req.Name, func(d, t int64) { send(Event{Phase: "fetch", Bytes: d, Total: t}) })
			return fetchDone(c, rep), err
		})
	})
}

// taskRoutes adds task/add and task/get: packing a bundle folder and fetching one into a folder.
func taskRoutes(mux *http.ServeMux, n Node, o Options) {
	mux.HandleFunc("POST "+Prefix+"task/add", func(w http.ResponseWriter, r *http.Request) {
		var req AddRequest
		if !readJSON(w, r, &req) {
			return
		}
		if !filepath.IsAbs(req.Dir) {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("dir %q must be an absolute path", req.Dir))
			return
		}
		stream(w, o.now(), func(send func(Event)) (string, error) {
			root, err := n.Add(r.Context(), req.Dir, req.Unchecked, func(d int64) { send(Event{Phase: "pack", Bytes: d}) })
			if err != nil {
				return "", err
			}
			return root.String(), nil
		})
	})
	mux.HandleFunc("POST "+Prefix+"task/get", func(w http.ResponseWriter, r *http.Request) {
		var req GetRequest
		c, ok := readCIDBody(w, r, &req)
		if !ok {
			return
		}
		if !filepath.IsAbs(req.Dir) {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("dir %q must be an absolute path", req.Dir))
			return
		}
		if req.TimeoutSeconds < 0 || req.TimeoutSeconds > 1e9 {
			writeErr(w, http.StatusBadRequest, fmt.Errorf("timeout_seconds %v: want a positive number of seconds (0: the node's default)", req.TimeoutSeconds))
			return
		}
		streamEvent(w, o.now(), func(send func(Event)) (Event, error) {
			rep, err := n.Get(r.Context(), c, req.Dir, time.Duration(req.TimeoutSeconds*float64(time.Second)),
				func(d, t int64) { send(Event{Phase: "fetch", Bytes: d, Total: t}) },
				func() { send(Event{Phase: "unpack"}) })
			return fetchDone(c, rep), err
		})
	})
}

// dagRoutes adds dag/export and dag/import: a DAG as a CARv1 out and in.
func dagRoutes(mux *http.ServeMux, n Node) {
	mux.HandleFunc("POST "+Prefix+"dag/export", func(w http.ResponseWriter, r *http.Request) {
		c, ok := parseCID(w, r.URL.Query().Get("cid"))
		if !ok {
			return
		}
		if has, err := n.Has(r.Context(), c); err != nil || !has {
			writeErr(w, http.StatusNotFound, n.ExportCAR(r.Context(), c, io.Discard))
			return
		}
		w.Header().Set("Content-Type", "application/vnd.ipld.car; version=1")
		// Headers are sent with the first bytes; a failure after that shows as a truncated
		// body, which the client detects by the missing trailer.
		w.Header().Set("Trailer", "X-Evalmesh-Error")
		if err := n.ExportCAR(r.Context(), c, w); err != nil {
			w.Header().Set("X-Evalmesh-Error", err.Error())
			return
		}
		w.Header().Set("X-Evalmesh-Error", "none")
	})
	mux.HandleFunc("POST "+Prefix+"dag/import", func(w http.ResponseWriter, r *http.Request) {
		roots, err := n.ImportCAR(r.Context(), r.Body)
		if err != nil {
			writeErr(w, bodyErrStatus(err), err)
			return
		}
		var out ImportResponse
		for _, c := range roots {
			out.Roots = append(out.Roots, c.String())
		}
		writeJSON(w, out)
	})
}

// repoRoutes adds repo/gc.
func repoRoutes(mux *http.ServeMux, n Node, o Options) {
	mux.HandleFunc("POST "+Prefix+"repo/gc", func(w http.ResponseWriter, r *http.Request) {
		var req GCRequest
		if !readJSON(w, r, &req) {
			return
		}
		var rep GCReport
		streamEvent(w, o.now(), func(send func(Event)) (Event, error) {
			var err error
			rep, err = n.GC(r.Context(), req.DryRun, func(phase string, d, t int64) {
				send(Event{Phase: phase, Bytes: d, Total: t})
			})
			return Event{GC: &rep}, err
		})
	})
}

// maxJSONBody bounds a JSON request body; CAR bodies are bounded by carBodyLimit.
const maxJSONBody = 1 << 20

// rawBodyRoutes are the endpoints whose body is not JSON: their media type and size bound.
// Every other endpoint (those added later on the same mux included) takes JSON of at most
// maxJSONBody bytes.
var rawBodyRoutes = map[string]struct {
	mediaType string
	limit     func(cfg home.Config) int64
}{
	"dag/import": {"application/vnd.ipld.car", carBodyLimit},
}

// carBodyLimit is the largest CAR dag/import reads: a bundle of max_bundle_size bytes plus
// its CAR framing (a CID and a length per block: well under 1/64 of 256 KiB blocks).
func carBodyLimit(cfg home.Config) int64 {
	max := cfg.MaxBundleSize
	if max <= 0 {
		max = tasks.DefaultMaxSize
	}
	return max + max/64 + 1<<20
}

// guard wraps the whole mux: it refuses, before any handler runs, every request the owner's
// CLI would not send. Another local account can reach a loopback port but cannot read
// HOME/api.token; a web page (any site, or one reached through DNS rebinding) can make the
// browser send requests but not read the token, set Authorization without a preflight, or
// hide its Origin. It also counts requests in flight, so Run closes the stores only after
// the last returns.
func guard(h http.Handler, o Options) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.InFlight != nil {
			o.InFlight.Add(1)
			defer o.InFlight.Done()
		}
		if r.Header.Get("Origin") != "" {
			writeErr(w, http.StatusForbidden, errors.New("requests from web pages are refused: the API is for the evalmesh CLI on this machine"))
			return
		}
		if !allowedHost(r) {
			//lint:ignore ST1005 the message starts with the header's name, Host, as the client sent it
			writeErr(w, http.StatusForbidden, fmt.Errorf("Host %q is not this API's own address: only requests to the loopback address in HOME/api (or localhost with its port) are served", r.Host))
			return
		}
		if !authorized(r, o.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evalmesh"`)
			writeErr(w, http.StatusUnauthorized, fmt.Errorf("missing or wrong API token: send `Authorization: Bearer TOKEN` with the token in %s (readable only by the account that runs the daemon; the evalmesh CLI sends it)", o.TokenPath))
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeErr(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: every API endpoint is POST", r.Method, r.URL.Path))
			return
		}
		mediaType, limit := "application/json", int64(maxJSONBody)
		if raw, ok := rawBodyRoutes[strings.TrimPrefix(r.URL.Path, Prefix)]; ok {
			mediaType, limit = raw.mediaType, raw.limit(o.Config)
		}
		if r.ContentLength > limit {
			writeErr(w, http.StatusRequestEntityTooLarge, fmt.Errorf("request body of %d bytes is over this endpoint's limit of %d bytes", r.ContentLength, limit))
			return
		}
		if r.ContentLength != 0 {
			got, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || got != mediaType {
				writeErr(w, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Type %q refused: this endpoint takes %s", r.Header.Get("Content-Type"), mediaType))
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if err := o.failed(); err != nil && r.URL.Path != Prefix+"id" {
			writeErr(w, http.StatusServiceUnavailable, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// allowedHost accepts a Host header naming the address the request came in on, or
// localhost with its port when that address is loopback. A DNS-rebinding page reaches the
// port under its own name (evil.example:PORT) and is refused here.
func allowedHost(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	lhost, lport, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || port != lport {
		return false
	}
	if host == lhost {
		return true
	}
	ip := net.ParseIP(lhost)
	return ip != nil && ip.IsLoopback() && (strings.EqualFold(host, "localhost") || host == "127.0.0.1" || host == "::1")
}

// authorized checks the bearer token in constant time. An API whose token was never set
// (a node's Handler used without Run) refuses everything.
func authorized(r *http.Request, want string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// NewToken returns a new API token: 32 random bytes, hex-encoded.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// OrEmpty is s, or an empty slice for nil: a JSON answer lists [] rather than null.
func OrEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func parseCID(w http.ResponseWriter, s string) (cid.Cid, bool) {
	c, err := cid.Decode(s)
	if err != nil {
		writeErr(w, http.StatusBadRequest, fmt.Errorf("%q is not a CID: %w", s, err))
		return cid.Undef, false
	}
	return c, true
}

// cidBody is a request body that names a CID in its "cid" field.
type cidBody interface{ cidField() string }

func (r *PinRequest) cidField() string       { return r.CID }
func (r *GetRequest) cidField() string       { return r.CID }
func (r *PinStatusRequest) cidField() string { return r.CID }

// readCIDBody decodes req from the body and parses its CID; when either is bad it has
// answered as readJSON or parseCID does and returns false.
func readCIDBody(w http.ResponseWriter, r *http.Request, req cidBody) (cid.Cid, bool) {
	if !readJSON(w, r, req) {
		return cid.Undef, false
	}
	return parseCID(w, req.cidField())
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body) // bounded by guard
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, bodyErrStatus(err), fmt.Errorf("request body: %w", err))
		return false
	}
	return true
}

// bodyErrStatus is 413 for a body cut at guard's bound, else 400.
func bodyErrStatus(err error) int {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(ErrorBody{Error: err.Error()})
}

// stream answers with NDJSON events: progress sent by op (at most ~10 a second by now), then
// a final event with Done and the CID, or with Error.
func stream(w http.ResponseWriter, now func() time.Time, op func(send func(Event)) (string, error)) {
	streamEvent(w, now, func(send func(Event)) (Event, error) {
		id, err := op(send)
		return Event{CID: id}, err
	})
}

// progressEvery spaces a stream's progress events of one phase (the last of a phase, and the
// final event, always go).
const progressEvery = 100 * time.Millisecond

// streamEvent is stream with a final event of op's making (Done is set here).
func streamEvent(w http.ResponseWriter, now func() time.Time, op func(send func(Event)) (Event, error)) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	var mu sync.Mutex
	var lastSent time.Time
	var lastPhase string
	emit := func(e Event, force bool) {
		mu.Lock()
		defer mu.Unlock()
		t := now()
		if !force && e.Phase == lastPhase && t.Sub(lastSent) < progressEvery && e.Bytes != e.Total {
			return
		}
		lastSent, lastPhase = t, e.Phase
		enc.Encode(e)
		if flusher != nil {
			flusher.Flush()
		}
	}
	final, err := op(func(e Event) { emit(e, false) })
	if err != nil {
		emit(Event{Error: err.Error()}, true)
		return
	}
	final.Done = true
	emit(final, true)
}

// Package modelproxy is the recording proxy the runner puts between an agent and the model
// served beside it (docs/agents.md "Transcripts"). It owns the recording, not its document:
// it forwards every request to the model unchanged, streams every response back (server-sent
// events flushed as they come), and writes each call to its folder: the bodies, up to a
// bound, as files, and one JSON line per finished call (Record) to calls.jsonl. The runner
// reads the folder after the agent ended and builds the signed transcript
// (runner.Transcript, attest.Transcript).
//
// It runs as a static binary (cmd/evalmesh-model-proxy, CGO_ENABLED=0) in a container of
// its own that shares the model's network namespace, so it imports only the standard
// library. Concurrency: a Proxy serves calls concurrently; sequence numbers are taken when a
// request arrives, the byte budget atomically, and lines are appended under one mutex.
package modelproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Files in the proxy's folder.
const (
	CallsFile      = "calls.jsonl"
	UnrecordedFile = "unrecorded" // the count of calls past MaxCalls, rewritten at each
	BodiesDir      = "bodies"     // <seq>.req and <seq>.resp
)

// ReadyPath is answered by the proxy itself (never forwarded, never recorded): the runner's
// readiness probe.
const ReadyPath = "/.evalmesh-proxy/ready"

// Limits bound a recording; see attest.TranscriptLimits for what happens past each.
type Limits struct {
	MaxCalls      int
	MaxBodyBytes  int64
	MaxTotalBytes int64
}

// DefaultLimits: 10,000 calls, 16 MiB a body, 1 GiB of bodies in all.
var DefaultLimits = Limits{MaxCalls: 10000, MaxBodyBytes: 16 << 20, MaxTotalBytes: 1 << 30}

// Record is one line of calls.jsonl: a finished call.
type Record struct {
	Seq        int       `json:"seq"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	Status     int       `json:"status"`
	Start      time.Time `json:"start"`
	DurationMS float64   `json:"duration_ms"`
	Stream     bool      `json:"stream,omitempty"`
	Request    Body      `json:"request"`
	Response   Body      `json:"response"`
	Usage      *Usage    `json:"usage,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// Body is what was seen of one body: its whole length and the stored part's file.
type Body struct {
	File        string `json:"file,omitempty"` // under BodiesDir; "" when nothing was stored
	Bytes       int64  `json:"bytes"`
	StoredBytes int64  `json:"stored_bytes"`
	Truncated   bool   `json:"truncated,omitempty"`
	ContentType string `json:"content_type,omitempty"`
}

// Usage is an OpenAI-style usage object.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// Proxy records calls into Dir while forwarding them to Upstream.
type Proxy struct {
	dir    string
	limits Limits
	rp     *httputil.ReverseProxy

	seq        atomic.Int64
	stored     atomic.Int64 // bytes of bodies stored so far (reserved before writing)
	unrecorded atomic.Int64
	mu         sync.Mutex // guards calls and the unrecorded file
	calls      *os.File
}

// New opens dir (created if needed) for a recording of the calls forwarded to upstream
// (e.g. http://127.0.0.1:8000).
func New(upstream *url.URL, dir string, lim Limits) (*Proxy, error) {
	if err := os.MkdirAll(filepath.Join(dir, BodiesDir), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, CallsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &Proxy{dir: dir, limits: lim, calls: f}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = r.In.Host
		},
		// Flush at once: a streamed completion reaches the agent token by token.
		FlushInterval: -1,
		Transport:     http.DefaultTransport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if c, ok := r.Context().Value(callKey{}).(*call); ok {
				c.err = err.Error()
			}
			http.Error(w, "evalmesh model proxy: the model did not answer: "+err.Error(), http.StatusBadGateway)
		},
		ModifyResponse: func(resp *http.Response) error {
			c, ok := resp.Request.Context().Value(callKey{}).(*call)
			if !ok {
				return nil
			}
			c.status = resp.StatusCode
			ct := resp.Header.Get("Content-Type")
			c.resp.ct = ct
			mt, _, _ := mime.ParseMediaType(ct)
			c.stream = mt == "text/event-stream"
			c.resp.sse = c.stream
			resp.Body = &teeBody{rc: resp.Body, w: c.resp}
			return nil
		},
	}
	return p, nil
}

// Close closes the calls file.
func (p *Proxy) Close() error { return p.calls.Close() }

type callKey struct{}

type call struct {
	status int
	stream bool
	err    string
	req    *capture
	resp   *capture
}

// ServeHTTP forwards one call and records it when its response has been written.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == ReadyPath {
		io.WriteString(w, "ok\n")
		return
	}
	start := time.Now()
	seq := int(p.seq.Add(1))
	if seq > p.limits.MaxCalls {
		n := p.unrecorded.Add(1)
		p.mu.Lock()
		_ = os.WriteFile(filepath.Join(p.dir, UnrecordedFile), []byte(strconv.FormatInt(n, 10)+"\n"), 0o644)
		p.mu.Unlock()
		p.rp.ServeHTTP(w, r)
		return
	}
	c := &call{req: p.newCapture(), resp: p.newCapture()}
	c.req.ct = r.Header.Get("Content-Type")
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &teeBody{rc: r.Body, w: c.req}
	}
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
	rec := Record{Seq: seq, Method: r.Method, Path: r.URL.Path, Status: c.status, Start: start.UTC(),
		DurationMS: float64(time.Since(start).Microseconds()) / 1000, Stream: c.stream, Error: c.err}
	var err error
	if rec.Request, err = p.saveBody(c.req, fmt.Sprintf("%d.req", seq)); err == nil {
		rec.Response, err = p.saveBody(c.resp, fmt.Sprintf("%d.resp", seq))
	}
	if err != nil && rec.Error == "" {
		rec.Error = "recording: " + err.Error()
	}
	rec.Usage = c.resp.usage()
	line, _ := json.Marshal(rec)
	p.mu.Lock()
	_, _ = p.calls.Write(append(line, '\n'))
	p.mu.Unlock()
}

// capture keeps the first MaxBodyBytes of a body (within the proxy's total budget) and
// counts the rest; for an event stream it also scans each "data:" line for a usage object.
type capture struct {
	p        *Proxy
	buf      bytes.Buffer
	total    int64
	budgeted int64 // bytes reserved from the proxy's total
	full     bool  // the per-body or total bound was reached
	ct       string
	sse      bool
	line     []byte
	sseUsage *Usage
}

func (p *Proxy) newCapture() *capture { return &capture{p: p} }

// maxLine bounds an event-stream line kept for the usage scan.
const maxLine = 1 << 20

func (c *capture) Write(b []byte) (int, error) {
	c.total += int64(len(b))
	if !c.full {
		room := c.p.limits.MaxBodyBytes - int64(c.buf.Len())
		keep := min(int64(len(b)), max(room, 0))
		if keep > 0 {
			// Reserve from the total budget; what does not fit is not stored.
			if c.p.stored.Add(keep) > c.p.limits.MaxTotalBytes {
				c.p.stored.Add(-keep)
				keep = 0
			}
		}
		c.budgeted += keep
		c.buf.Write(b[:keep])
		if keep < int64(len(b)) {
			c.full = true
		}
	}
	if c.sse {
		c.scan(b)
	}
	return len(b), nil
}

func (c *capture) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(c.line)+len(b) <= maxLine {
				c.line = append(c.line, b...)
			}
			return
		}
		if len(c.line)+i <= maxLine {
			c.line = append(c.line, b[:i]...)
			c.sseLine(c.line)
		}
		c.line = c.line[:0]
		b = b[i+1:]
	}
}

func (c *capture) sseLine(l []byte) {
	l = bytes.TrimRight(l, "\r")
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok || !bytes.Contains(data, []byte(`"usage"`)) {
		return
	}
	if u := usageOf(bytes.TrimSpace(data)); u != nil {
		c.sseUsage = u
	}
}

// usage is the call's token counts: the last usage object of an event stream, or the usage
// of a whole (not truncated) JSON response.
func (c *capture) usage() *Usage {
	if c.sse {
		return c.sseUsage
	}
	if c.full || c.total != int64(c.buf.Len()) {
		return nil
	}
	return usageOf(c.buf.Bytes())
}

func usageOf(b []byte) *Usage {
	var v struct {
		Usage *Usage `json:"usage"`
	}
	if json.Unmarshal(b, &v) != nil || v.Usage == nil {
		return nil
	}
	if v.Usage.PromptTokens < 0 || v.Usage.CompletionTokens < 0 || v.Usage.TotalTokens < 0 {
		return nil
	}
	return v.Usage
}

func (p *Proxy) saveBody(c *capture, name string) (Body, error) {
	b := Body{Bytes: c.total, StoredBytes: int64(c.buf.Len()), ContentType: c.ct}
	b.Truncated = b.StoredBytes < b.Bytes
	if b.StoredBytes == 0 {
		return b, nil
	}
	if err := os.WriteFile(filepath.Join(p.dir, BodiesDir, name), c.buf.Bytes(), 0o644); err != nil {
		return Body{Bytes: c.total, Truncated: true, ContentType: c.ct}, err
	}
	b.File = name
	return b, nil
}

// teeBody copies what is read through it into a capture.
type teeBody struct {
	rc io.ReadCloser
	w  *capture
}

func (t *teeBody) Read(b []byte) (int, error) {
	n, err := t.rc.Read(b)
	if n > 0 {
		_, _ = t.w.Write(b[:n])
	}
	return n, err
}

func (t *teeBody) Close() error { return t.rc.Close() }

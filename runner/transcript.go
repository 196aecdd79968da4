package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner/modelproxy"
)

// Transcripts (docs/agents.md "Transcripts"). When an agent's spec names a model, the runner,
// not the agent, records what the two say. Once the model is ready it starts, from one static
// binary this node holds (runner/modelproxy), two small containers of the model's image:
//
//   - the recorder, in the model's network namespace, forwarding to the model's port and
//     listening only on a unix socket in RUN/transcript, where it writes the calls;
//   - the bridge, in a network namespace of its own (loopback only), listening on the
//     model's port and piping every connection to the recorder's socket.
//
// The agent joins the bridge's namespace, not the model's: the model's address is the same
// to it (OPENAI_BASE_URL is unchanged), but nothing in its namespace leads to the model
// except through the recorder, so it cannot leave calls out. After the agent ended the runner
// stops bridge and recorder, builds the transcript document from RUN/transcript, stores every
// body and the document by CID in HOME/objects, and signs the document into the run as a
// subject (attest.RoleTranscript) whose annotations carry the call and token totals.

// ProxyBinaryName is the proxy's file name beside the evalmesh binary.
const ProxyBinaryName = "evalmesh-model-proxy"

// Paths inside the recorder's and the bridge's containers.
const (
	proxyMount   = "/.evalmesh/model-proxy" // the binary
	podMount     = "/.evalmesh/pod"         // the bridge's view of RUN/transcript
	recorderSock = "model.sock"             // the recorder's socket in RUN/transcript
)

// transcriptDir is the recorder's folder in a run's directory.
func transcriptDir(runDir string) string { return filepath.Join(runDir, "transcript") }

// proxyBinary is the host path of the proxy binary, or "" when this node has none (its runs
// then carry no transcript, and the agent shares the model's namespace).
func (r *Runner) proxyBinary() string {
	if r.ModelProxy != "" {
		return r.ModelProxy
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	p := filepath.Join(filepath.Dir(self), ProxyBinaryName)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return p
	}
	return ""
}

func (r *Runner) proxyLimits() modelproxy.Limits {
	l := r.ProxyLimits
	d := modelproxy.DefaultLimits
	if l.MaxCalls <= 0 {
		l.MaxCalls = d.MaxCalls
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = d.MaxTotalBytes
	}
	return l
}

// startProxy starts the recorder and the bridge beside the ready model and puts the agent
// in the bridge's namespace. Without a proxy binary it leaves the agent to join the model's
// namespace (returns false).
func (r *Runner) startProxy(ctx context.Context, ex PodExecutor, st *RunState, model TaskConfig, agent *TaskConfig) (bool, error) {
	bin := r.proxyBinary()
	if bin == "" {
		return false, nil
	}
	m := st.Agent.Model
	lim := r.proxyLimits()
	runDir := RunDir(r.Home, st.ID)
	dir := transcriptDir(runDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	sock := AgentOutputDir + "/" + recorderSock
	rec := TaskConfig{
		ID:    st.ID + "-proxy",
		Image: m.Image, // on this node already; the binary needs nothing of it but a root
		Command: []string{proxyMount, "serve", "--listen", "unix:" + sock, "--upstream", fmt.Sprintf("http://127.0.0.1:%d", m.Port),
			"--dir", AgentOutputDir, "--max-calls", strconv.Itoa(lim.MaxCalls),
			"--max-body-bytes", strconv.FormatInt(lim.MaxBodyBytes, 10), "--max-total-bytes", strconv.FormatInt(lim.MaxTotalBytes, 10)},
		Env: map[string]string{"HOME": "/tmp"},
		// Bound by the recorder's own limits (bodies) plus its call lines, not by a size-limited
		// mount: the bridge must reach the socket at this very folder. Memory: each call in
		// flight holds up to two bodies' bounds; past 1 GiB the recorder is killed, the agent's
		// calls fail and the transcript ends there (proxy.log says why).
		OutputDir:     dir,
		ExtraMounts:   []Mount{{Source: bin, Target: proxyMount}},
		Limits:        Limits{MemoryBytes: 1 << 30},
		JoinNetworkOf: model.ID,
		LogPath:       filepath.Join(runDir, "logs", "proxy.log"),
	}
	ready := func(argv ...string) Readiness {
		return Readiness{Probe: append([]string{proxyMount, "probe"}, argv...), Timeout: 30 * time.Second, Interval: 100 * time.Millisecond}
	}
	_, err := StartModel(ctx, ex, rec, ready("--unix", sock, "http://recorder"+modelproxy.ReadyPath), func(h *Handle) error {
		st.ProxyHandle = h
		return saveState(r.Home, st, r.now())
	})
	if err != nil {
		st.ProxyEnded = true
		return false, fmt.Errorf("transcript recorder: %w", err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", m.Port)
	br := TaskConfig{
		ID:          st.ID + "-bridge",
		Image:       m.Image,
		Command:     []string{proxyMount, "bridge", "--listen", listen, "--to", podMount + "/" + recorderSock},
		Env:         map[string]string{"HOME": "/tmp"},
		ExtraMounts: []Mount{{Source: bin, Target: proxyMount}, {Source: dir, Target: podMount}},
		Limits:      Limits{MemoryBytes: 256 << 20},
		LogPath:     filepath.Join(runDir, "logs", "bridge.log"),
	}
	// Ready when a request through the bridge reaches the recorder.
	_, err = StartModel(ctx, ex, br, ready("http://"+listen+modelproxy.ReadyPath), func(h *Handle) error {
		st.BridgeHandle = h
		return saveState(r.Home, st, r.now())
	})
	if err != nil {
		st.BridgeEnded = true
		return false, fmt.Errorf("transcript bridge: %w", err)
	}
	agent.JoinNetworkOf, agent.Network = br.ID, false
	return true, nil
}

// endProxy stops the bridge, then the recorder (SIGTERM: the calls in flight write their
// lines), copying their logs, and removes both. Idempotent.
func (r *Runner) endProxy(ctx context.Context, ex Executor, st *RunState) {
	r.endSidecar(ctx, ex, st, st.BridgeHandle, &st.BridgeEnded)
	r.endSidecar(ctx, ex, st, st.ProxyHandle, &st.ProxyEnded)
}

func (r *Runner) endSidecar(ctx context.Context, ex Executor, st *RunState, h *Handle, ended *bool) {
	if h == nil || *ended {
		return
	}
	_ = ex.Stop(ctx, h, 10*time.Second)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	_, _ = ex.Wait(wctx, h)
	cancel()
	if err := ex.Destroy(context.WithoutCancel(ctx), h); err != nil {
		return
	}
	*ended = true
	_ = saveState(r.Home, st, r.now())
}

// maxCallLine bounds one line of calls.jsonl the runner reads.
const maxCallLine = 1 << 20

// ReadRecording reads a proxy's folder: its calls in sequence order and the count of calls
// past its bound. Lines that do not decode are skipped and counted (a proxy killed mid-line).
func ReadRecording(dir string) (calls []modelproxy.Record, unrecorded, bad int, err error) {
	f, err := os.Open(filepath.Join(dir, modelproxy.CallsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, 0, nil
	}
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxCallLine)
	seen := map[int]bool{}
	for sc.Scan() {
		var rec modelproxy.Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Seq < 1 || seen[rec.Seq] {
			bad++
			continue
		}
		seen[rec.Seq] = true
		calls = append(calls, rec)
	}
	if err := sc.Err(); err != nil {
		bad++ // a line over the bound ends the read
	}
	slices.SortFunc(calls, func(a, b modelproxy.Record) int { return a.Seq - b.Seq })
	if b, err := os.ReadFile(filepath.Join(dir, modelproxy.UnrecordedFile)); err == nil {
		unrecorded, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		unrecorded = max(unrecorded, 0)
	}
	return calls, unrecorded, bad, nil
}

// buildTranscript stores the recording's bodies in HOME/objects and returns the transcript
// document. Calls are renumbered 1..n in arrival order (a call whose line was lost leaves no
// gap); lost lines count as unrecorded calls.
func (r *Runner) buildTranscript(st *RunState) (*attest.Transcript, error) {
	dir := transcriptDir(RunDir(r.Home, st.ID))
	recs, unrecorded, bad, err := ReadRecording(dir)
	if err != nil {
		return nil, err
	}
	lim := r.proxyLimits()
	m := st.Agent.Model
	t := &attest.Transcript{Version: attest.TranscriptVersionV1, Model: m.Name, Upstream: fmt.Sprintf("http://127.0.0.1:%d", m.Port),
		Limits: attest.TranscriptLimits{MaxCalls: lim.MaxCalls, MaxBodyBytes: lim.MaxBodyBytes, MaxTotalBytes: lim.MaxTotalBytes},
		Calls:  []attest.TranscriptCall{}}
	body := func(b modelproxy.Body) (attest.TranscriptBody, error) {
		out := attest.TranscriptBody{Bytes: max(b.Bytes, 0), ContentType: b.ContentType}
		if b.File == "" || strings.ContainsAny(b.File, "/\\") || b.File == ".." {
			out.Truncated = out.Bytes > 0
			return out, nil
		}
		data, err := readCapped(filepath.Join(dir, modelproxy.BodiesDir, b.File), lim.MaxBodyBytes)
		if err != nil {
			out.Truncated = out.Bytes > 0
			return out, nil
		}
		data = data[:min(int64(len(data)), out.Bytes)]
		c, err := storeObject(r.Home, data)
		if err != nil {
			return out, err
		}
		out.CID, out.StoredBytes = c, int64(len(data))
		out.Truncated = out.StoredBytes < out.Bytes
		if len(data) == 0 {
			out.CID = ""
		}
		return out, nil
	}
	for _, rec := range recs {
		c := attest.TranscriptCall{Seq: len(t.Calls) + 1, Method: rec.Method, Path: rec.Path, Status: min(max(rec.Status, 0), 999),
			Start: rec.Start, DurationMS: max(rec.DurationMS, 0), Stream: rec.Stream, Error: rec.Error}
		if c.Request, err = body(rec.Request); err != nil {
			return nil, err
		}
		if c.Response, err = body(rec.Response); err != nil {
			return nil, err
		}
		if u := rec.Usage; u != nil && u.PromptTokens >= 0 && u.CompletionTokens >= 0 && u.TotalTokens >= 0 {
			c.Usage = &attest.TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		}
		t.Calls = append(t.Calls, c)
	}
	t.Totals = transcriptTotals(t.Calls, unrecorded+bad)
	return t, nil
}

func transcriptTotals(calls []attest.TranscriptCall, unrecorded int) attest.TranscriptTotals {
	tt := attest.TranscriptTotals{Calls: len(calls) + unrecorded, UnrecordedCalls: unrecorded}
	for _, c := range calls {
		tt.RequestBytes += c.Request.Bytes
		tt.ResponseBytes += c.Response.Bytes
		if u := c.Usage; u != nil {
			tt.PromptTokens += u.PromptTokens
			tt.CompletionTokens += u.CompletionTokens
			tt.TotalTokens += u.TotalTokens
		} else {
			tt.CallsWithoutUsage++
		}
	}
	return tt
}

// transcriptSubject builds and stores the run's transcript and returns its subject; ok is
// false for a run whose proxy never ran.
func (r *Runner) transcriptSubject(st *RunState) (attest.Subject, bool, error) {
	if st.Agent.Model == nil || st.ProxyHandle == nil {
		return attest.Subject{}, false, nil
	}
	t, err := r.buildTranscript(st)
	if err != nil {
		return attest.Subject{}, false, fmt.Errorf("transcript: %w", err)
	}
	if r.TestForgeTranscript != nil && !st.Audit {
		t.Calls = r.TestForgeTranscript(t.Calls)
		t.Totals = transcriptTotals(t.Calls, t.Totals.UnrecordedCalls)
	}
	doc, err := t.Encode()
	if err != nil {
		return attest.Subject{}, false, fmt.Errorf("transcript: %w", err)
	}
	c, err := storeObject(r.Home, doc)
	if err != nil {
		return attest.Subject{}, false, err
	}
	s := subject(TranscriptFile, doc, c, attest.RoleTranscript)
	s.Annotations = attest.TranscriptSubjectAnnotations(c, t)
	return s, true, nil
}

// TranscriptFile is the transcript subject's name.
const TranscriptFile = "transcript.json"

// TranscriptRef says where a run's transcript is.
type TranscriptRef struct {
	CID string `json:"cid"`
	// Path is the document in HOME/objects (its bodies lie beside it, by the CIDs it lists).
	Path string `json:"path"`
	attest.TranscriptShape
}

// TranscriptOf is the transcript a finished run attested, or nil when it has none.
func TranscriptOf(h home.Home, o *Outcome) *TranscriptRef {
	env, err := attest.DecodeEnvelope(o.Envelope)
	if err != nil {
		return nil
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		return nil
	}
	shape, c, ok := attest.TranscriptShapeOf(st)
	if !ok {
		return nil
	}
	return &TranscriptRef{CID: c, Path: filepath.Join(ObjectsDir(h), c), TranscriptShape: shape}
}

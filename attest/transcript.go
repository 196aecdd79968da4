package attest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ipfs/go-cid"
)

// A transcript is the node's record of the traffic between an agent and the model served
// beside it (docs/attestation-format.md "Transcripts"): the runner's recording proxy sits
// between the two, so the agent cannot leave calls out or write its own. The document lists
// every call (method, path, status, timing, token counts where the response carried them)
// with its request and response bodies by CID, and the totals. The run attestation names it
// as a subject with RoleTranscript, whose annotations repeat the totals, so an audit can
// compare a re-execution's shape with the original's (CompareTranscriptShape) without
// fetching a body.

// TranscriptVersionV1 is the version field of a transcript document; a change to its fields
// is a new version, never a silent reinterpretation of signed bytes.
const TranscriptVersionV1 = "evalmesh.dev/transcript/v1"

// RoleTranscript marks a run's transcript subject; its annotations carry the totals under
// the Annotation* keys below (JSON numbers).
const RoleTranscript = "transcript"

// Subject annotation keys of a transcript subject.
const (
	AnnotationCalls            = "calls"
	AnnotationPromptTokens     = "prompt_tokens"
	AnnotationCompletionTokens = "completion_tokens"
	AnnotationTotalTokens      = "total_tokens"
)

// MaxTranscriptBytes bounds a transcript document ParseTranscript reads (its bodies are apart).
const MaxTranscriptBytes = 16 << 20

// Transcript is a transcript document, version TranscriptVersionV1.
type Transcript struct {
	Version string `json:"version"`
	// Model is the model name the agent was given; Upstream the address the proxy forwarded to.
	Model    string `json:"model"`
	Upstream string `json:"upstream"`
	// Limits are the recording's bounds; Totals sum the calls (recorded or not).
	Limits TranscriptLimits `json:"limits"`
	Totals TranscriptTotals `json:"totals"`
	Calls  []TranscriptCall `json:"calls"`
}

// TranscriptLimits are the bounds a recording ran under. Past MaxCalls a call is still
// forwarded but not listed (counted in Totals.UnrecordedCalls); a body over MaxBodyBytes is
// forwarded whole and stored up to the bound (its Body.Truncated set); once MaxTotalBytes of
// bodies are stored, later bodies are not stored at all (Body.CID empty, Truncated set).
type TranscriptLimits struct {
	MaxCalls      int   `json:"max_calls"`
	MaxBodyBytes  int64 `json:"max_body_bytes"`
	MaxTotalBytes int64 `json:"max_total_bytes"`
}

// TranscriptTotals are the sums over all calls. Tokens are those of the calls whose
// responses reported usage (OpenAI-style "usage"); CallsWithoutUsage counts the others.
type TranscriptTotals struct {
	Calls             int   `json:"calls"`
	UnrecordedCalls   int   `json:"unrecorded_calls"`
	CallsWithoutUsage int   `json:"calls_without_usage"`
	PromptTokens      int64 `json:"prompt_tokens"`
	CompletionTokens  int64 `json:"completion_tokens"`
	TotalTokens       int64 `json:"total_tokens"`
	RequestBytes      int64 `json:"request_bytes"`
	ResponseBytes     int64 `json:"response_bytes"`
}

// TranscriptCall is one request and its response.
type TranscriptCall struct {
	Seq    int       `json:"seq"` // from 1, in the order the proxy received the requests
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Status int       `json:"status"` // 0: no response (the model refused the connection, …; Error says)
	Start  time.Time `json:"start"`
	// DurationMS is from the request's arrival to the response's last byte.
	DurationMS float64 `json:"duration_ms"`
	// Stream says the response was a server-sent event stream (stream: true).
	Stream   bool           `json:"stream,omitempty"`
	Request  TranscriptBody `json:"request"`
	Response TranscriptBody `json:"response"`
	// Usage is the response's token counts; nil when it reported none.
	Usage *TokenUsage `json:"usage,omitempty"`
	Error string      `json:"error,omitempty"`
}

// TranscriptBody is one body: its full length, and where the stored part is.
type TranscriptBody struct {
	// CID is the raw block of the stored bytes ("" when nothing was stored: empty or past
	// the total bound).
	CID         string `json:"cid,omitempty"`
	Bytes       int64  `json:"bytes"`        // the body's whole length as forwarded
	StoredBytes int64  `json:"stored_bytes"` // what CID holds: Bytes unless Truncated
	Truncated   bool   `json:"truncated,omitempty"`
	ContentType string `json:"content_type,omitempty"`
}

// TokenUsage is an OpenAI-style usage object.
type TokenUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// ParseTranscript decodes and checks a transcript document: strict JSON (no unknown field,
// no duplicate key), the version known, every CID a CID, the counts non-negative and the
// totals the sums of the calls. It is the decoder of a document fetched from another lab.
func ParseTranscript(b []byte) (*Transcript, error) {
	if len(b) > MaxTranscriptBytes {
		return nil, fmt.Errorf("transcript is %d bytes, over the %d a reader accepts", len(b), MaxTranscriptBytes)
	}
	var t Transcript
	if err := strictUnmarshal(b, &t, true); err != nil {
		return nil, fmt.Errorf("transcript is not valid JSON of the transcript shape: %w", err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Validate checks what ParseTranscript checks beyond the JSON shape.
func (t *Transcript) Validate() error {
	if t.Version != TranscriptVersionV1 {
		return fmt.Errorf("transcript version %q is not %q (a newer evalmesh wrote it?)", t.Version, TranscriptVersionV1)
	}
	if t.Limits.MaxCalls < 0 || t.Limits.MaxBodyBytes < 0 || t.Limits.MaxTotalBytes < 0 {
		return errors.New("transcript limits must not be negative")
	}
	var sum TranscriptTotals
	for i, c := range t.Calls {
		if c.Seq != i+1 {
			return fmt.Errorf("transcript call %d has seq %d: calls are numbered from 1 in order", i+1, c.Seq)
		}
		if c.Status < 0 || c.Status > 999 || !(c.DurationMS >= 0) || math.IsInf(c.DurationMS, 0) {
			return fmt.Errorf("transcript call %d: status %d or duration %v out of range", c.Seq, c.Status, c.DurationMS)
		}
		for _, b := range []struct {
			name string
			b    TranscriptBody
		}{{"request", c.Request}, {"response", c.Response}} {
			if err := b.b.validate(); err != nil {
				return fmt.Errorf("transcript call %d %s: %w", c.Seq, b.name, err)
			}
		}
		sum.RequestBytes += c.Request.Bytes
		sum.ResponseBytes += c.Response.Bytes
		if u := c.Usage; u != nil {
			if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 {
				return fmt.Errorf("transcript call %d: negative token counts", c.Seq)
			}
			sum.PromptTokens += u.PromptTokens
			sum.CompletionTokens += u.CompletionTokens
			sum.TotalTokens += u.TotalTokens
		} else {
			sum.CallsWithoutUsage++
		}
	}
	tt := t.Totals
	if tt.UnrecordedCalls < 0 || tt.Calls != len(t.Calls)+tt.UnrecordedCalls {
		return fmt.Errorf("transcript totals: %d calls, but %d listed and %d unrecorded", tt.Calls, len(t.Calls), tt.UnrecordedCalls)
	}
	sum.Calls, sum.UnrecordedCalls = tt.Calls, tt.UnrecordedCalls
	if sum != tt {
		return fmt.Errorf("transcript totals %+v are not the sums of its calls %+v", tt, sum)
	}
	return nil
}

func (b TranscriptBody) validate() error {
	switch {
	case b.Bytes < 0 || b.StoredBytes < 0 || b.StoredBytes > b.Bytes:
		return fmt.Errorf("sizes %d stored of %d out of range", b.StoredBytes, b.Bytes)
	case b.StoredBytes < b.Bytes && !b.Truncated:
		return fmt.Errorf("%d of %d bytes stored but not marked truncated", b.StoredBytes, b.Bytes)
	case b.CID == "" && b.StoredBytes > 0:
		return errors.New("stored bytes without a CID")
	}
	if b.CID != "" {
		if _, err := cid.Decode(b.CID); err != nil {
			return fmt.Errorf("cid %q: %w", b.CID, err)
		}
	}
	return nil
}

// Encode is the document's canonical bytes (what its CID is computed over).
func (t *Transcript) Encode() ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(t)
}

// TranscriptSubjectAnnotations are the annotations of a run's transcript subject.
func TranscriptSubjectAnnotations(c string, t *Transcript) map[string]any {
	return map[string]any{AnnotationCID: c, AnnotationRole: RoleTranscript,
		AnnotationCalls: t.Totals.Calls, AnnotationPromptTokens: t.Totals.PromptTokens,
		AnnotationCompletionTokens: t.Totals.CompletionTokens, AnnotationTotalTokens: t.Totals.TotalTokens}
}

// TranscriptShape is what an audit compares of two runs' transcripts without their bodies.
type TranscriptShape struct {
	Calls            int   `json:"calls"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// ShapeOf is a transcript's shape.
func ShapeOf(t *Transcript) TranscriptShape {
	return TranscriptShape{Calls: t.Totals.Calls, PromptTokens: t.Totals.PromptTokens, CompletionTokens: t.Totals.CompletionTokens}
}

// TranscriptShapeOf reads the shape from a run statement's transcript subject; ok is false
// when the run has none (no model, or a node that records none).
func TranscriptShapeOf(st *Statement) (s TranscriptShape, transcriptCID string, ok bool) {
	for _, sub := range st.Subject {
		if r, _ := sub.Annotations[AnnotationRole].(string); r != RoleTranscript {
			continue
		}
		num := func(k string) (int64, bool) {
			switch v := sub.Annotations[k].(type) {
			case float64:
				if v >= 0 && v <= 1<<53 && v == math.Trunc(v) {
					return int64(v), true
				}
			case int:
				return int64(v), v >= 0
			case int64:
				return v, v >= 0
			}
			return 0, false
		}
		calls, ok1 := num(AnnotationCalls)
		pt, ok2 := num(AnnotationPromptTokens)
		ct, ok3 := num(AnnotationCompletionTokens)
		c, _ := sub.Annotations[AnnotationCID].(string)
		return TranscriptShape{Calls: int(calls), PromptTokens: pt, CompletionTokens: ct}, c, ok1 && ok2 && ok3
	}
	return TranscriptShape{}, "", false
}

// ShapeTolerance says how far a re-execution's transcript may lie from the original's and
// still agree. Each quantity agrees when |a-b| <= max(Abs, Rel*max(a, b)).
type ShapeTolerance struct {
	CallsAbs  int     `json:"calls_abs"`
	CallsRel  float64 `json:"calls_rel"`
	TokensAbs int64   `json:"tokens_abs"`
	TokensRel float64 `json:"tokens_rel"`
}

// ExactShape is the tolerance for agents whose spec declares them deterministic: the same
// calls and the same tokens, to the token.
var ExactShape = ShapeTolerance{}

// DefaultShapeTolerance is for stochastic agents: the number of calls within 1 or 50 % and
// each token count within 64 tokens or 50 % of the larger. It is wide on purpose: a sampled
// agent's second run of one task routinely takes a turn more or less; what it catches is a
// transcript of another kind of run (no calls where the original made dozens, or ten times
// the tokens), not a small drift. docs/attestation-format.md states it; audits may pass
// their own.
var DefaultShapeTolerance = ShapeTolerance{CallsAbs: 1, CallsRel: 0.5, TokensAbs: 64, TokensRel: 0.5}

// ShapeDiff is one quantity that disagrees.
type ShapeDiff struct {
	Field    string  `json:"field"`
	Original int64   `json:"original"`
	Redo     int64   `json:"redo"`
	Allowed  float64 `json:"allowed"` // the largest difference the tolerance allowed
}

func (d ShapeDiff) String() string {
	return fmt.Sprintf("%s: original %d, re-execution %d (allowed difference %g)", d.Field, d.Original, d.Redo, d.Allowed)
}

// CompareTranscriptShape compares a re-execution's transcript shape with the original's
// under tol; it returns the quantities that disagree (none: they agree). Pure.
func CompareTranscriptShape(original, redo TranscriptShape, tol ShapeTolerance) []ShapeDiff {
	var out []ShapeDiff
	check := func(field string, a, b, abs int64, rel float64) {
		allowed := math.Max(float64(abs), rel*float64(max(a, b)))
		if diff := a - b; math.Abs(float64(diff)) > allowed {
			out = append(out, ShapeDiff{Field: field, Original: a, Redo: b, Allowed: allowed})
		}
	}
	check("calls", int64(original.Calls), int64(redo.Calls), int64(tol.CallsAbs), tol.CallsRel)
	check("prompt_tokens", original.PromptTokens, redo.PromptTokens, tol.TokensAbs, tol.TokensRel)
	check("completion_tokens", original.CompletionTokens, redo.CompletionTokens, tol.TokensAbs, tol.TokensRel)
	return out
}

package attest

import (
	"strings"
	"testing"
	"time"
)

const bodyCID = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"

func sampleTranscript() *Transcript {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return &Transcript{
		Version: TranscriptVersionV1, Model: "standin", Upstream: "http://127.0.0.1:8000",
		Limits: TranscriptLimits{MaxCalls: 10, MaxBodyBytes: 1 << 20, MaxTotalBytes: 1 << 30},
		Calls: []TranscriptCall{
			{Seq: 1, Method: "POST", Path: "/v1/chat/completions", Status: 200, Start: at, DurationMS: 3,
				Request:  TranscriptBody{CID: bodyCID, Bytes: 100, StoredBytes: 100},
				Response: TranscriptBody{CID: bodyCID, Bytes: 50, StoredBytes: 50},
				Usage:    &TokenUsage{PromptTokens: 30, CompletionTokens: 12, TotalTokens: 42}},
			{Seq: 2, Method: "GET", Path: "/v1/models", Status: 200, Start: at, DurationMS: 1,
				Response: TranscriptBody{CID: bodyCID, Bytes: 80, StoredBytes: 10, Truncated: true}},
		},
		Totals: TranscriptTotals{Calls: 3, UnrecordedCalls: 1, CallsWithoutUsage: 1, PromptTokens: 30, CompletionTokens: 12,
			TotalTokens: 42, RequestBytes: 100, ResponseBytes: 130},
	}
}

func TestTranscriptRoundTrip(t *testing.T) {
	tr := sampleTranscript()
	b, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseTranscript(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Totals != tr.Totals || len(got.Calls) != 2 || *got.Calls[0].Usage != *tr.Calls[0].Usage || !got.Calls[1].Response.Truncated {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestTranscriptRefusesInconsistentDocuments(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(*Transcript)
		want string
	}{
		"version":          {func(t *Transcript) { t.Version = "v0" }, "version"},
		"totals lie":       {func(t *Transcript) { t.Totals.PromptTokens = 9000 }, "not the sums"},
		"calls hidden":     {func(t *Transcript) { t.Totals.Calls = 1 }, "listed"},
		"seq gap":          {func(t *Transcript) { t.Calls[1].Seq = 3 }, "numbered from 1"},
		"silent truncate":  {func(t *Transcript) { t.Calls[1].Response.Truncated = false }, "not marked truncated"},
		"bad cid":          {func(t *Transcript) { t.Calls[0].Request.CID = "nope" }, "cid"},
		"negative tokens":  {func(t *Transcript) { t.Calls[0].Usage.PromptTokens = -1 }, "negative"},
		"stored uncovered": {func(t *Transcript) { t.Calls[0].Request.CID = "" }, "without a CID"},
	} {
		t.Run(name, func(t *testing.T) {
			tr := sampleTranscript()
			c.edit(tr)
			if err := tr.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	for _, b := range []string{`{"version":"` + TranscriptVersionV1 + `","extra":1}`, `{"version":"a","version":"b"}`, strings.Repeat(" ", MaxTranscriptBytes+1)} {
		if _, err := ParseTranscript([]byte(b)); err == nil {
			t.Fatalf("accepted %.60q", b)
		}
	}
}

func TestCompareTranscriptShape(t *testing.T) {
	orig := TranscriptShape{Calls: 10, PromptTokens: 10000, CompletionTokens: 2000}
	for name, c := range map[string]struct {
		redo  TranscriptShape
		tol   ShapeTolerance
		wantF []string
	}{
		"identical, exact":         {orig, ExactShape, nil},
		"one token off, exact":     {TranscriptShape{10, 10001, 2000}, ExactShape, []string{"prompt_tokens"}},
		"one call more, default":   {TranscriptShape{11, 11000, 2100}, DefaultShapeTolerance, nil},
		"half the calls, default":  {TranscriptShape{5, 5000, 1000}, DefaultShapeTolerance, nil},
		"no calls at all":          {TranscriptShape{}, DefaultShapeTolerance, []string{"calls", "prompt_tokens", "completion_tokens"}},
		"ten times tokens":         {TranscriptShape{10, 100000, 2000}, DefaultShapeTolerance, []string{"prompt_tokens"}},
		"small counts within abs":  {TranscriptShape{10, 10000, 2000}, ShapeTolerance{TokensAbs: 0}, nil},
		"one call vs two, default": {TranscriptShape{9, 10000, 2000}, DefaultShapeTolerance, nil},
	} {
		t.Run(name, func(t *testing.T) {
			d := CompareTranscriptShape(orig, c.redo, c.tol)
			var got []string
			for _, x := range d {
				got = append(got, x.Field)
			}
			if strings.Join(got, ",") != strings.Join(c.wantF, ",") {
				t.Fatalf("diffs %v, want fields %v", d, c.wantF)
			}
		})
	}
	// Small runs: one call against two agrees under the absolute bound.
	if d := CompareTranscriptShape(TranscriptShape{Calls: 1, PromptTokens: 20}, TranscriptShape{Calls: 2, PromptTokens: 70}, DefaultShapeTolerance); len(d) != 0 {
		t.Fatalf("small runs: %v", d)
	}
}

func TestTranscriptShapeFromStatement(t *testing.T) {
	tr := sampleTranscript()
	subs := append(runSubjects("x"), Subject{Name: "transcript.json", Digest: map[string]string{"sha256": strings.Repeat("a", 64)},
		Annotations: TranscriptSubjectAnnotations(bodyCID, tr)})
	b, err := NewStatement(subs, PredicateRunV1, runPredicate("node", "", 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStatement(b) // annotations come back as float64
	if err != nil {
		t.Fatal(err)
	}
	s, c, ok := TranscriptShapeOf(st)
	if !ok || c != bodyCID || s != ShapeOf(tr) {
		t.Fatalf("shape %+v %s %v, want %+v", s, c, ok, ShapeOf(tr))
	}
	st.Subject = st.Subject[:len(st.Subject)-1]
	if _, _, ok := TranscriptShapeOf(st); ok {
		t.Fatal("a statement without a transcript has a shape")
	}
}

// FuzzParseTranscript: the decoder never panics, and what it accepts re-encodes to a
// document it accepts again with the same totals.
func FuzzParseTranscript(f *testing.F) {
	b, _ := sampleTranscript().Encode()
	f.Add(b)
	f.Add([]byte(`{"version":"` + TranscriptVersionV1 + `","limits":{},"totals":{},"calls":[]}`))
	f.Add([]byte(`{"version":"` + TranscriptVersionV1 + `","calls":[{"seq":1,"duration_ms":1e400}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseTranscript(b)
		if err != nil {
			return
		}
		again, err := tr.Encode()
		if err != nil {
			t.Fatalf("accepted document does not encode: %v", err)
		}
		tr2, err := ParseTranscript(again)
		if err != nil || tr2.Totals != tr.Totals || len(tr2.Calls) != len(tr.Calls) {
			t.Fatalf("re-encoded document: %v", err)
		}
	})
}

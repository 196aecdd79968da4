package dashboard

import (
	"context"
	"encoding/json"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// objectSource is fixedSource with real objects by CID.
type objectSource struct {
	fixedSource
	objects map[string][]byte
}

func (o objectSource) Object(_ context.Context, c string, max int) ([]byte, error) {
	b, ok := o.objects[c]
	if !ok {
		return nil, ErrNotFound
	}
	if len(b) > max {
		return nil, ErrNotFound
	}
	return b, nil
}

func (o objectSource) put(b []byte) string {
	mh, _ := multihash.Sum(b, multihash.SHA2_256, -1)
	c := cid.NewCidV1(cid.Raw, mh).String()
	o.objects[c] = b
	return c
}

// A two-turn conversation as an OpenAI client and server write it: a tool call answered
// in JSON, then a streamed final answer.
func transcriptFixture(t *testing.T) (*Snapshot, objectSource, string) {
	t.Helper()
	s := synthSnapshot(t, 2, 1, 1)
	src := objectSource{fixedSource{s}, map[string][]byte{}}
	long := "Task: " + strings.Repeat("classify the review. ", 60) + "<script>alert(1)</script>"
	req1 := `{"model":"m","messages":[{"role":"system","content":"You are an agent."},{"role":"user","content":` + js(long) + `}]}`
	resp1 := `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_files","arguments":"{\"path\":\"/public\"}"}}]}}],"usage":{"prompt_tokens":120,"completion_tokens":9,"total_tokens":129}}`
	req2 := `{"model":"m","stream":true,"messages":[{"role":"system","content":"You are an agent."},{"role":"user","content":` + js(long) + `},` +
		`{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"list_files","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"train.csv test.csv"}]}]}`
	resp2 := "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Final \"}}]}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"Answer: 0\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":140,\"completion_tokens\":3,\"total_tokens\":143}}\n\ndata: [DONE]\n\n"
	at := time.Unix(1_800_000_000, 0).UTC()
	b := func(s string) attest.TranscriptBody {
		return attest.TranscriptBody{CID: src.put([]byte(s)), Bytes: int64(len(s)), StoredBytes: int64(len(s))}
	}
	tr := &attest.Transcript{Version: attest.TranscriptVersionV1, Model: "m", Upstream: "http://127.0.0.1:8000",
		Limits: attest.TranscriptLimits{MaxCalls: 10, MaxBodyBytes: 1 << 20, MaxTotalBytes: 1 << 30},
		Calls: []attest.TranscriptCall{
			{Seq: 1, Method: "POST", Path: "/v1/chat/completions", Status: 200, Start: at, DurationMS: 812, Request: b(req1), Response: b(resp1),
				Usage: &attest.TokenUsage{PromptTokens: 120, CompletionTokens: 9, TotalTokens: 129}},
			{Seq: 2, Method: "POST", Path: "/v1/chat/completions", Status: 200, Start: at, DurationMS: 95, Stream: true, Request: b(req2), Response: b(resp2),
				Usage: &attest.TokenUsage{PromptTokens: 140, CompletionTokens: 3, TotalTokens: 143}},
		}}
	tr.Totals = attest.TranscriptTotals{Calls: 2, PromptTokens: 260, CompletionTokens: 12, TotalTokens: 272,
		RequestBytes: int64(len(req1) + len(req2)), ResponseBytes: int64(len(resp1) + len(resp2))}
	doc, err := tr.Encode()
	if err != nil {
		t.Fatal(err)
	}
	r := &s.Runs[0]
	r.TranscriptCID, r.ModelCalls, r.PromptTokens, r.CompletionTokens = src.put(doc), 2, 260, 12
	return s, src, r.ID
}

func js(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestRunPageShowsTheConversation(t *testing.T) {
	s, src, id := transcriptFixture(t)
	h, err := New(Options{Source: src})
	if err != nil {
		t.Fatal(err)
	}
	rec := get(t, h, "/runs/"+id)
	page := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, page)
	}
	for _, want := range []string{
		`<span class="role">system</span>`, `You are an agent.`,
		`<span class="role">user</span>`, `characters)</span></summary>`, // the long task collapsed
		`tool call <b>list_files</b>`, html.EscapeString(`{"path":"/public"}`),
		`<span class="role">tool `, `answers call_1`, `train.csv test.csv`,
		`<pre>Final Answer: 0</pre>`, // assembled from the stream
		`120 prompt + 9 completion = 129 tokens`, `140 prompt + 3 completion = 143 tokens`,
		`<td class="n">260</td><td class="n">12</td><td class="n">272</td>`,
		`&lt;script&gt;alert(1)&lt;/script&gt;`, `, streamed`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Fatal("a message's markup reached the page unescaped")
	}
	// Each call shows only what it added: the system prompt appears once.
	if n := strings.Count(page, "You are an agent."); n != 1 {
		t.Fatalf("system prompt shown %d times, want once", n)
	}
	// Call 2 adds only the tool's answer: the assistant turn before it was call 1's reply.
	var p RunPage
	rec = get(t, h, "/api/v1/runs/"+id)
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Transcript == nil || len(p.Transcript.Calls) != 2 ||
		p.Transcript.Calls[1].Reply.Content != "Final Answer: 0" || len(p.Transcript.Calls[1].New) != 1 {
		t.Fatalf("%d %v %+v", rec.Code, err, p.Transcript)
	}
	rec = get(t, h, "/api/v1/runs/"+id+"/transcript")
	if tr, err := attest.ParseTranscript(rec.Body.Bytes()); err != nil || tr.Totals.Calls != 2 {
		t.Fatalf("transcript JSON: %v", err)
	}
	// A run without a transcript says so; the runs list links each run's page.
	other := s.Runs[1].ID
	if page := get(t, h, "/runs/"+other).Body.String(); !strings.Contains(page, "No transcript") {
		t.Fatalf("page of a run without a transcript:\n%s", page)
	}
	if page := get(t, h, "/runs").Body.String(); !strings.Contains(page, `href="/runs/`+id+`"`) {
		t.Fatal("the runs list does not link the run page")
	}
	// A transcript this node does not hold is named, not fatal.
	delete(src.objects, s.Runs[0].TranscriptCID)
	if rec := get(t, h, "/runs/"+id); rec.Code != 200 || !strings.Contains(rec.Body.String(), "Not shown: transcript") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// FuzzChatBodies: the run page's readers of other labs' bodies never panic.
func FuzzChatBodies(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]}`), false)
	f.Add([]byte(`{"choices":[{"message":{"role":"assistant","content":"x","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`), false)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"name\":\"f\"}}]}}]}\n\ndata: [DONE]\n"), true)
	f.Fuzz(func(t *testing.T, b []byte, stream bool) {
		ChatRequestMessages(b)
		ChatReply(b, stream)
	})
}

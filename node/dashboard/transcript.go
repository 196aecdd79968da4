package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/evalmesh/evalmesh/attest"
)

// The run page's conversation: a run's transcript (attest.Transcript) read back from the
// node's blocks and shown as chat turns. Each call shows the messages its request added to
// the conversation (a chat client resends the whole history each turn, so only the new tail
// is new), then the model's reply with its tool calls and the call's token counts. Bodies
// come from another lab's node and are parsed defensively: what is not an OpenAI chat body
// is shown raw.

// Bounds of what one run page reads and shows.
const (
	// MaxPageCalls is how many calls a run page renders (the rest are counted).
	MaxPageCalls = 200
	// MaxPageBodyBytes is the largest body a run page parses; a larger one is linked.
	MaxPageBodyBytes = 1 << 20
	// longText is the length past which a message is shown collapsed.
	longText = 600
)

// ChatMessage is one message as the page shows it.
type ChatMessage struct {
	Role      string     `json:"role"`
	Name      string     `json:"name,omitempty"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID answers a tool call (role "tool").
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Long says whether the page collapses the message.
func (m ChatMessage) Long() bool { return len(m.Content) > longText }

// Preview is the start of a long message.
func (m ChatMessage) Preview() string { return truncate(m.Content, 160) }

// ToolCall is one function call a model asked for.
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// CallView is one call on the run page.
type CallView struct {
	attest.TranscriptCall
	// New are the request's messages past the previous call's conversation; Reply the
	// model's answer (nil when the response was not a chat completion).
	New   []ChatMessage `json:"new_messages"`
	Reply *ChatMessage  `json:"reply,omitempty"`
	// Raw bodies (when not a chat body, or not held); Note says why a body is not shown.
	RawRequest, RawResponse string `json:"-"`
	Note                    string `json:"note,omitempty"`
}

// TranscriptView is a run's transcript as the page shows it.
type TranscriptView struct {
	CID    string                  `json:"cid"`
	Model  string                  `json:"model"`
	Totals attest.TranscriptTotals `json:"totals"`
	Limits attest.TranscriptLimits `json:"limits"`
	Calls  []CallView              `json:"calls"`
	// Hidden counts the calls past MaxPageCalls.
	Hidden int `json:"hidden"`
}

// RunPage is the data of /runs/{id}.
type RunPage struct {
	Run Run `json:"run"`
	// Transcript is nil for a run without one; TranscriptErr says why it is not shown when
	// the run has one.
	Transcript    *TranscriptView `json:"transcript,omitempty"`
	TranscriptErr string          `json:"transcript_error,omitempty"`
}

// transcriptView reads a transcript and its bodies from src.
func transcriptView(ctx context.Context, src Source, c string) (*TranscriptView, error) {
	doc, err := src.Object(ctx, c, attest.MaxTranscriptBytes)
	if err != nil {
		return nil, fmt.Errorf("transcript %s: %w", c, err)
	}
	t, err := attest.ParseTranscript(doc)
	if err != nil {
		return nil, fmt.Errorf("transcript %s: %w", c, err)
	}
	v := &TranscriptView{CID: c, Model: t.Model, Totals: t.Totals, Limits: t.Limits}
	calls := t.Calls
	if len(calls) > MaxPageCalls {
		v.Hidden, calls = len(calls)-MaxPageCalls, calls[:MaxPageCalls]
	}
	seen := 0 // messages of the conversation so far (previous request + its reply)
	for _, call := range calls {
		cv := CallView{TranscriptCall: call}
		req, reqNote := body(ctx, src, call.Request)
		resp, respNote := body(ctx, src, call.Response)
		cv.Note = strings.Trim(reqNote+"; "+respNote, "; ")
		msgs, okReq := ChatRequestMessages(req)
		if okReq {
			if seen > len(msgs) {
				seen = 0 // a new conversation
			}
			cv.New = msgs[seen:]
		} else {
			cv.RawRequest = string(req)
		}
		if reply, ok := ChatReply(resp, call.Stream); ok {
			cv.Reply = &reply
		} else {
			cv.RawResponse = string(resp)
		}
		if okReq {
			seen = len(msgs)
			if cv.Reply != nil {
				seen++
			}
		}
		v.Calls = append(v.Calls, cv)
	}
	return v, nil
}

func body(ctx context.Context, src Source, b attest.TranscriptBody) ([]byte, string) {
	note := ""
	if b.Truncated {
		note = fmt.Sprintf("%d of %d bytes stored", b.StoredBytes, b.Bytes)
	}
	if b.CID == "" {
		return nil, note
	}
	data, err := src.Object(ctx, b.CID, MaxPageBodyBytes)
	if err != nil {
		return nil, strings.Trim(note+"; body "+b.CID+": "+err.Error(), "; ")
	}
	return data, note
}

// chat bodies as OpenAI's API writes them (the fields the page shows).
type wireMessage struct {
	Role       string          `json:"role"`
	Name       string          `json:"name"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (w wireMessage) message() ChatMessage {
	m := ChatMessage{Role: w.Role, Name: w.Name, Content: contentText(w.Content), ToolCallID: w.ToolCallID}
	for _, tc := range w.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return m
}

// contentText is a message's content: a string, or the text of an array of parts (other
// parts named by their type).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		} else {
			fmt.Fprintf(&b, "[%s]", p.Type)
		}
	}
	return b.String()
}

// ChatRequestMessages reads a chat completion request's messages; ok is false when the body
// is not one.
func ChatRequestMessages(b []byte) ([]ChatMessage, bool) {
	var req struct {
		Messages []wireMessage `json:"messages"`
	}
	if json.Unmarshal(b, &req) != nil || req.Messages == nil {
		return nil, false
	}
	out := make([]ChatMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		out = append(out, m.message())
	}
	return out, true
}

// ChatReply reads the first choice of a chat completion response, or assembles it from the
// chunks of a streamed one; ok is false when the body is neither.
func ChatReply(b []byte, stream bool) (ChatMessage, bool) {
	if !stream {
		var resp struct {
			Choices []struct {
				Message wireMessage `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal(b, &resp) != nil || len(resp.Choices) == 0 {
			return ChatMessage{}, false
		}
		return resp.Choices[0].Message.message(), true
	}
	var m ChatMessage
	var content strings.Builder
	calls := map[int]*ToolCall{}
	var order []int
	any := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), MaxPageBodyBytes)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(bytes.TrimSpace(sc.Bytes()), []byte("data:"))
		if !ok {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Role      string          `json:"role"`
					Content   json.RawMessage `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &chunk) != nil || len(chunk.Choices) == 0 {
			continue
		}
		any = true
		d := chunk.Choices[0].Delta
		if d.Role != "" {
			m.Role = d.Role
		}
		content.WriteString(contentText(d.Content))
		for _, tc := range d.ToolCalls {
			c := calls[tc.Index]
			if c == nil {
				if len(order) >= 1000 {
					continue
				}
				c = &ToolCall{}
				calls[tc.Index] = c
				order = append(order, tc.Index)
			}
			if tc.ID != "" {
				c.ID = tc.ID
			}
			c.Name += tc.Function.Name
			c.Arguments += tc.Function.Arguments
		}
	}
	if !any {
		return ChatMessage{}, false
	}
	if m.Role == "" {
		m.Role = "assistant"
	}
	m.Content = content.String()
	for _, i := range order {
		m.ToolCalls = append(m.ToolCalls, *calls[i])
	}
	return m, true
}

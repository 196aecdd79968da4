// Package standin is a TEST DOUBLE: a deterministic stand-in for an OpenAI-compatible model
// server (vLLM, SGLang, …), so the example ReAct agent and the model-pod code run without a
// GPU or an LLM. It answers /v1/chat/completions with canned replies chosen from the
// conversation alone (same conversation, same reply, byte for byte; streamed as server-sent
// events when asked, with usage counted as words: Usage), /v1/models and /health.
// It is not a model and says nothing about any real agent's skill.
//
// The binary (cmd/standin-model) also carries the helpers a FROM scratch image lacks: `probe
// URL` (the readiness probe the runner execs inside the model's container) and `netcheck`
// (lists the interfaces and routes the container sees, for the isolation tests; it sends
// no packet). It imports nothing of evalmesh, so it builds static (CGO_ENABLED=0).
package standin

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model         string    `json:"model"`
	Messages      []Message `json:"messages"`
	Stream        bool      `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// Tokens is the stand-in's token count of a text: its whitespace-separated words. A real
// tokenizer counts otherwise; the stand-in needs only a count that is the same on every run,
// so transcripts' token totals can be asserted.
func Tokens(s string) int { return len(strings.Fields(s)) }

// Usage is the usage object the stand-in reports for a conversation and its reply.
func Usage(msgs []Message, reply string) map[string]int {
	p := 0
	for _, m := range msgs {
		p += Tokens(m.Content)
	}
	c := Tokens(reply)
	return map[string]int{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
}

var headerRE = regexp.MustCompile(`(?m)^Submission header: (.*)$`)

// Reply is the stand-in's deterministic answer to a conversation: first it asks to look at
// the task's files (a ReAct action), then it gives a final answer, a JSON object of one
// value per submission column (the agent fills the rows).
func Reply(msgs []Message) string {
	assistant := 0
	var header []string
	for _, m := range msgs {
		if m.Role == "assistant" {
			assistant++
		}
		if h := headerRE.FindStringSubmatch(m.Content); h != nil {
			header = strings.Split(strings.TrimSpace(h[1]), ",")
		}
	}
	if assistant == 0 {
		return "Thought: I should see which files the task gives me before I plan.\nAction: list_files[/public]"
	}
	vals := map[string]string{}
	for _, c := range header {
		if c = strings.TrimSpace(c); c != "" {
			vals[c] = "0"
		}
	}
	b, _ := json.Marshal(vals) // map keys sorted: deterministic
	return "Thought: Plan: predict the constant 0 for every row (a stand-in has no skill).\nFinal Answer: " + string(b)
}

// Handler serves the OpenAI-compatible endpoints for model name; ready reports /health.
func Handler(model string, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if !ready() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{"id": model, "object": "model", "owned_by": "evalmesh-standin"}}})
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if !ready() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		var req chatRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if req.Model != model {
			http.Error(w, fmt.Sprintf("model %q is not served here (serving %q)", req.Model, model), http.StatusNotFound)
			return
		}
		content := Reply(req.Messages)
		if req.Stream {
			stream(w, model, content, req.StreamOptions.IncludeUsage, Usage(req.Messages, content))
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": Message{Role: "assistant", Content: content}, "finish_reason": "stop"}},
			"usage":   Usage(req.Messages, content),
		})
	})
	return mux
}

// stream writes a reply as OpenAI's server-sent events: one chunk per line of the reply,
// then (when asked with stream_options.include_usage) a chunk with the usage and no
// choices, then [DONE].
func stream(w http.ResponseWriter, model, content string, withUsage bool, usage map[string]int) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]string, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]string{"role": "assistant"}, nil))
	for _, part := range strings.SplitAfter(content, "\n") {
		send(chunk(map[string]string{"content": part}, nil))
	}
	send(chunk(map[string]string{}, "stop"))
	if withUsage {
		send(map[string]any{"id": "chatcmpl-standin", "object": "chat.completion.chunk", "created": 0, "model": model,
			"choices": []any{}, "usage": usage})
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// Main is the binary: `serve [--addr 127.0.0.1:8000] [--model NAME] [--ready-after DUR]
// [--never-ready]`, `probe URL`, or `netcheck`.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: standin-model serve|probe URL|netcheck")
		return 2
	}
	switch args[0] {
	case "probe":
		if len(args) != 2 {
			fmt.Fprintln(stderr, "usage: standin-model probe URL")
			return 2
		}
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(args[1])
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			fmt.Fprintln(stderr, resp.Status)
			return 1
		}
		return 0
	case "netcheck":
		return netcheck(stdout, stderr)
	case "serve":
	default:
		fmt.Fprintf(stderr, "unknown command %q: serve, probe or netcheck\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8000", "listen address")
	model := fs.String("model", "standin", "model name served")
	readyAfter := fs.Duration("ready-after", 0, "answer /health with 503 until this long after start")
	never := fs.Bool("never-ready", false, "never become ready (to test the runner's bound)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	start := time.Now()
	ready := func() bool { return !*never && time.Since(start) >= *readyAfter }
	fmt.Fprintf(stderr, "standin-model (a test double, not a model): serving %q on %s\n", *model, *addr)
	if err := http.ListenAndServe(*addr, Handler(*model, ready)); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// netcheck prints every interface with its addresses and every route of the kernel's
// tables (/proc/net/route, /proc/net/ipv6_route) as "iface NAME ADDR..." and "route4 …" /
// "route6 …" lines. It only reads; it sends nothing.
func netcheck(stdout, stderr io.Writer) int {
	ifs, err := net.Interfaces()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		var as []string
		for _, a := range addrs {
			as = append(as, a.String())
		}
		fmt.Fprintf(stdout, "iface %s %s\n", i.Name, strings.Join(as, " "))
	}
	for _, f := range []string{"/proc/net/route", "/proc/net/ipv6_route"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" || (f == "/proc/net/route" && i == 0) {
				continue // the IPv4 table's header
			}
			kind := "route4"
			if strings.Contains(f, "ipv6") {
				kind = "route6"
			}
			fmt.Fprintf(stdout, "%s %s\n", kind, strings.Join(strings.Fields(line), " "))
		}
	}
	return 0
}

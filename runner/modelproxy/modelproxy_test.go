package modelproxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/examples/agents/standin"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/runner/modelproxy"
)

// proxyTo starts a proxy recording into a fresh folder, in front of the stand-in model (a
// test double for an LLM server), both on loopback.
func proxyTo(t *testing.T, lim modelproxy.Limits) (base, dir string) {
	t.Helper()
	model := httptest.NewServer(standin.Handler("standin", func() bool { return true }))
	t.Cleanup(model.Close)
	u, _ := url.Parse(model.URL)
	dir = t.TempDir()
	p, err := modelproxy.New(u, dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() { srv.Close(); p.Close() })
	return srv.URL, dir
}

// records waits until the folder lists n calls (a call's line is written just after its
// response's last byte, so the client may read the response first) and returns them.
func records(t *testing.T, dir string, n int) []modelproxy.Record {
	t.Helper()
	var out []modelproxy.Record
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d calls recorded", n), func() bool {
		out = readRecords(t, dir)
		return len(out) >= n
	})
	return out
}

func readRecords(t *testing.T, dir string) []modelproxy.Record {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, modelproxy.CallsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []modelproxy.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r modelproxy.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func chat(t *testing.T, base string, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

const firstTurn = `{"model":"standin","messages":[{"role":"user","content":"Submission header: id,label\nsolve it"}]}`

func TestProxyRecordsCallsBodiesAndUsage(t *testing.T) {
	base, dir := proxyTo(t, modelproxy.DefaultLimits)
	code, resp := chat(t, base, firstTurn)
	if code != 200 {
		t.Fatalf("status %d %s", code, resp)
	}
	stream := `{"model":"standin","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"a b c"},{"role":"assistant","content":"x y"}]}`
	code, sresp := chat(t, base, stream)
	if code != 200 || !bytes.Contains(sresp, []byte("data: [DONE]")) {
		t.Fatalf("stream: %d %s", code, sresp)
	}
	rs := records(t, dir, 2)
	if len(rs) != 2 {
		t.Fatalf("%d records, want 2", len(rs))
	}
	// Calls are written as they finish; seq is the order they arrived.
	if rs[0].Seq != 1 || rs[1].Seq != 2 || rs[0].Method != "POST" || rs[0].Path != "/v1/chat/completions" || rs[0].Status != 200 {
		t.Fatalf("records %+v", rs)
	}
	reply := standin.Reply([]standin.Message{{Role: "user", Content: "Submission header: id,label\nsolve it"}})
	want := modelproxy.Usage{PromptTokens: 5, CompletionTokens: int64(standin.Tokens(reply))}
	want.TotalTokens = want.PromptTokens + want.CompletionTokens
	if rs[0].Usage == nil || *rs[0].Usage != want || rs[0].Stream {
		t.Fatalf("usage %+v, want %+v", rs[0].Usage, want)
	}
	if rs[1].Usage == nil || rs[1].Usage.PromptTokens != 5 || !rs[1].Stream {
		t.Fatalf("stream record %+v usage %+v", rs[1], rs[1].Usage)
	}
	// The bodies stored are the bytes that went over the wire.
	for _, c := range []struct {
		b    modelproxy.Body
		want []byte
	}{{rs[0].Request, []byte(firstTurn)}, {rs[0].Response, resp}, {rs[1].Request, []byte(stream)}, {rs[1].Response, sresp}} {
		got, err := os.ReadFile(filepath.Join(dir, modelproxy.BodiesDir, c.b.File))
		if err != nil || !bytes.Equal(got, c.want) || c.b.Bytes != int64(len(c.want)) || c.b.Truncated {
			t.Fatalf("body %+v: %q, want %q (%v)", c.b, got, c.want, err)
		}
	}
}

func TestProxyBounds(t *testing.T) {
	base, dir := proxyTo(t, modelproxy.Limits{MaxCalls: 3, MaxBodyBytes: 40, MaxTotalBytes: 100})
	for i := 0; i < 5; i++ {
		// The agent gets whole responses whatever is stored.
		if code, b := chat(t, base, firstTurn); code != 200 || !bytes.Contains(b, []byte("list_files")) {
			t.Fatalf("call %d: %d %s", i, code, b)
		}
	}
	rs := records(t, dir, 3)
	if len(rs) != 3 {
		t.Fatalf("%d records, want 3 (max calls)", len(rs))
	}
	n, _ := os.ReadFile(filepath.Join(dir, modelproxy.UnrecordedFile))
	if strings.TrimSpace(string(n)) != "2" {
		t.Fatalf("unrecorded %q, want 2", n)
	}
	var stored int64
	for _, r := range rs {
		for _, b := range []modelproxy.Body{r.Request, r.Response} {
			if b.StoredBytes > 40 || !b.Truncated || b.Bytes <= 40 {
				t.Fatalf("body %+v: want at most 40 bytes stored of a longer body, marked truncated", b)
			}
			stored += b.StoredBytes
		}
		// A truncated JSON response's usage is unknown rather than guessed.
		if r.Usage != nil {
			t.Fatalf("usage %+v from a truncated response", r.Usage)
		}
	}
	if stored > 100 || stored < 80 {
		t.Fatalf("stored %d bytes in all, want the 100 bound nearly used and never passed", stored)
	}
}

func TestProxyRecordsModelDown(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1") // nothing listens
	dir := t.TempDir()
	p, err := modelproxy.New(u, dir, modelproxy.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	if code, _ := chat(t, srv.URL, firstTurn); code != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", code)
	}
	rs := records(t, dir, 1)
	if len(rs) != 1 || rs[0].Status != 0 || !strings.Contains(rs[0].Error, "connect") {
		t.Fatalf("records %+v", rs)
	}
	// The readiness path is the proxy's own: answered, not forwarded, not recorded.
	resp, err := http.Get(srv.URL + modelproxy.ReadyPath)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("ready: %v %v", resp, err)
	}
	if len(readRecords(t, dir)) != 1 {
		t.Fatal("the readiness probe was recorded")
	}
}

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/node/api"
)

// rawRequest is what another local account (or a web page) can send: it knows the port
// (ports can be scanned) but not the token.
type rawRequest struct {
	name   string
	path   string
	body   io.Reader
	length int64 // -1: chunked (no Content-Length)
	header map[string]string
	host   string
	method string
}

func sendRaw(t *testing.T, addr string, r rawRequest) (int, string) {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, "http://"+addr+api.Prefix+r.path, r.body)
	if err != nil {
		t.Fatal(err)
	}
	if r.length != 0 {
		req.ContentLength = r.length
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func blockCount(t *testing.T, n *Node) int {
	t.Helper()
	ch, err := n.bstore.AllKeysChan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for range ch {
		count++
	}
	return count
}

// TestAPIRefusesAllButTheOwner: a real daemon answers only requests that carry the token of
// HOME/api.token, name its own loopback address in Host, carry no Origin, and send JSON
// within the size bound; each refusal has the status and message that say why, and changes
// nothing (the pin stays, no block is added).
func TestAPIRefusesAllButTheOwner(t *testing.T) {
	ctx := context.Background()
	h := newHome(t)
	d := startDaemon(t, h)
	src := writeTree(t, map[string]string{"a.txt": strings.Repeat("owner data ", 1000)})
	root, err := d.c.Add(ctx, src, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(strings.TrimSuffix(d.c.base, strings.TrimSuffix(api.Prefix, "/")), "http://")
	token := d.c.token
	if len(token) != 64 {
		t.Fatalf("token %q: want 64 hex characters", token)
	}
	fi, err := os.Stat(h.APITokenPath())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", h.APITokenPath(), err, fi.Mode())
	}
	secretDir := writeTree(t, map[string]string{"id_rsa": "secret"})
	addBody := func() io.Reader {
		b, _ := json.Marshal(api.AddRequest{Dir: secretDir, Unchecked: true})
		return bytes.NewReader(b)
	}
	rmBody := func() io.Reader { return strings.NewReader(`{"cid":"` + root.String() + `"}`) }
	jsonType := map[string]string{"Content-Type": "application/json"}
	auth := func(extra map[string]string) map[string]string {
		m := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	_, port, _ := strings.Cut(addr, ":")
	blocksBefore := blockCount(t, d.n)
	for _, tc := range []struct {
		req  rawRequest
		code int
		says string
	}{
		{rawRequest{name: "add with no token", path: "task/add", body: addBody(), header: jsonType}, 401, "api.token"},
		{rawRequest{name: "pin/rm with no token", path: "pin/rm", body: rmBody(), header: jsonType}, 401, "Authorization: Bearer"},
		{rawRequest{name: "pin/rm with a wrong token", path: "pin/rm", body: rmBody(), header: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + strings.Repeat("0", 64)}}, 401, "wrong API token"},
		{rawRequest{name: "token as a query parameter", path: "pin/rm?token=" + token, body: rmBody(), header: jsonType}, 401, "api.token"},
		{rawRequest{name: "DNS rebinding", path: "pin/rm", body: rmBody(), header: auth(nil), host: "evil.example:" + port}, 403, "not this API's own address"},
		{rawRequest{name: "right name, wrong port", path: "pin/rm", body: rmBody(), header: auth(nil), host: "127.0.0.1:1"}, 403, "Host"},
		{rawRequest{name: "web page", path: "pin/rm", body: rmBody(), header: auth(map[string]string{"Origin": "http://evil.example"})}, 403, "web pages"},
		{rawRequest{name: "form post", path: "pin/rm", body: strings.NewReader("cid=" + root.String()), header: auth(map[string]string{"Content-Type": "application/x-www-form-urlencoded"})}, 415, "application/json"},
		{rawRequest{name: "text/plain", path: "pin/rm", body: rmBody(), header: auth(map[string]string{"Content-Type": "text/plain"})}, 415, "Content-Type"},
		{rawRequest{name: "no Content-Type", path: "pin/rm", body: rmBody(), header: map[string]string{"Authorization": "Bearer " + token}}, 415, "Content-Type"},
		{rawRequest{name: "JSON over 1 MiB", path: "pin/rm", body: bytes.NewReader(make([]byte, 2<<20)), header: auth(nil)}, 413, "limit"},
		{rawRequest{name: "chunked JSON over 1 MiB", path: "pin/rm", body: io.MultiReader(strings.NewReader(`{"cid":"`), bytes.NewReader(bytes.Repeat([]byte("a"), 2<<20))), length: -1, header: auth(nil)}, 413, "too large"},
		{rawRequest{name: "GET", method: http.MethodGet, path: "pin/ls", header: auth(nil)}, 405, "POST"},
	} {
		code, body := sendRaw(t, addr, tc.req)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s; want %d saying %q", tc.req.name, code, strings.TrimSpace(body), tc.code, tc.says)
		}
		var e api.ErrorBody
		if json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
			t.Errorf("%s: body %q is not a JSON error", tc.req.name, body)
		}
	}
	if ok, _ := d.n.IsPinned(ctx, root); !ok {
		t.Fatal("a refused pin/rm removed the pin")
	}
	if got := blockCount(t, d.n); got != blocksBefore {
		t.Fatalf("refused requests changed the block count from %d to %d", blocksBefore, got)
	}
	pins, _ := d.n.Pins(ctx)
	if len(pins) != 1 {
		t.Fatalf("pins after refused requests: %v", pins)
	}
	// The owner's requests, by each loopback name.
	for _, host := range []string{addr, "localhost:" + port} {
		code, body := sendRaw(t, addr, rawRequest{name: "owner", path: "pin/ls", body: strings.NewReader("{}"), header: auth(nil), host: host})
		if code != 200 || !strings.Contains(body, root.String()) {
			t.Errorf("owner's pin/ls with Host %s: %d %s", host, code, body)
		}
	}
	// The client sends the token; an old token (of an earlier start) is refused.
	stale := NewClientAddr(h, addr, strings.Repeat("ab", 32))
	if _, err := stale.Pins(ctx); err == nil || !strings.Contains(err.Error(), "api.token") {
		t.Fatalf("client with a wrong token: %v", err)
	}
}

// TestAPITokenUnreadableByOtherAccounts: another uid cannot read HOME/api.token even where
// the home itself is open to it (run as root: the check runs cat as nobody).
func TestAPITokenUnreadableByOtherAccounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as another uid")
	}
	h := newHome(t)
	startDaemon(t, h)
	for _, dir := range []string{h.Dir, filepath.Dir(h.Dir)} { // the test's own temp folders
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for dir := filepath.Dir(h.Dir); dir != "/"; dir = filepath.Dir(dir) {
		if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not searchable by other accounts", dir)
		}
	}
	cat := exec.Command("cat", h.APITokenPath())
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cat.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("uid 65534 read the API token: %q, %v", out, err)
	}
}

// TestAPIImportBoundAndStaged: a CAR over the bundle size bound is refused with 413, an
// incomplete one with an error, and neither leaves a block behind; a refused add (a symlink
// found after a big file was packed) leaves none either.
func TestAPIImportBoundAndStaged(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultTestConfig()
	cfg.MaxBundleSize = 1 << 20
	opts := testOptions()
	opts.Config = &cfg
	d := startDaemonWith(t, newHome(t), opts)
	src := startNode(t, testOptions())
	small := importDir(t, src.LocalDAG(), map[string][]byte{"s": randomBytes(1, 100<<10)})
	big := importDir(t, src.LocalDAG(), map[string][]byte{"b": randomBytes(2, 3<<20)})
	carOf := func(root cid.Cid) []byte {
		var buf bytes.Buffer
		if err := src.ExportCAR(ctx, root, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if _, err := d.c.ImportCAR(ctx, bytes.NewReader(carOf(small))); err != nil {
		t.Fatal(err)
	}
	before := blockCount(t, d.n)

	// Over the bound, with a Content-Length (refused before reading) and streamed.
	addr := strings.TrimPrefix(strings.TrimSuffix(d.c.base, strings.TrimSuffix(api.Prefix, "/")), "http://")
	hdr := map[string]string{"Content-Type": "application/vnd.ipld.car", "Authorization": "Bearer " + d.c.token}
	bigCAR := carOf(big)
	if code, body := sendRaw(t, addr, rawRequest{name: "big CAR", path: "dag/import", body: bytes.NewReader(bigCAR), header: hdr}); code != 413 {
		t.Errorf("CAR of %d bytes over a 1 MiB bound: %d %s; want 413", len(bigCAR), code, body)
	}
	if code, body := sendRaw(t, addr, rawRequest{name: "big CAR streamed", path: "dag/import", body: io.MultiReader(bytes.NewReader(bigCAR)), length: -1, header: hdr}); code != 413 {
		t.Errorf("streamed CAR over the bound: %d %s; want 413", code, body)
	}
	if got := blockCount(t, d.n); got != before {
		t.Fatalf("refused CARs left %d blocks behind", got-before)
	}
	// Within the bound but incomplete: the root's children are missing.
	part := importDir(t, src.LocalDAG(), map[string][]byte{"p1": randomBytes(3, 300<<10), "p2": randomBytes(4, 300<<10)})
	partCAR := carOf(part)
	cut := partCAR[:len(partCAR)-200<<10] // drops the last blocks, keeps the root
	if _, err := d.c.ImportCAR(ctx, bytes.NewReader(cut)); err == nil {
		t.Fatal("an incomplete CAR was imported")
	}
	if got := blockCount(t, d.n); got != before {
		t.Fatalf("a refused incomplete CAR left %d blocks behind", got-before)
	}
	// A refused add: the symlink is found after a.bin's blocks were stored.
	dir := writeTree(t, map[string]string{"a.bin": string(randomBytes(5, 600<<10))})
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "z-link")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Add(ctx, dir, true, nil); err == nil {
		t.Fatal("a folder with a symlink was added")
	}
	if got := blockCount(t, d.n); got != before {
		t.Fatalf("a refused add left %d blocks behind", got-before)
	}
	if ok, _ := d.n.IsPinned(ctx, small); !ok {
		t.Fatal("the earlier import lost its pin")
	}
}

// TestGetKeepsPrivateToTheOwner: an unpacked bundle's private/ (labels) is mode 0700, so
// other accounts on the machine cannot read it; public/ stays readable.
func TestGetKeepsPrivateToTheOwner(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, testOptions())
	src := writeTree(t, map[string]string{"public/train.csv": "x\n", "private/labels.csv": "y\n"})
	root, err := n.Add(ctx, src, AddOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "got")
	if err := n.Get(ctx, root, out, GetOptions{}); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]os.FileMode{"private": 0o700, "public": 0o755} {
		fi, err := os.Stat(filepath.Join(out, dir))
		if err != nil || fi.Mode().Perm()&want != fi.Mode().Perm() || (dir == "private" && fi.Mode().Perm()&0o077 != 0) {
			t.Errorf("%s/: mode %v, %v; want %v", dir, fi.Mode().Perm(), err, want)
		}
	}
}

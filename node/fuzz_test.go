package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// FuzzBlockLinks feeds arbitrary bytes, as a peer could send them, to the dag-pb decoding that
// Fetch does on every block (links and declared size): it must error, never panic, and a
// declared size is never negative (which would slip under max_bundle_size).
func FuzzBlockLinks(f *testing.F) {
	nd := merkledag.NodeWithData([]byte{0x08, 0x01})
	child := merkledag.NewRawNode([]byte("leaf"))
	nd.AddNodeLink("leaf", child)
	f.Add(nd.RawData())
	f.Add([]byte{})
	f.Add([]byte{0x12, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, _ := multihash.Sum(data, multihash.SHA2_256, -1)
		for _, codec := range []uint64{cid.DagProtobuf, cid.Raw} {
			b, _ := blocks.NewBlockWithCid(data, cid.NewCidV1(codec, h))
			if size, err := DeclaredSize(b); err == nil && size < 0 {
				t.Fatalf("declared size %d", size)
			}
			blockLinks(b)
		}
	})
}

// FuzzReadCAR feeds arbitrary bytes as a CAR file to the reader ImportCAR uses: a malformed
// CAR is refused with an error, never a panic, and every block passed on matches its CID.
func FuzzReadCAR(f *testing.F) {
	n := startNode(f, testOptions())
	root := importDir(f, n.LocalDAG(), map[string][]byte{"a": []byte("hello"), "b": randomBytes(1, 1000)})
	var car bytes.Buffer
	if err := n.ExportCAR(context.Background(), root, &car); err != nil {
		f.Fatal(err)
	}
	f.Add(car.Bytes())
	f.Add(car.Bytes()[:len(car.Bytes())/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		readCAR(bytes.NewReader(data), func(b blocks.Block) error {
			if got, err := b.Cid().Prefix().Sum(b.RawData()); err != nil || !got.Equals(b.Cid()) {
				t.Fatalf("block %s passed on with bytes that hash to %s", b.Cid(), got)
			}
			return nil
		})
	})
}

// FuzzAPIGuard sends requests with arbitrary method, Host, Origin, Authorization, Content-Type
// and body through guard, as any local account or web page could: a handler runs only for
// a POST with the exact token, a Host naming the listener, no Origin, and a JSON (or empty)
// body within the bound; everything else is refused with a JSON error, never a panic.
func FuzzAPIGuard(f *testing.F) {
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	f.Add("POST", "127.0.0.1:5201", "", "Bearer "+token, "application/json", []byte("{}"))
	f.Add("POST", "localhost:5201", "", "Bearer "+token, "application/json; charset=utf-8", []byte(`{"cid":"x"}`))
	f.Add("POST", "evil.example:5201", "", "Bearer "+token, "application/json", []byte("{}"))
	f.Add("POST", "127.0.0.1:5201", "http://evil.example", "Bearer "+token, "application/json", []byte("{}"))
	f.Add("POST", "127.0.0.1:5201", "", "Bearer wrong", "text/plain", []byte("cid=x"))
	f.Add("GET", "127.0.0.1", "", "", "", []byte{})
	n := &Node{apiToken: token, cfg: DefaultTestConfig()}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5201}
	f.Fuzz(func(t *testing.T, method, host, origin, authz, ctype string, body []byte) {
		reached := false
		h := n.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached = true
			io.Copy(io.Discard, r.Body)
		}))
		req, err := http.NewRequest(method, "http://127.0.0.1:5201/api/v0/pin/ls", bytes.NewReader(body))
		if err != nil {
			return // not a request net/http would send
		}
		req.Host = host
		for k, v := range map[string]string{"Origin": origin, "Authorization": authz, "Content-Type": ctype} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(local)))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		mt, _, _ := mime.ParseMediaType(ctype)
		hostOK := host == "127.0.0.1:5201" || strings.EqualFold(host, "localhost:5201") || host == "[::1]:5201"
		mayPass := method == "POST" && origin == "" && authz == "Bearer "+token && hostOK && len(body) <= maxJSONBody && (len(body) == 0 || mt == "application/json")
		if reached && !mayPass {
			t.Fatalf("guard let %s Host=%q Origin=%q Authorization=%q Content-Type=%q (%d bytes) through", method, host, origin, authz, ctype, len(body))
		}
		if !reached {
			var e apiError
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" || rec.Code < 400 {
				t.Fatalf("refusal %d %q is not a JSON error", rec.Code, rec.Body.String())
			}
			if mayPass {
				t.Fatalf("guard refused a request the owner's CLI sends: %d %s", rec.Code, rec.Body.String())
			}
		}
	})
}

package api

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

	"github.com/evalmesh/evalmesh/internal/home"
)

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
	o := Options{Token: token, Config: home.DefaultConfig()}
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5201}
	f.Fuzz(func(t *testing.T, method, host, origin, authz, ctype string, body []byte) {
		reached := false
		h := guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached = true
			io.Copy(io.Discard, r.Body)
		}), o)
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
			var e ErrorBody
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" || rec.Code < 400 {
				t.Fatalf("refusal %d %q is not a JSON error", rec.Code, rec.Body.String())
			}
			if mayPass {
				t.Fatalf("guard refused a request the owner's CLI sends: %d %s", rec.Code, rec.Body.String())
			}
		}
	})
}

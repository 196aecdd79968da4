package api

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/internal/home"
)

// Every route whose body names a CID refuses a malformed body and a CID that does not parse
// with 400 and a JSON error that says which, before it asks the node anything (the nil Node
// here would panic if it were asked).
func TestCIDBodyRoutesRefuseBadBodies(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	h := Handler(nil, Options{Token: token, Config: home.DefaultConfig()})
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5201}
	for _, path := range []string{"pin/rm", "pin/add", "pin/status", "task/get"} {
		for _, c := range []struct{ body, want string }{
			{`{"cid":"nope"}`, `"nope" is not a CID`},
			{`{"cid":`, "request body"},
			{`{"cid":"x","extra":1}`, `unknown field "extra"`},
		} {
			req := httptest.NewRequest("POST", "http://127.0.0.1:5201"+Prefix+path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(local)))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var e ErrorBody
			if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, c.want) {
				t.Errorf("%s %s: %d %s, want 400 with an error containing %q", path, c.body, rec.Code, strings.TrimSpace(rec.Body.String()), c.want)
			}
		}
	}
}

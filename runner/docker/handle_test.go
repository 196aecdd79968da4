package docker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/runner"
)

func TestParseLoadOutput(t *testing.T) {
	for _, tc := range []struct{ name, in, id, ref, err string }{
		{"by id", `{"stream":"Loaded image ID: sha256:abc\n"}`, "sha256:abc", "", ""},
		{"by tag", `{"stream":"Loaded image: agent:1\n"}`, "", "agent:1", ""},
		{"error", `{"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"}`, "", "", "unexpected EOF"},
		{"nothing", `{"stream":"hello\n"}`, "", "", "did not say"},
		{"garbage", `not json`, "", "", "unreadable"},
	} {
		id, ref, err := parseLoadOutput(strings.NewReader(tc.in))
		if id != tc.id || ref != tc.ref || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: parseLoadOutput = %q, %q, %v; want %q, %q, error containing %q", tc.name, id, ref, err, tc.id, tc.ref, tc.err)
		}
	}
}

func FuzzParseLoadOutput(f *testing.F) {
	f.Add(`{"stream":"Loaded image ID: sha256:abc\n"}`)
	f.Add(`{"stream":"Loaded image: agent:1\n"}{"stream":"Loaded image ID: sha256:d\n"}`)
	f.Add(`{"errorDetail":{"message":"x"}}`)
	f.Add(`{"stream":3}`)
	f.Fuzz(func(t *testing.T, in string) {
		id, ref, err := parseLoadOutput(strings.NewReader(in))
		if err == nil && id == "" && ref == "" {
			t.Fatal("success without an image")
		}
		if err != nil && (id != "" || ref != "") {
			t.Fatal("error with an image")
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	f.Add(`{"container_id":"abc","name":"evalmesh-x"}`)
	f.Add(`{"container_id":""}`)
	f.Add(`null`)
	f.Add(`[1,2]`)
	f.Fuzz(func(t *testing.T, raw string) {
		h := &runner.Handle{Driver: DriverName, DriverState: json.RawMessage(raw)}
		s, err := decodeState(h)
		if err == nil && s.ContainerID == "" {
			t.Fatal("accepted a state without a container ID")
		}
		if err == nil {
			back, err := decodeState(&runner.Handle{Driver: DriverName, DriverState: encodeState(s)})
			if err != nil || back != s {
				t.Fatalf("round trip: %+v, %v; want %+v", back, err, s)
			}
		}
	})
}

package agentspec

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name, in, err string
	}{
		{name: "minimal yaml", in: "name: solver\nversion: \"1\"\ncommand: [evalmesh, agent, solver]\n"},
		{name: "json", in: `{"name":"a","version":"1","command":["/agent"],"image":"` + digest + `","network":"bridge","resources":{"gpus":1}}`},
		{name: "unknown field", in: "name: a\nversion: \"1\"\ncommand: [x]\nimgae: y\n", err: "field imgae not found"},
		{name: "no command", in: "name: a\nversion: \"1\"\n", err: "command is required"},
		{name: "bad name", in: "name: ../a\nversion: \"1\"\ncommand: [x]\n", err: "name \"../a\""},
		{name: "no version", in: "name: a\ncommand: [x]\n", err: "version is required"},
		{name: "image by tag", in: "name: a\nversion: \"1\"\ncommand: [x]\nimage: ubuntu:latest\n", err: "must be an image ID sha256"},
		{name: "bad network", in: "name: a\nversion: \"1\"\ncommand: [x]\nnetwork: host\n", err: `network "host"`},
		{name: "reserved env", in: "name: a\nversion: \"1\"\ncommand: [x]\nenv: {EVALMESH_PUBLIC: /}\n", err: "EVALMESH_* are set by the runner"},
		{name: "negative resources", in: "name: a\nversion: \"1\"\ncommand: [x]\nresources: {gpus: -1}\n", err: "must not be negative"},
		{name: "empty", in: "", err: "empty"},
		{name: "model", in: "name: a\nversion: \"1\"\ncommand: [x]\nmodel: {name: m, image: " + digest + ", command: [/model], port: 8000, ready_path: /health, probe: [/model, probe], weights: [{name: w, digest: bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy}]}\n"},
		{name: "model no probe", in: "name: a\nversion: \"1\"\ncommand: [x]\nmodel: {name: m, image: " + digest + ", command: [/model], port: 8000, ready_path: /health}\n", err: "probe is required"},
		{name: "model bad port", in: "name: a\nversion: \"1\"\ncommand: [x]\nmodel: {name: m, image: " + digest + ", command: [/model], port: 0, ready_path: /health, probe: [p]}\n", err: "port 0"},
		{name: "model and bridge", in: "name: a\nversion: \"1\"\ncommand: [x]\nnetwork: bridge\nmodel: {name: m, image: " + digest + ", command: [/model], port: 1, ready_path: /h, probe: [p]}\n", err: "exclude each other"},
		{name: "model bad weights digest", in: "name: a\nversion: \"1\"\ncommand: [x]\nmodel: {name: m, image: " + digest + ", command: [/model], port: 1, ready_path: /h, probe: [p], weights: [{name: w, digest: nope}]}\n", err: "is not a CID"},
		{name: "model sets base url", in: "name: a\nversion: \"1\"\ncommand: [x]\nenv: {OPENAI_BASE_URL: http://x}\nmodel: {name: m, image: " + digest + ", command: [/model], port: 1, ready_path: /h, probe: [p]}\n", err: "set by the runner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if tt.err == "" && err != nil {
				t.Fatal(err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err %v, want %q", err, tt.err)
			}
		})
	}
}

func TestAgentCanonicalAndCID(t *testing.T) {
	a, err := Parse([]byte("version: \"1.0.0\"\nname: solver\ncommand: [evalmesh, agent, solver]\nimage_tar: ./x.tar\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"command":["evalmesh","agent","solver"],"name":"solver","network":"none","version":"1.0.0"}`
	if got := string(a.Canonical()); got != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	// The same agent written as JSON in another key order, with the default network spelled
	// out, has the same identity; any change to a signed field changes it.
	b, err := Parse([]byte(`{"network":"none","command":["evalmesh","agent","solver"],"version":"1.0.0","name":"solver"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.CID() != b.CID() || !strings.HasPrefix(a.CID(), "bafkrei") {
		t.Fatalf("CIDs %s %s", a.CID(), b.CID())
	}
	b.Env = map[string]string{"MODEL": "x"}
	if a.CID() == b.CID() {
		t.Fatal("env is not part of the identity")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("name: solver\nversion: \"1\"\ncommand: [evalmesh, agent, solver]\n"))
	f.Add([]byte(`{"name":"a","version":"1","command":["/agent"],"env":{"A":"b"},"resources":{"gpus":1,"memory_bytes":1024}}`))
	f.Add([]byte("name: &a x\nversion: *a\ncommand: [*a]\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("accepted spec fails validation: %v", err)
		}
		// The canonical form parses back to the same identity.
		back, err := Parse(s.Canonical())
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", s.Canonical(), err)
		}
		if back.CID() != s.CID() {
			t.Fatalf("canonical round trip changed the identity: %s", s.Canonical())
		}
	})
}

// deterministic: false (or absent) leaves the canonical JSON, so the agent's CID, as it was;
// true is part of the identity.
func TestDeterministicKeepsOldCIDs(t *testing.T) {
	base := "name: a\nversion: \"1\"\ncommand: [x]\n"
	plain, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	off, err := Parse([]byte(base + "deterministic: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	on, err := Parse([]byte(base + "deterministic: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if off.CID() != plain.CID() || strings.Contains(string(plain.Canonical()), "deterministic") {
		t.Fatalf("deterministic: false changed the identity: %s", off.Canonical())
	}
	if !on.Deterministic || on.CID() == plain.CID() {
		t.Fatalf("deterministic: true is not part of the identity: %s", on.Canonical())
	}
}

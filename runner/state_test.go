package runner_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/runner"
)

// A state.json whose ID names another folder would make every later write (fail, sign) land
// in that folder — "../x" outside the home's runs/. It is refused, and the run is skipped.
func TestLoadStateRefusesForeignID(t *testing.T) {
	h := newHome(t)
	tests := []struct{ name, body, want string }{
		{"escapes runs/", `{"id":"../../escape","phase":"agent"}`, "belongs to another folder"},
		{"other run", `{"id":"20260101T000000Z-00000000","phase":"agent"}`, "belongs to another folder"},
		{"unknown phase", `{"id":"r1","phase":"sleeping"}`, "unknown phase"},
		{"not JSON", `{"id":`, "corrupt"},
		{"ok", `{"id":"r1","phase":"agent"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := runner.RunDir(h, "r1")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := runner.LoadState(h, "r1")
			if tt.want == "" {
				if err != nil || st.ID != "r1" {
					t.Fatalf("LoadState: %+v %v", st, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadState error %v, want %q", err, tt.want)
			}
			runs, err := runner.ListRuns(h)
			if err != nil || len(runs) != 0 {
				t.Fatalf("ListRuns listed a refused state: %+v %v", runs, err)
			}
		})
	}
}

// FuzzDecodeState: state.json is read back after crashes and hand edits; decoding never
// panics, and whatever it accepts names its own folder and a known phase, and survives a
// round trip.
func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"id":"r1","phase":"agent","executor":"docker","gpus":["GPU-aaaa"],"agent_handle":{"driver":"docker","config":{"id":"r1-agent","command":["/agent"],"limits":{"wall_clock":120000000000},"log_path":"/x"},"started":"2026-01-01T00:00:00Z","driver_state":{"container_id":"abc"}}}`))
	f.Add([]byte(`{"id":"r1","phase":"done","attestation_id":"bafkrei","telemetry":{"energy_joules":12.5}}`))
	f.Add([]byte(`{"id":"r1","phase":"evaluating","eval_attempt":2,"agent_exit":{"exit_code":137,"oom_killed":true,"finished":"2026-01-01T00:00:00Z"}}`))
	f.Add([]byte(`{"id":"../r1","phase":"agent"}`))
	f.Add([]byte(`{"id":"r1","phase":"agent","agent_handle":null}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := runner.DecodeState("r1", b)
		if err != nil {
			return
		}
		if st.ID != "r1" {
			t.Fatalf("accepted a state naming %q", st.ID)
		}
		again, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, err := runner.DecodeState("r1", again)
		if err != nil || st2.Phase != st.Phase || st2.ID != st.ID {
			t.Fatalf("round trip: %+v %v", st2, err)
		}
	})
}

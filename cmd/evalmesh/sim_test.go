package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSimSameSeedSameBytes(t *testing.T) {
	args := []string{"sim", "--nodes", "6", "--labs", "3", "--slots", "60", "--loss", "0.1", "--partition", "0.3:10m", "--crash", "1", "--seed", "7", "--json"}
	code, a, stderr := cliRun(t, args...)
	if code != 0 {
		t.Fatalf("sim: %d %s", code, stderr)
	}
	_, b, _ := cliRun(t, args...)
	if withoutWall(t, a) != withoutWall(t, b) {
		t.Fatalf("same seed, different output (wall_seconds aside):\n%s\n%s", a, b)
	}
	if !strings.Contains(stderr, "faster than real time") {
		t.Errorf("stderr %q does not report the wall time", stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(a), &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"slots", "finished", "lost_slots", "duplicate_runs", "claim_to_start_ms", "messages_per_slot", "rescored_ok", "virtual_seconds"} {
		if _, ok := res[k]; !ok {
			t.Errorf("no %q in %s", k, a)
		}
	}
	if _, ok := res["wall_seconds"]; !ok {
		t.Errorf("no wall_seconds in %s", a)
	}
	c2s, _ := res["claim_to_start_ms"].(map[string]any)
	if _, ok := c2s["p99"]; !ok {
		t.Errorf("claim_to_start_ms %v has no p99", c2s)
	}
	if res["slots"].(float64) != 60 || res["finished"].(float64) != 60 {
		t.Errorf("slots %v finished %v, want 60 and 60", res["slots"], res["finished"])
	}
	code, w, _ := cliRun(t, append(args, "--wall")...)
	if code != 0 || !strings.Contains(w, `"cpu_seconds"`) {
		t.Errorf("--wall: %d %s", code, w)
	}
	_, other, _ := cliRun(t, "sim", "--nodes", "6", "--labs", "3", "--slots", "60", "--loss", "0.1", "--seed", "8", "--json")
	if withoutWall(t, other) == withoutWall(t, a) {
		t.Error("seed 8 printed what seed 7 did")
	}
}

func TestSimFlagsRefusedAndExplained(t *testing.T) {
	code, _, stderr := cliRun(t, "sim", "--partition", "30%")
	if code == 0 || !strings.Contains(stderr, "--partition") || !strings.Contains(stderr, "FRAC:DURATION") {
		t.Errorf("bad --partition: %d %q", code, stderr)
	}
	code, _, stderr = cliRun(t, "sim", "--lease", "1m", "--heartbeat", "2m")
	if code == 0 || !strings.Contains(stderr, "heartbeat") {
		t.Errorf("heartbeat over lease: %d %q", code, stderr)
	}
	_, help, _ := cliRun(t, "sim", "--help")
	for _, want := range []string{"--lease", "--heartbeat", "--settle", "duplicate_runs", "claim_to_start_ms", "byte for byte", "evalmesh sim --nodes 20"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
}

// withoutWall is the sim's JSON output with its last field, wall_seconds, cut off: the
// bytes that must be the same for the same seed.
func withoutWall(t *testing.T, out string) string {
	t.Helper()
	i := strings.LastIndex(out, `"wall_seconds"`)
	if i < 0 {
		t.Fatalf("no wall_seconds in %s", out)
	}
	return out[:i]
}

// evalmesh sim audits prints the table for the sizes asked, and names a bad --labs.
func TestSimAuditsTable(t *testing.T) {
	code, out, stderr := cliRun(t, "sim", "audits", "--labs", "3,4", "--networks", "5", "--agents", "deterministic")
	if code != 0 {
		t.Fatalf("sim audits: %d %s", code, stderr)
	}
	if !strings.Contains(out, "| 3 | deterministic |") || !strings.Contains(out, "| 4 | deterministic |") || strings.Contains(out, "stochastic") {
		t.Fatalf("table:\n%s", out)
	}
	code, _, stderr = cliRun(t, "sim", "audits", "--labs", "2")
	if code == 0 || !strings.Contains(stderr, "--labs") {
		t.Fatalf("--labs 2: code %d, %s", code, stderr)
	}
}

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
	if a != b {
		t.Fatalf("same seed, different output:\n%s\n%s", a, b)
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
	if _, ok := res["wall_seconds"]; ok {
		t.Error("wall_seconds printed without --wall: the output would differ between runs")
	}
	c2s, _ := res["claim_to_start_ms"].(map[string]any)
	if _, ok := c2s["p99"]; !ok {
		t.Errorf("claim_to_start_ms %v has no p99", c2s)
	}
	if res["slots"].(float64) != 60 || res["finished"].(float64) != 60 {
		t.Errorf("slots %v finished %v, want 60 and 60", res["slots"], res["finished"])
	}
	code, w, _ := cliRun(t, append(args, "--wall")...)
	if code != 0 || !strings.Contains(w, `"wall_seconds"`) {
		t.Errorf("--wall: %d %s", code, w)
	}
	_, other, _ := cliRun(t, "sim", "--nodes", "6", "--labs", "3", "--slots", "60", "--loss", "0.1", "--seed", "8", "--json")
	if other == a {
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

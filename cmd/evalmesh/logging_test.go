package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestLogFormats(t *testing.T) {
	var buf bytes.Buffer
	l, err := newLogger(&buf, "json")
	if err != nil {
		t.Fatal(err)
	}
	w := &logWriter{l: l}
	fmt.Fprintf(w, "mesh: campaign %s %q: %d slots\n", "bafy", "sweep", 36)
	fmt.Fprint(w, "recovering 1 unfinished ")
	fmt.Fprint(w, "run(s)\nnot joining a network: no trust file\n")
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object a line: %q", line)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d records, want 3: %s", len(lines), buf.String())
	}
	if lines[0]["component"] != "mesh" || lines[0]["msg"] != `campaign bafy "sweep": 36 slots` || lines[0]["level"] != "INFO" {
		t.Errorf("first record %v", lines[0])
	}
	if lines[1]["msg"] != "recovering 1 unfinished run(s)" || lines[1]["component"] != nil {
		t.Errorf("a line written in pieces: %v", lines[1])
	}
	if lines[2]["msg"] != "not joining a network: no trust file" {
		t.Errorf("a sentence with a colon is not a component: %v", lines[2])
	}

	buf.Reset()
	l, _ = newLogger(&buf, "text")
	logLine(l, "datastore: compaction slow")
	if out := buf.String(); !strings.Contains(out, `msg="compaction slow" component=datastore`) || !strings.HasPrefix(out, "time=") {
		t.Errorf("text record %q", out)
	}
	buf.Reset()
	logLineAt(l, slog.LevelWarn, "net: running alone: no peers connected")
	if out := buf.String(); !strings.Contains(out, `level=WARN msg="running alone: no peers connected" component=net`) {
		t.Errorf("warning record %q", out)
	}
	if _, err := newLogger(&buf, "xml"); err == nil || !strings.Contains(err.Error(), "text or json") {
		t.Errorf("--log-format xml: %v", err)
	}
}

// A line whose message starts with "WARN " is a record at level WARN, without the marker.
func TestLogWarnLines(t *testing.T) {
	var buf bytes.Buffer
	l, err := newLogger(&buf, "json")
	if err != nil {
		t.Fatal(err)
	}
	w := &logWriter{l: l}
	fmt.Fprint(w, "network: WARN network document is not signed\nWARN alone\nmesh: WARNING is a word\n")
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 3 || recs[0]["level"] != "WARN" || recs[0]["msg"] != "network document is not signed" || recs[0]["component"] != "network" ||
		recs[1]["level"] != "WARN" || recs[1]["msg"] != "alone" || recs[2]["level"] != "INFO" {
		t.Fatalf("records %v", recs)
	}
}

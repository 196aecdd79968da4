package exampletasks_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// Every example is a valid bundle whose gold submission scores the optimum, and a permuted
// gold submission scores strictly worse (the upstream AIRS-Bench task-folder check).
func TestExamplesAreValidAndGoldIsOptimal(t *testing.T) {
	dir := t.TempDir()
	dirs, err := exampletasks.Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("%d example tasks, want at least 3", len(dirs))
	}
	metrics := map[string]bool{}
	for _, d := range dirs {
		b, err := tasks.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		m := b.Meta
		metrics[m.Metric.Name] = true
		labels, _ := os.ReadFile(b.LabelsPath())
		gold, err := os.ReadFile(filepath.Join(d, "private", "gold_submission.csv"))
		if err != nil {
			t.Fatal(err)
		}
		spec := scoring.CSVSpec{Header: m.Submission.Header, Rows: m.Submission.Rows, ScoringColumns: m.ScoringColumn}
		s, err := scoring.ScoreCSV(m.Metric.Name, gold, labels, spec)
		if err != nil || s != m.Metric.OptimalScore {
			t.Fatalf("%s: gold scores %v (%v), want the optimum %v", m.Name, s, err, m.Metric.OptimalScore)
		}
		// Rotate the answers by one row: every row now carries its neighbour's answer.
		lines := strings.Split(strings.TrimSpace(string(gold)), "\n")
		rows := lines[1:]
		perm := []string{lines[0]}
		for i := range rows {
			id := strings.SplitN(rows[i], ",", 2)[0]
			ans := strings.SplitN(rows[(i+1)%len(rows)], ",", 2)[1]
			perm = append(perm, id+","+ans)
		}
		p, err := scoring.ScoreCSV(m.Metric.Name, []byte(strings.Join(perm, "\n")+"\n"), labels, spec)
		if err != nil {
			t.Fatal(err)
		}
		worse := p < s
		if m.Metric.LowerIsBetter {
			worse = p > s
		}
		if !worse {
			t.Fatalf("%s: permuted gold scores %v, not worse than %v", m.Name, p, s)
		}
		// The agent-visible test file carries no answers.
		test, _ := os.ReadFile(filepath.Join(b.PublicDir(), "test.csv"))
		for _, c := range m.ScoringColumn {
			if strings.Contains(strings.SplitN(string(test), "\n", 2)[0], c) {
				t.Fatalf("%s: public test.csv has the scoring column %q", m.Name, c)
			}
		}
	}
	for _, want := range []string{"Accuracy", "MAE"} {
		if !metrics[want] {
			t.Errorf("no example task scored by %s", want)
		}
	}
}

// Generation is deterministic: pinned digests catch any change of data (which would change
// every bundle CID and so every attestation that names them).
func TestGenerationIsDeterministic(t *testing.T) {
	want := map[string]string{}
	for _, n := range exampletasks.Names {
		a, _ := exampletasks.Files(n)
		b, _ := exampletasks.Files(n)
		for k := range a {
			if !bytes.Equal(a[k], b[k]) {
				t.Fatalf("%s/%s differs between two generations", n, k)
			}
		}
		sum := sha256.Sum256(append(append([]byte(nil), a["public/test.csv"]...), a["private/labels.csv"]...))
		want[n] = hex.EncodeToString(sum[:8])
	}
	pinned := map[string]string{"arithmetic": pinArith, "regression": pinRegr, "sentiment": pinSent}
	for n, got := range want {
		if pinned[n] != got {
			t.Errorf("%s: data digest %s, pinned %s (update the pin only on purpose)", n, got, pinned[n])
		}
	}
	if _, err := exampletasks.Files("nope"); err == nil {
		t.Fatal("unknown task accepted")
	}
}

const (
	pinArith = "4dbff85c847e64be"
	pinRegr  = "a3a730290c445c73"
	pinSent  = "2c07024f6c84013c"
)

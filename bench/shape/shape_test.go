package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	for in, want := range map[string]int{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "a\n\n": 2} {
		if got := Lines([]byte(in)); got != want {
			t.Errorf("Lines(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 8691: "8,691", 1234567: "1,234,567"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%d) = %q, want %q", in, got, want)
		}
	}
}

var tree = []Source{
	{"go.mod.go", []byte("package m\n")},
	{"node/mesh.go", []byte(`package node

type Mesh struct {
	a, b int
	c    string
	Embedded
}

type Embedded struct{ x int }

type Alias = struct{ a, b, c, d, e, f int }

func (m *Mesh) One() {}
func (m Mesh) Two()  {}
`)},
	{"node/mesh_more.go", []byte(`package node

func (m *Mesh) Three() {
	_ = 1
	_ = 2
}

func (e Embedded) Four() {}

func free() {
}
`)},
	{"node/vstore/set.go", []byte(`package vstore

type Set[K comparable] struct{ a, b, c, d, e int }

func (s *Set[K]) Add() {}
`)},
	{"runner/run.go", []byte("package runner\n\nimport \"time\"\n\nvar now = time.Now\n")},
}

func TestMeasure(t *testing.T) {
	s := Measure(tree, 3)
	if s.NodeLines != 14+11 || s.NodeTreeLines != 14+11+5 || s.ModuleLines != 1+14+11+5+5 {
		t.Errorf("lines: node %d, node/... %d, module %d", s.NodeLines, s.NodeTreeLines, s.ModuleLines)
	}
	// An alias to a struct type is not a struct declared here; generic receivers count.
	want := Struct{Pkg: "node/vstore", Name: "Set", Pos: "node/vstore/set.go:3", Fields: 5, Methods: 1, MethodFiles: 1}
	if s.Largest != want {
		t.Errorf("largest = %+v, want %+v", s.Largest, want)
	}
	wantMesh := Struct{Pkg: "node", Name: "Mesh", Pos: "node/mesh.go:3", Fields: 4, Methods: 3, MethodFiles: 2}
	if len(s.Mesh) != 1 || s.Mesh[0] != wantMesh {
		t.Errorf("Mesh = %+v, want %+v", s.Mesh, wantMesh)
	}
	got := ""
	for _, f := range s.Longest {
		got += f.Name + " " + f.Pos + " " + string(rune('0'+f.Lines)) + "; "
	}
	if wantLong := "node.(*Mesh).Three node/mesh_more.go:3 4; node.free node/mesh_more.go:10 2; node.(*Mesh).One node/mesh.go:13 1; "; got != wantLong {
		t.Errorf("longest = %s\nwant      %s", got, wantLong)
	}
	if len(s.Clock) != 0 {
		t.Errorf("clock uses outside node/... and protocol/... counted: %+v", s.Clock)
	}
}

func TestClockUses(t *testing.T) {
	src := []Source{
		{"node/a.go", []byte(`package node

import stdtime "time"

type clock interface{ Now() stdtime.Time }

func f(c clock) stdtime.Duration {
	now := stdtime.Now // passed as a value: still the wall clock
	_ = c.Now()
	stdtime.Sleep(stdtime.Second)
	return stdtime.Since(now())
}
`)},
		{"protocol/b.go", []byte(`package protocol

import "time"

func g(at time.Time) time.Time { return at.Add(time.Minute) }

func h() <-chan time.Time { return time.After(time.Unix(0, 0).Sub(time.Now())) }
`)},
		{"attest/c.go", []byte(`package attest

import (
	ctx "context"
	"time"
)

func k(c ctx.Context) {
	_, cancel := ctx.WithTimeout(c, time.Second) // wall clock: marked, still counted
	defer cancel()
	_, _ = ctx.WithCancel(c)
}
`)},
	}
	var got []string
	for _, u := range Measure(src, 10).Clock {
		got = append(got, u.Func+"@"+u.Pos)
	}
	want := "time.Now@node/a.go:8 time.Sleep@node/a.go:10 time.Since@node/a.go:11 time.After@protocol/b.go:7 time.Now@protocol/b.go:7 context.WithTimeout@attest/c.go:9"
	if strings.Join(got, " ") != want {
		t.Errorf("clock uses\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// What docs/imports-deny.sh printed for HEAD's rules over ec885cf, less two missing subjects.
const denyOut = `rules.txt: rules name agentspec, which is no package in this tree
rules.txt: rules name node/diskstore, which is no package in this tree
rules.txt:57: protocol depends on runner (and 4 more), which the rule
	protocol          only-> agentspec attest scoring
forbids; it arrives through
	protocol -> runner
rules.txt:58: protocol depends on github.com/NVIDIA/go-nvml/pkg/nvml, which the rule
	protocol          !->    outside-io
forbids; it arrives through
	protocol -> runner -> runner/gpu -> github.com/NVIDIA/go-nvml/pkg/nvml
`

func TestParseDeny(t *testing.T) {
	d := ParseDeny(denyOut, 1)
	if d.Why != "" || len(d.Broken) != 2 || d.Forbidden() != 6 || strings.Join(d.Missing, " ") != "agentspec node/diskstore" {
		t.Fatalf("ParseDeny = %+v", d)
	}
	want := Broken{Rule: "protocol only-> agentspec attest scoring", Pkg: "protocol", Dep: "runner", More: 4, Path: "protocol -> runner"}
	if d.Broken[0] != want {
		t.Errorf("first = %+v, want %+v", d.Broken[0], want)
	}
	// A go list failure is neither a rule nor a subject: it must not read as a clean run.
	d = ParseDeny("go: updates to go.mod needed\n", 1)
	if d.Why == "" || !strings.Contains(Report([]Tree{{Label: "x", Deny: d, Own: d}}, "r", "w", 3, false), "did not finish") {
		t.Errorf("a failed run reads as clean: %+v", d)
	}
}

// TestRunDeny runs the repository's own script, as the tool does, over a module of two
// packages whose one rule is broken, and over the same module with the rule kept.
func TestRunDeny(t *testing.T) {
	script, err := os.ReadFile("../../docs/imports-deny.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("a/a.go", "package a\n\nimport _ \"example.com/m/b\"\n")
	write("b/b.go", "package b\n")
	write("b/b_test.go", "package b\n")
	write("docs/design.md", "")
	rules := filepath.Join(t.TempDir(), "rules.txt")
	write(rules, "a only-> -\nb only-> -\ngone only-> -\n")
	d := runDeny(dir, script, rules)
	if d.Why != "" || d.Exit != 1 || len(d.Broken) != 1 || d.Broken[0].Pkg != "a" || d.Broken[0].Dep != "b" || d.Broken[0].Path != "a -> b" ||
		strings.Join(d.Missing, " ") != "gone" {
		t.Errorf("broken rule: %+v", d)
	}
	write(rules, "a only-> b\n")
	if d := runDeny(dir, script, rules); d.Why != "" || d.Exit != 0 || len(d.Broken) != 0 || len(d.Missing) != 0 {
		t.Errorf("kept rule: %+v", d)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Errorf("the run wrote into the tree: %d entries", len(entries))
	}
	files, err := readTree(dir)
	if err != nil || len(files) != 2 {
		t.Errorf("readTree = %d files, %v; want a/a.go and b/b.go", len(files), err)
	}
}

func TestParseWallclock(t *testing.T) {
	out := "wall clock used directly where the injected clock belongs:\n  node/a.go:3: time.Now\n  node/b.go:9: context.WithTimeout\nTime that decides something (a timer,\n  must come from the injected clock: ...\n"
	if w := ParseWallclock(out, 1); w.Why != "" || strings.Join(w.Unmarked, "|") != "node/a.go:3: time.Now|node/b.go:9: context.WithTimeout" {
		t.Errorf("ParseWallclock = %+v", w)
	}
	if w := ParseWallclock("", 0); !w.Ran || w.Why != "" || len(w.Unmarked) != 0 {
		t.Errorf("clean run: %+v", w)
	}
	if w := ParseWallclock("wallclock: open x: no such file\n", 2); w.Why == "" {
		t.Errorf("a failed run read as a count: %+v", w)
	}
}

// The repository's own docs/wallclock.go, built and run over a tree, lists the unmarked
// uses only; every use, marked or not, is counted by Measure.
func TestRunWallclock(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "wallclock")
	if out, err := exec.Command("go", "build", "-o", bin, "../../docs/wallclock.go").CombinedOutput(); err != nil {
		t.Fatalf("build docs/wallclock.go: %v\n%s", err, out)
	}
	dir := t.TempDir()
	src := `package node

import (
	"context"
	"time"
)

func f(c context.Context) time.Time {
	_, cancel := context.WithTimeout(c, time.Second)
	defer cancel()
	_, stop := context.WithDeadline(c, time.Now()) // wall clock: a dial
	defer stop()
	return time.Now()
}
`
	if err := os.MkdirAll(filepath.Join(dir, "node"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "node", "a.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	w := runWallclock(dir, bin)
	if want := "node/a.go:13: time.Now|node/a.go:9: context.WithTimeout"; !w.Ran || w.Why != "" || strings.Join(w.Unmarked, "|") != want {
		t.Errorf("runWallclock = %+v, want unmarked %s", w, want)
	}
	if n := len(Measure([]Source{{"node/a.go", []byte(src)}}, 1).Clock); n != 4 {
		t.Errorf("Measure counted %d uses, want all 4", n)
	}
}

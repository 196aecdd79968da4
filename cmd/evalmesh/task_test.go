package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/internal/progress"
	"github.com/evalmesh/evalmesh/tasks"
)

const svampFixture = "../../tasks/testdata/airs-bench/MathQuestionAnsweringSVAMPAccuracy"

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"--home", filepath.Join(t.TempDir(), "home")}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

func TestTaskPackKuboVector(t *testing.T) {
	out, errs, code := runCLI(t, "task", "pack", "--unchecked", svampFixture)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.TrimSpace(out) != "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi" {
		t.Fatalf("got %q", out)
	}
	// Without --unchecked, a folder that is not a bundle is refused with a hint.
	_, errs, code = runCLI(t, "task", "pack", svampFixture)
	if code == 0 || !strings.Contains(errs, "--unchecked") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// svampSource is what `task import` takes for the SVAMP fixture: an AIRS-Bench task folder
// (the fixture's files, description as its project_description.md, a stand-in evaluate.py)
// and a prepared data folder holding its labels.
func svampSource(t *testing.T, description string) (src, data string) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "MathQuestionAnsweringSVAMPAccuracy")
	os.Mkdir(src, 0o755)
	ents, _ := os.ReadDir(svampFixture)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(svampFixture, e.Name()))
		os.WriteFile(filepath.Join(src, e.Name()), b, 0o644)
	}
	os.WriteFile(filepath.Join(src, "project_description.md"), []byte(description), 0o644)
	os.WriteFile(filepath.Join(src, "evaluate.py"), []byte("# stand-in\n"), 0o644)
	data = t.TempDir()
	os.Mkdir(filepath.Join(data, "test_with_labels"), 0o755)
	gold, _ := os.ReadFile(filepath.Join(svampFixture, "gold_submission.csv"))
	os.WriteFile(filepath.Join(data, "test_with_labels", "labels.csv"), gold, 0o644)
	return src, data
}

// import → check → pack --car → inspect --json → unpack → pack again: same CID.
func TestTaskCommandsEndToEnd(t *testing.T) {
	src, data := svampSource(t, "# SVAMP\nAnswer each question.\n")

	work := t.TempDir()
	bundle := filepath.Join(work, "svamp")
	if _, errs, code := runCLI(t, "task", "import", src, "--data", data, "--out", bundle); code != 0 {
		t.Fatalf("import: %s", errs)
	}
	out, errs, code := runCLI(t, "--json", "task", "check", bundle)
	if code != 0 {
		t.Fatalf("check exit %d: %s %s", code, out, errs)
	}
	var rep struct {
		OK   bool `json:"ok"`
		Gold struct {
			Score    float64 `json:"score"`
			Permuted []struct {
				OK bool `json:"ok"`
			} `json:"permuted"`
		} `json:"gold"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.OK || rep.Gold.Score != 1 || len(rep.Gold.Permuted) == 0 {
		t.Fatalf("check report: %v %s", err, out)
	}

	car := filepath.Join(work, "svamp.car")
	out, errs, code = runCLI(t, "task", "pack", bundle, "--car", car)
	if code != 0 {
		t.Fatalf("pack: %s", errs)
	}
	cid := strings.TrimSpace(out)

	out, errs, code = runCLI(t, "task", "inspect", car, "--json")
	if code != 0 {
		t.Fatalf("inspect: %s", errs)
	}
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(err)
	}
	if info["cid"] != cid || info["name"] != "MathQuestionAnsweringSVAMPAccuracy" || info["category"] != "Math" {
		t.Errorf("inspect: %s", out)
	}
	metric, _ := info["metric"].(map[string]any)
	sota, _ := info["sota"].(map[string]any)
	if metric["name"] != "Accuracy" || metric["lower_is_better"] != false || metric["optimal_score"] != 1.0 {
		t.Errorf("metric: %v", metric)
	}
	if sota["score"] != 0.942 || sota["year"] != 2026.0 || !strings.HasPrefix(sota["paper"].(string), "Achieving") {
		t.Errorf("sota: %v", sota)
	}
	// inspect of the folder gives the same CID.
	out, _, _ = runCLI(t, "--json", "task", "inspect", bundle)
	if !strings.Contains(out, cid) {
		t.Errorf("folder inspect: %s", out)
	}

	dst := filepath.Join(work, "unpacked")
	if _, errs, code := runCLI(t, "task", "unpack", car, dst); code != 0 {
		t.Fatalf("unpack: %s", errs)
	}
	out, _, _ = runCLI(t, "task", "pack", dst)
	if strings.TrimSpace(out) != cid {
		t.Errorf("unpacked bundle packs to %s, want %s", out, cid)
	}
	// A second unpack into the now non-empty folder is refused.
	if _, errs, code := runCLI(t, "task", "unpack", car, dst); code == 0 || !strings.Contains(errs, "not empty") {
		t.Errorf("unpack over a bundle: exit %d %s", code, errs)
	}
	// --max-size below the bundle's size is refused before writing.
	small := filepath.Join(work, "small")
	if _, errs, code := runCLI(t, "task", "unpack", car, small, "--max-size", "1KiB"); code == 0 || !strings.Contains(errs, "max-size") {
		t.Errorf("max-size: exit %d %s", code, errs)
	}
	if _, err := os.Stat(small); err == nil {
		t.Error("refused unpack left a folder")
	}
}

func TestTaskCheckFailsWithExitCode(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "task.yaml"), []byte("name: x\n"), 0o644)
	out, _, code := runCLI(t, "task", "check", dir)
	if code != 1 || !strings.Contains(out, "prompt.md: missing") {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"123": 123, "64GiB": 64 << 30, "10MB": 10e6, "1.5G": 3 << 29, "2k": 2048} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1PB", "0", "0.1", "NaN", "nanGiB", "Inf", "1e30"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// unpack of a folder is a checked copy: same CID, and a symlink in it is refused.
func TestTaskUnpackFolder(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "copy")
	out, errs, code := runCLI(t, "--json", "task", "unpack", svampFixture, dst)
	if code != 0 || !strings.Contains(out, "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "gold_submission.csv")); err != nil || !strings.HasPrefix(string(b), "Answer\n") {
		t.Fatalf("copy: %v", err)
	}
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(src, "evil"))
	parent := t.TempDir()
	_, errs, code = runCLI(t, "task", "unpack", src, filepath.Join(parent, "x"))
	if code == 0 || !strings.Contains(errs, "evil") {
		t.Fatalf("symlink: exit %d %s", code, errs)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("left %v", ents)
	}
}

// The bar is drawn only on a terminal: a buffer (or a pipe, in CI) gets no progress.
func TestProgressOnlyOnTerminal(t *testing.T) {
	if fn, _ := progressFor(&bytes.Buffer{}, 1<<40, "x"); fn != nil {
		t.Error("progress bar on a buffer")
	}
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	if fn, _ := progressFor(w, 1<<40, "x"); fn != nil {
		t.Error("progress bar on a pipe")
	}
}

// The task.yaml an import writes lets the built-in scorer read the submissions upstream's
// evaluate.py reads (APPS code1..code5, CodeXGlue query,rankings), not only one-column ones.
func TestTaskImportSpecScoresUpstreamShapedSubmissions(t *testing.T) {
	cases := []struct {
		task, labels, sub string
		want              float64
	}{
		{"CodeGenerationAPPSPassAt5", "input_output\nx\ny\n", "code1,code2,code3,code4,code5\n1,0,0,0,0\n0,0,0,0,0\n", 0.5},
		{"CodeRetrievalCodeXGlueMRR", "query,id\nq1,1\nq2,2\n", "query,rankings\nq1,\"[1, 2]\"\nq2,\"[1, 2]\"\n", 0.75},
		{"MathQuestionAnsweringSVAMPAccuracy", "question_concat,Answer\na,1\nb,2\n", "Answer\n1\n3\n", 0.5},
	}
	for _, tc := range cases {
		t.Run(tc.task, func(t *testing.T) {
			m, err := tasks.LoadMeta(filepath.Join("../../tasks/testdata/airs-bench", tc.task))
			if err != nil {
				t.Fatal(err)
			}
			// The fixtures' row counts are the real test sizes; these stand-ins are 2 rows.
			got, err := scoreCSV(m.Name, m.Evaluator.Metric, []byte(tc.sub), []byte(tc.labels), m.Submission.Header, 0, m.ScoringColumn)
			if err != nil || got != tc.want {
				t.Fatalf("score %v, %v; want %v (header %q, scoring %q)", got, err, tc.want, m.Submission.Header, m.ScoringColumn)
			}
		})
	}
}

// On a terminal, a large enough job draws its bar on the command's own stderr (the writer
// run was given, not the process's os.Stderr), and stdout still holds only the CID. A pipe
// stands in for the terminal here; TestProgressOnlyOnTerminal checks the real test.
func TestProgressBarDrawnOnTerminal(t *testing.T) {
	oldTerm, oldMin := progress.IsTerminal, progressMin
	defer func() { progress.IsTerminal, progressMin = oldTerm, oldMin }()
	progress.IsTerminal = func(int) bool { return true }

	pack := func(min int64) (stdout, bar string) {
		progressMin = min
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var got bytes.Buffer
		done := make(chan struct{})
		go func() { io.Copy(&got, r); close(done) }()
		var out bytes.Buffer
		code := run([]string{"--home", filepath.Join(t.TempDir(), "h"), "task", "pack", "--unchecked", svampFixture}, &out, w)
		w.Close()
		<-done
		if code != 0 {
			t.Fatalf("pack exit %d: %s", code, got.String())
		}
		return out.String(), got.String()
	}
	out, bar := pack(1)
	if strings.TrimSpace(out) != "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi" {
		t.Errorf("stdout %q: want only the CID", out)
	}
	if !strings.Contains(bar, "packing") || !strings.Contains(bar, "100%") {
		t.Errorf("no bar on the terminal: %q", bar)
	}
	// Below the size threshold, no bar even on a terminal.
	if _, bar := pack(1 << 40); bar != "" {
		t.Errorf("bar drawn for a small job: %q", bar)
	}
}

// A bad --max-size is refused, naming the flag, before anything is read or written
// (NaN and 0 once fell through to the 64 GiB default).
func TestTaskUnpackBadMaxSize(t *testing.T) {
	for _, v := range []string{"NaN", "0", "lots"} {
		parent := t.TempDir()
		_, errs, code := runCLI(t, "task", "unpack", svampFixture, filepath.Join(parent, "out"), "--max-size", v)
		if code == 0 || !strings.Contains(errs, "--max-size") || !strings.Contains(errs, v) {
			t.Errorf("--max-size %s: exit %d %q", v, code, errs)
		}
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Errorf("--max-size %s: left %v", v, ents)
		}
	}
}

// `task import --gpus 0 --wall-clock 2h` makes a CPU-only variant with a 2-hour budget.
func TestTaskImportLimitsFlags(t *testing.T) {
	src := filepath.Join(t.TempDir(), "MathQuestionAnsweringSVAMPAccuracy")
	os.Mkdir(src, 0o755)
	meta, _ := os.ReadFile(filepath.Join(svampFixture, "metadata.yaml"))
	os.WriteFile(filepath.Join(src, "metadata.yaml"), meta, 0o644)
	os.WriteFile(filepath.Join(src, "project_description.md"), []byte("# SVAMP\n"), 0o644)
	bundle := filepath.Join(t.TempDir(), "svamp")
	if _, errs, code := runCLI(t, "task", "import", src, "--out", bundle, "--gpus", "0", "--wall-clock", "2h"); code != 0 {
		t.Fatalf("import: %s", errs)
	}
	m, err := tasks.LoadMeta(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if m.Limits.GPUs != 0 || m.Limits.WallClockSeconds != 7200 {
		t.Fatalf("limits %+v, want 0 GPUs and 7200 s", m.Limits)
	}
	if _, errs, code := runCLI(t, "task", "import", src, "--out", filepath.Join(t.TempDir(), "x"), "--wall-clock", "10ms"); code == 0 || !strings.Contains(errs, "--wall-clock") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

package runner

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The output helpers on a folder a hostile agent could leave: each entry kind is refused
// with its reason by OpenOutputFile, left out by CollectOutput and named in its report.
func TestCollectOutputRefusesWhatItMustNotRead(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "output")
	secret := filepath.Join(t.TempDir(), "labels.csv")
	write := func(p, data string) {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(secret, "id,label\n1,secret\n")
	write(filepath.Join(src, "good.csv"), "id,answer\n1,42\n")
	write(filepath.Join(src, "linked.csv"), "id,answer\n")
	os.Link(filepath.Join(src, "linked.csv"), filepath.Join(src, "linked2.csv"))
	os.Symlink(secret, filepath.Join(src, "symlink.csv"))
	if err := syscall.Mkfifo(filepath.Join(src, "fifo.csv"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(src, OutputReportFile), `{"refused":[]}`)
	os.Mkdir(filepath.Join(src, "sub"), 0o755)
	write(filepath.Join(src, "sub", "big.bin"), strings.Repeat("x", 100))

	want := map[string]string{
		"symlink.csv": "is a symbolic link (to \"" + secret + "\")",
		"fifo.csv":    "is a FIFO",
		"linked.csv":  "has 2 hard links",
		"linked2.csv": "has 2 hard links",
	}
	for name, words := range want {
		if f, _, why := OpenOutputFile(src, name, 0); f != nil || !strings.Contains(why, words) {
			t.Errorf("OpenOutputFile %s: %q, want %q", name, why, words)
		}
	}
	if _, _, why := OpenOutputFile(src, "good.csv", 5); !strings.Contains(why, "over the 5-byte limit") {
		t.Errorf("oversized: %q", why)
	}

	// A limit that lets good.csv (15 bytes) through but not sub/big.bin (100 more).
	if err := CollectOutput(src, dst, 50, false); err != nil {
		t.Fatal(err)
	}
	rep := ReadOutputReport(dst)
	if rep == nil || !rep.Truncated {
		t.Fatalf("report %+v, want truncated", rep)
	}
	want[OutputReportFile] = "keeps for itself"
	want[filepath.Join("sub", "big.bin")] = "past the task's output limit of 50 bytes"
	for name, words := range want {
		if why := rep.refusedFor(name); !strings.Contains(why, words) {
			t.Errorf("report for %s: %q, want %q", name, why, words)
		}
		if name != OutputReportFile {
			if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
				t.Errorf("%s was copied", name)
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(dst, "good.csv")); err != nil || string(data) != "id,answer\n1,42\n" {
		t.Errorf("good.csv: %q %v", data, err)
	}
	// The evaluator's side: the refusal recorded at collection is the submission's reason.
	if _, why := readSubmission(dst, "symlink.csv"); !strings.Contains(why, "reached the task's output limit of 50 bytes") {
		t.Errorf("readSubmission after a truncated collection: %q", why)
	}
}

func TestCheckOutputSizeMarksAnOversizedFolder(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "submission.csv"), []byte("id,answer\n1,42\n"), 0o644)
	if err := CheckOutputSize(dir, 1<<10); err != nil || ReadOutputReport(dir) != nil {
		t.Fatalf("within the limit: %v, report %+v", err, ReadOutputReport(dir))
	}
	os.WriteFile(filepath.Join(dir, "fill.bin"), make([]byte, 2<<10), 0o644)
	if err := CheckOutputSize(dir, 1<<10); err != nil {
		t.Fatal(err)
	}
	if _, why := readSubmission(dir, "submission.csv"); !strings.Contains(why, "output limit of 1024 bytes") {
		t.Fatalf("readSubmission of an oversized output: %q", why)
	}
}

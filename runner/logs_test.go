package runner

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// An agent that printed gigabytes: the archive keeps the head and the tail of its log and
// says what it left out, and the runner never reads the whole file (a sparse 8 GiB log would
// take minutes and all memory to read).
func TestTarLogsCapsEachLog(t *testing.T) {
	old := MaxLogBytes
	MaxLogBytes = 1 << 20
	t.Cleanup(func() { MaxLogBytes = old })
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "evaluator.log"), []byte("small log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 30
	big.WriteString("HEAD-OF-LOG\n")
	if err := big.Truncate(size); err != nil {
		t.Fatal(err)
	}
	big.WriteAt([]byte("TAIL-OF-LOG\n"), size-12)
	big.Close()

	a, err := tarLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(a)) > MaxLogBytes+64<<10 {
		t.Fatalf("archive is %d bytes, cap %d", len(a), MaxLogBytes)
	}
	files := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[hdr.Name] = string(b)
	}
	if files["evaluator.log"] != "small log\n" {
		t.Fatalf("small log %q", files["evaluator.log"])
	}
	got := files["agent.log"]
	want := "[evalmesh: " + strconv.FormatInt(size-MaxLogBytes, 10) + " bytes of this log left out]"
	if !strings.HasPrefix(got, "HEAD-OF-LOG\n") || !strings.HasSuffix(got, "TAIL-OF-LOG\n") || !strings.Contains(got, want) {
		t.Fatalf("capped log: %d bytes, head %q, tail %q, marker %v", len(got), got[:12], got[len(got)-12:], strings.Contains(got, want))
	}
	if b, _ := tarLogs(dir); !bytes.Equal(a, b) {
		t.Fatal("the same logs gave two archives")
	}
}

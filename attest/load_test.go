package attest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/testutil"
)

// A named pipe called *.json in the attestations folder used to hang the ledger forever
// (opening a FIFO for reading waits for a writer). It is refused by its type, unopened.
func TestReadEnvelopeDirRefusesAPipeWithoutWaiting(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	env, id := f.signRun(t, 0, "pipe", 0.5)
	if err := os.WriteFile(filepath.Join(dir, "good.json"), env, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o644); err != nil {
		t.Skipf("cannot make a named pipe here: %v", err)
	}
	if err := os.Symlink("good.json", filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pipe.json", filepath.Join(dir, "link-to-pipe.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "folder.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	type result struct {
		files   []EnvelopeFile
		refused []Refusal
		err     error
	}
	done := make(chan result, 1)
	go func() {
		files, refused, err := ReadEnvelopeDir(dir)
		done <- result{files, refused, err}
	}()
	var r result
	testutil.WaitFor(t, 20*time.Second, "ReadEnvelopeDir to return with a named pipe in the folder", func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.files) != 2 || EnvelopeID(r.files[0].Data) != id || EnvelopeID(r.files[1].Data) != id {
		t.Fatalf("files %d, want good.json and the symlink to it", len(r.files))
	}
	refused := map[string]Refusal{}
	for _, x := range r.refused {
		refused[filepath.Base(x.File)] = x
	}
	for name, kind := range map[string]string{"pipe.json": "named pipe", "link-to-pipe.json": "named pipe", "folder.json": "folder"} {
		x, ok := refused[name]
		if !ok || x.Reason != "not a regular file" || !strings.Contains(x.Detail, kind) {
			t.Errorf("%s: refusal %+v, want not a regular file (%s)", name, x, kind)
		}
	}
	if _, err := ReadEnvelopeFile(filepath.Join(dir, "pipe.json")); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("ReadEnvelopeFile of a pipe: %v", err)
	}
}

// ReadEnvelopeFile reads at most a byte past the limit, whatever the file's size.
func TestReadEnvelopeFileIsBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "huge.json")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 64 GiB on paper, nothing on disk. Reading it whole would exhaust memory.
	if err := fh.Truncate(64 << 30); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	fh.Close()
	_, err = ReadEnvelopeFile(p)
	var big errTooLarge
	if !errors.As(err, &big) || !strings.Contains(err.Error(), "larger than any attestation") {
		t.Fatalf("ReadEnvelopeFile of 64 GiB: %v", err)
	}
}

package tasks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A file that grows or shrinks while Pack reads it gives no CID: the pack fails naming it.
// The change happens between two chunk reads (the afterPackRead seam), so the test is
// deterministic; without the check the DAG would mix old and new bytes.
func TestPackRefusesFileChangedMidRead(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(f *os.File) error
	}{
		{"truncated", func(f *os.File) error { return f.Truncate(ChunkSize / 2) }},
		{"extended", func(f *os.File) error { _, err := f.WriteAt([]byte("more"), 3*ChunkSize); return err }},
		// Same size, new bytes: only the times say so.
		{"rewritten in place", func(f *os.File) error { _, err := f.WriteAt([]byte("X"), ChunkSize+1); return err }},
	} {
		for _, par := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: "/parallel"}[par], func(t *testing.T) {
				if par {
					withParallelMinChunks(t, 1) // workers pread ahead; the change lands under them
				}
				dir := t.TempDir()
				p := filepath.Join(dir, "data", "big.bin")
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, make([]byte, 3*ChunkSize), 0o644); err != nil {
					t.Fatal(err)
				}
				// mtime granularity: make sure the change moves the clock the file records.
				old := time.Now().Add(-time.Hour)
				os.Chtimes(p, old, old)
				changed := false
				afterPackRead = func(rel string, read int64) {
					if rel != "data/big.bin" || changed || read < ChunkSize {
						return
					}
					changed = true
					f, err := os.OpenFile(p, os.O_WRONLY, 0)
					if err != nil {
						t.Error(err)
						return
					}
					defer f.Close()
					if err := tt.change(f); err != nil {
						t.Error(err)
					}
				}
				t.Cleanup(func() { afterPackRead = nil })
				_, err := Pack(context.Background(), dir, NewHashOnlyDAG(), PackOptions{Unchecked: true})
				var ce *ChangedError
				if !changed || !errors.As(err, &ce) || ce.Path != "data/big.bin" || !strings.Contains(err.Error(), "changed while it was being packed") {
					t.Fatalf("changed %v, Pack error %v: want a ChangedError naming data/big.bin", changed, err)
				}
				// Left alone, the same file packs.
				afterPackRead = nil
				if _, err := Pack(context.Background(), dir, NewHashOnlyDAG(), PackOptions{Unchecked: true}); err != nil {
					t.Fatalf("pack of the settled file: %v", err)
				}
			})
		}
	}
}

// A FIFO anywhere in a bundle (even named task.yaml, which Open reads first) is refused
// without being opened: opening a FIFO blocks until a writer comes, forever.
func TestBundleFIFORefusedBeforeOpen(t *testing.T) {
	for _, name := range []string{"task.yaml", "prompt.md", "public/train.csv", "private/labels.csv"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"public", "private"} {
				os.MkdirAll(filepath.Join(dir, d), 0o755)
			}
			os.WriteFile(filepath.Join(dir, "task.yaml"), []byte("name: x\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("Solve.\n"), 0o644)
			p := filepath.Join(dir, filepath.FromSlash(name))
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			done := make(chan error, 3)
			go func() {
				_, err := Pack(context.Background(), dir, NewHashOnlyDAG(), PackOptions{Unchecked: true})
				done <- err
				_, err = Open(dir)
				done <- err
				_, err = CopyBundle(context.Background(), dir, filepath.Join(t.TempDir(), "copy"), UnpackOptions{})
				done <- err
			}()
			for i, what := range []string{"Pack", "Open", "CopyBundle"} {
				select {
				case err := <-done:
					switch {
					case what == "Open" && name == "task.yaml" && err == nil:
						t.Fatalf("Open accepted a FIFO task.yaml")
					case what != "Open" && (err == nil || !strings.Contains(err.Error(), "named pipe")):
						t.Fatalf("%s: %v, want a refusal of the named pipe", what, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s (call %d) hangs on the FIFO %s", what, i, name)
				}
			}
		})
	}
}

// `task import --data` refuses a top-level train/ (or test_with_labels/) that is a link:
// it would copy whatever the link points to into the bundle.
func TestImportDataRefusesSymlinkedTopFolder(t *testing.T) {
	for _, top := range []string{"train", "test_with_labels"} {
		t.Run(top, func(t *testing.T) {
			src := standInAIRS(t, "MathQuestionAnsweringSVAMPAccuracy")
			data := t.TempDir()
			elsewhere := t.TempDir()
			os.WriteFile(filepath.Join(elsewhere, "secret.csv"), []byte("a,b\n1,2\n"), 0o644)
			for _, d := range []string{"train", "test", "test_with_labels"} {
				if d == top {
					if err := os.Symlink(elsewhere, filepath.Join(data, d)); err != nil {
						t.Fatal(err)
					}
					continue
				}
				os.MkdirAll(filepath.Join(data, d), 0o755)
				os.WriteFile(filepath.Join(data, d, d+".csv"), []byte("q,a\n1,2\n"), 0o644)
			}
			parent := t.TempDir()
			_, err := ImportAIRS(src, filepath.Join(parent, "b"), ImportOptions{DataDir: data})
			if err == nil || !strings.Contains(err.Error(), filepath.Join(data, top)) || !strings.Contains(err.Error(), "symlink") {
				t.Fatalf("import with a linked %s/: %v, want a refusal naming it", top, err)
			}
			assertNothingWritten(t, parent)
		})
	}
}

// Readers that open a bundle's files by name (score --tasks reads task.yaml through
// LoadMeta; check reads the permuted golds it globs) refuse a FIFO instead of hanging.
func TestReadersRefuseFIFOByName(t *testing.T) {
	withFIFO := func(t *testing.T, p string) {
		t.Helper()
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	within := func(t *testing.T, what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s hangs on a FIFO", what)
		}
	}
	t.Run("LoadMeta task.yaml", func(t *testing.T) {
		dir := t.TempDir()
		withFIFO(t, filepath.Join(dir, "task.yaml"))
		var err error
		within(t, "LoadMeta", func() { _, err = LoadMeta(dir) })
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("LoadMeta: %v, want a refusal of the named pipe", err)
		}
	})
	t.Run("Check permuted gold", func(t *testing.T) {
		dir := svampBundle(t, func(b []byte) []byte { return b })
		gold := ""
		for _, g := range goldNames {
			if _, err := os.Lstat(filepath.Join(dir, g)); err == nil {
				gold = filepath.Join(dir, g)
			}
		}
		if gold == "" {
			t.Fatal("the SVAMP bundle has no gold submission")
		}
		withFIFO(t, filepath.Join(filepath.Dir(gold), "gold_submission_permuted_9.csv"))
		within(t, "Check", func() { Check(dir, CheckOptions{Score: scoreCSV}) })
	})
}

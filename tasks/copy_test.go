package tasks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CopyBundle: the copy packs to the source's CID, hidden names are skipped as pack skips
// them, and what Unpack would refuse is refused before anything is written.
func TestCopyBundle(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	writeRandom(t, filepath.Join(src, "big.bin"), 3*ChunkSize+9, 5)
	os.MkdirAll(filepath.Join(src, "public", "empty"), 0o755)
	os.WriteFile(filepath.Join(src, "public", "a.csv"), []byte("a\n1\n"), 0o644)
	os.WriteFile(filepath.Join(src, ".secret"), []byte("not part of the bundle"), 0o644)
	want, err := Pack(ctx, src, NewHashOnlyDAG(), PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x", "copy")
	got, err := CopyBundle(ctx, src, out, UnpackOptions{})
	if err != nil || !got.Equals(want) {
		t.Fatalf("copy: %s %v, want %s", got, err, want)
	}
	if again, _ := Pack(ctx, out, NewHashOnlyDAG(), PackOptions{Unchecked: true}); !again.Equals(want) {
		t.Errorf("the copy packs to %s, want %s", again, want)
	}
	if _, err := os.Stat(filepath.Join(out, ".secret")); err == nil {
		t.Error("hidden file copied")
	}

	t.Run("over max-size", func(t *testing.T) {
		parent := t.TempDir()
		_, err := CopyBundle(ctx, src, filepath.Join(parent, "out"), UnpackOptions{MaxSize: 100})
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-size 100") {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
	t.Run("name unpack refuses", func(t *testing.T) {
		bad := t.TempDir()
		os.Mkdir(filepath.Join(bad, "public"), 0o755)
		os.WriteFile(filepath.Join(bad, "public", `a\b`), nil, 0o644)
		parent := t.TempDir()
		_, err := CopyBundle(ctx, bad, filepath.Join(parent, "out"), UnpackOptions{})
		var ue *UnsafeError
		if !errors.As(err, &ue) || ue.Path != `public/a\b` {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
	t.Run("too many entries", func(t *testing.T) {
		parent := t.TempDir()
		_, err := CopyBundle(ctx, src, filepath.Join(parent, "out"), UnpackOptions{MaxEntries: 2})
		var ue *UnsafeError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "more than 2") {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
	t.Run("source changes during the copy", func(t *testing.T) {
		parent := t.TempDir()
		changed := false
		_, err := CopyBundle(ctx, src, filepath.Join(parent, "out"), UnpackOptions{Progress: func(int64) {
			if !changed {
				changed = true
				os.WriteFile(filepath.Join(src, "public", "a.csv"), []byte("a\n2\n"), 0o644)
			}
		}})
		if err == nil || !strings.Contains(err.Error(), "changed while it was copied") {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
}

package runner

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The per-process digest cache follows the folder: a changed file gives the new digest.
func TestWeightsDigestCacheFollowsChanges(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "w.bin")
	if err := os.WriteFile(f, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &Runner{}
	ctx := context.Background()
	a, err := r.weightsDigest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := r.weightsDigest(ctx, dir); again != a {
		t.Fatalf("digest changed without a change: %s %s", a, again)
	}
	if err := os.WriteFile(f, []byte("two!"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := r.weightsDigest(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := WeightsDigest(ctx, dir)
	if b == a || b != want {
		t.Fatalf("after a change: cached %s, before %s, fresh %s", b, a, want)
	}
}

package node

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/runner"
)

func segBytes(t *testing.T, n *Node) int64 {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(n.home.PackBlocksDir(), "*.seg"))
	var total int64
	for _, s := range segs {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	return total
}

// TestRepoGC: over the API, gc --dry-run reports and removes nothing; gc removes the blocks
// of an unpinned bundle (pack segments compacted: the disk space comes back), an abandoned
// .unpack-* folder and a finished run's workspace, and keeps the pinned bundle whole, an
// unfinished run's workspace and a fresh .unpack-* folder.
func TestRepoGC(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	opts.Blockstore = "pack"
	h := newHome(t)
	d := startDaemonWith(t, h, opts)
	keep := map[string][]byte{"keep.bin": randomBytes(1, 700<<10)}
	keepDir := writeTree(t, map[string]string{"keep.bin": string(keep["keep.bin"])})
	keepRoot, err := d.c.Add(ctx, keepDir, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	dropDir := writeTree(t, map[string]string{"drop.bin": string(randomBytes(2, 3<<20))})
	dropRoot, err := d.c.Add(ctx, dropDir, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.Unpin(ctx, dropRoot); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	abandoned := filepath.Join(h.RunsDir(), ".task.unpack-123")
	fresh := filepath.Join(h.RunsDir(), ".other.unpack-456")
	for _, p := range []string{filepath.Join(abandoned, "public"), fresh} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(abandoned, old, old); err != nil {
		t.Fatal(err)
	}
	for id, phase := range map[string]runner.Phase{"run-done": runner.PhaseDone, "run-going": runner.PhaseAgent} {
		dir := runner.RunDir(h, id)
		if err := os.MkdirAll(filepath.Join(dir, "workspace"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "output"), 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(runner.RunState{ID: id, Phase: phase})
		if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	blocksBefore, bytesBefore := blockCount(t, d.n), segBytes(t, d.n)

	var phases []string
	dry, err := d.c.GC(ctx, true, func(phase string, done, total int64) {
		if len(phases) == 0 || phases[len(phases)-1] != phase {
			phases = append(phases, phase)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.Blocks == 0 || dry.BlockBytes < 3<<20 || len(dry.UnpackFolders) != 1 || len(dry.Workspaces) != 1 {
		t.Fatalf("dry run report = %+v; want the unpinned bundle's blocks, one unpack folder, one workspace", dry)
	}
	if blockCount(t, d.n) != blocksBefore || segBytes(t, d.n) != bytesBefore {
		t.Fatal("a dry run removed something")
	}
	if _, err := os.Stat(abandoned); err != nil {
		t.Fatal("a dry run removed an unpack folder")
	}
	t.Logf("dry run: %+v; progress phases %v", dry, phases)

	rep, err := d.c.GC(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Blocks != dry.Blocks || rep.Segments == 0 {
		t.Fatalf("gc report = %+v; want %d blocks and a compacted segment", rep, dry.Blocks)
	}
	if got := blockCount(t, d.n); got != blocksBefore-rep.Blocks {
		t.Fatalf("blocks after gc: %d, want %d", got, blocksBefore-rep.Blocks)
	}
	if after := segBytes(t, d.n); after > bytesBefore-3<<20 {
		t.Fatalf("segment bytes %d → %d: the unpinned bundle's space did not come back", bytesBefore, after)
	}
	checkFiles(t, d.n, keepRoot, keep)
	if ok, _ := d.n.bstore.Has(ctx, dropRoot); ok {
		t.Fatal("the unpinned root survived gc")
	}
	for p, want := range map[string]bool{
		abandoned: false, fresh: true,
		filepath.Join(runner.RunDir(h, "run-done"), "workspace"):  false,
		filepath.Join(runner.RunDir(h, "run-done"), "output"):     true,
		filepath.Join(runner.RunDir(h, "run-going"), "workspace"): true,
	} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s exists = %v after gc, want %v", p, err == nil, want)
		}
	}
	// The compacted store reopens with the kept bundle whole.
	d.stop()
	n := startNodeAt(t, h, opts)
	checkFiles(t, n, keepRoot, keep)
	if ok, _ := n.bstore.Has(ctx, cid.MustParse(dropRoot.String())); ok {
		t.Fatal("the unpinned root is back after reopening")
	}
}

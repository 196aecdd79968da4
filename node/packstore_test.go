package node

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/node/diskstore"
)

// TestSuiteOnPackStore reruns every other test in this package (this test binary, same -race
// build) with the pack blockstore, so one `go test ./node/...` covers both stores.
func TestSuiteOnPackStore(t *testing.T) {
	if testing.Short() {
		t.Skip("reruns the whole suite")
	}
	if testStore != "flat" {
		t.Skip("already running on " + testStore)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^Test", "-test.skip=^TestSuiteOnPackStore$")
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_BLOCKSTORE=pack")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("suite on the pack store failed: %v\n%s", err, out)
	}
	t.Logf("suite on the pack store: %s", strings.TrimSpace(string(out[max(0, len(out)-200):])))
}

// TestBlockstoreKindFromConfig: the config's blockstore field picks where blocks go (pack:
// HOME/blocks-pack, nothing under HOME/blocks), and an unknown kind is refused by name.
func TestBlockstoreKindFromConfig(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"flat", "pack"} {
		t.Run(kind, func(t *testing.T) {
			h := newHome(t)
			cfg := DefaultTestConfig()
			cfg.Blockstore = kind
			opts := testOptions()
			opts.Blockstore, opts.Config = "", &cfg
			n := startNodeAt(t, h, opts)
			files := testFiles(600 << 10)
			root := seed(t, files, n)
			checkFiles(t, n, root, files)
			packSegs, _ := filepath.Glob(filepath.Join(h.PackBlocksDir(), "*.seg"))
			flatBlocks, _ := filepath.Glob(filepath.Join(h.BlocksDir(), "*", "*.data"))
			if (kind == "pack") != (len(packSegs) > 0) || (kind == "flat") != (len(flatBlocks) > 0) {
				t.Fatalf("kind %s: %d pack segments, %d flat block files", kind, len(packSegs), len(flatBlocks))
			}
			if _, ok := n.store.(*diskstore.Pack); ok != (kind == "pack") {
				t.Fatalf("kind %s: store is %T", kind, n.store)
			}
		})
	}
	cfg := DefaultTestConfig()
	cfg.Blockstore = "rocks"
	opts := testOptions()
	opts.Blockstore, opts.Config = "", &cfg
	if _, err := New(ctx, newHome(t), opts); err == nil || !strings.Contains(err.Error(), `"rocks"`) {
		t.Fatalf("unknown blockstore kind: err = %v, want it named", err)
	}
}

package diskstore

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ipfs/boxo/blockstore"

	"github.com/evalmesh/evalmesh/internal/home"
)

// Store is a blockstore whose Sync makes every block put so far durable.
type Store interface {
	blockstore.Blockstore
	Sync() error
}

// Open opens the blockstore kind the config names: "flat" (one file per block, under
// HOME/blocks) or "pack" (segment files and an index, under HOME/blocks-pack).
func Open(h home.Home, kind string) (Store, error) {
	flatHas, packHas := flatStoreHasBlocks(h.BlocksDir()), packStoreHasBlocks(h.PackBlocksDir())
	switch kind {
	case "flat":
		if packHas && !flatHas {
			return nil, storeMismatch(h, "flat", h.PackBlocksDir(), "pack")
		}
		return OpenFlat(h.BlocksDir())
	case "", "pack":
		// A home written by the flat store (an older default) must not silently open an
		// empty pack store: its pins would point at blocks that look missing.
		if flatHas && !packHas {
			return nil, storeMismatch(h, "pack", h.BlocksDir(), "flat")
		}
		return OpenPack(h.PackBlocksDir())
	}
	return nil, fmt.Errorf("config blockstore: %q is not a blockstore kind: use flat or pack", kind)
}

func storeMismatch(h home.Home, kind, otherDir, otherKind string) error {
	return fmt.Errorf("config blockstore is %s, but this home's blocks are in %s (the %s store): set `blockstore: %s` in %s", kind, otherDir, otherKind, otherKind, h.ConfigPath())
}

// flatStoreHasBlocks reports whether a flat store folder holds any shard folder.
func flatStoreHasBlocks(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// packStoreHasBlocks reports whether a pack store folder has a non-empty index.
func packStoreHasBlocks(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, packIndexName))
	return err == nil && st.Size() > 0
}

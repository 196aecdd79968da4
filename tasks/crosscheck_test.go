package tasks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ipfs/go-unixfsnode/data/builder"
	_ "github.com/ipld/go-ipld-prime/codec/raw"
	cidlink "github.com/ipld/go-ipld-prime/linking/cid"
	"github.com/ipld/go-ipld-prime/storage/memstore"
)

// Only the SVAMP folder (four small files: one raw leaf each, one basic directory) has a
// vector from kubo itself. The shapes it does not reach — a file over one chunk, a file
// needing a second level of link nodes (more than 174 chunks), an empty file, an empty
// folder, nested folders and a folder big enough to become a HAMT shard — are checked
// against go-unixfsnode's builder, a second implementation of the same kubo defaults
// (written separately from boxo's importer, which Pack uses): both must give the same
// root CID for the same folder.
func TestPackAgreesWithGoUnixfsnodeBuilder(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~46 MiB")
	}
	src := t.TempDir()
	writeRandom(t, filepath.Join(src, "one-chunk.bin"), ChunkSize, 1)
	writeRandom(t, filepath.Join(src, "two-chunks.bin"), ChunkSize+1, 2)
	writeRandom(t, filepath.Join(src, "174-chunks.bin"), 174*ChunkSize, 3)
	writeRandom(t, filepath.Join(src, "175-chunks.bin"), 175*ChunkSize+17, 4)
	os.WriteFile(filepath.Join(src, "empty"), nil, 0o644)
	os.MkdirAll(filepath.Join(src, "a", "b", "emptydir"), 0o755)
	os.WriteFile(filepath.Join(src, "a", "b", "x.csv"), []byte("id,label\n1,2\n"), 0o644)
	hamt := filepath.Join(src, "many")
	os.Mkdir(hamt, 0o755)
	for i := 0; i < 1000; i++ {
		os.WriteFile(filepath.Join(hamt, longName+itoa(i)), []byte(itoa(i)), 0o644)
	}
	// Just under the HAMT threshold: still a basic directory on both sides.
	basic := filepath.Join(src, "almost")
	os.Mkdir(basic, 0o755)
	for i := 0; i < 700; i++ {
		os.WriteFile(filepath.Join(basic, strings.Repeat("m", 330)+itoa(1000+i)), nil, 0o644)
	}

	ls := cidlink.DefaultLinkSystem()
	store := &memstore.Store{}
	ls.SetReadStorage(store)
	ls.SetWriteStorage(store)
	for _, sub := range []string{"one-chunk.bin", "two-chunks.bin", "174-chunks.bin", "175-chunks.bin", "empty", "a", "many", "almost", "."} {
		p := filepath.Join(src, sub)
		want, _, err := builder.BuildUnixFSRecursive(p, &ls)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Pack(context.Background(), p, NewHashOnlyDAG(), PackOptions{Unchecked: true})
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: Pack %s, go-unixfsnode %s", sub, got, want)
		}
	}
}

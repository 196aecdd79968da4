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
// vector in the issue. The shapes it does not reach — a file over one chunk, a file
// needing a second level of link nodes (more than 174 chunks), an empty file, nested
// folders with an empty one, and the HAMT threshold from both sides (916 entries of
// 250-byte names: 916 × (250 + 36) = 261,976 bytes, a basic directory; 917: 262,262 bytes
// > 256 KiB, a HAMT shard) — are checked against kubo itself (`ipfs add -r
// --cid-version=1 --only-hash`, kubo 0.44.0-dev, on the folder this test writes: the data
// is ChaCha8 with fixed seeds, so the CIDs are fixed), and against go-unixfsnode's
// builder, a second implementation of the same defaults written apart from boxo's
// importer, which Pack uses.
func TestPackAgreesWithKuboAndGoUnixfsnode(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~90 MiB")
	}
	src := crosscheckFolder(t, t.TempDir())
	kubo := map[string]string{
		"one-chunk.bin":  "bafkreicl2jnivjcro3zfyvodpsvcxq2gmgfagv2gja24ooqvrwwvolnhli",
		"two-chunks.bin": "bafybeidgepskklr7rm4mc7ijrw4ojy4s7oh5lkccztmwjfe7lhs6ofwwje",
		"174-chunks.bin": "bafybeiha2gvycrpm5h7kpj4qgr3ojlks2di4bxkqsgdb6vpcnmljhpvbam",
		"175-chunks.bin": "bafybeiexgcdeep5givdbf7eqxd4slpydqbcryo52ffawdmjnjz7x7q2lby",
		"empty":          "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
		"a":              "bafybeig4xy64tmsbgevo2em2xoh2z2sn4wzefsarg3dljkbzrublxmdace",
		"b916":           "bafybeih75tf5dni5ysm5baljzkoabji67ftbyzkmx3mti6xxgazhwe2ckm",
		"b917":           "bafybeibn3v7cwhslyvbjnq4phfvepfod7l5di7sjvpxs2jjbo4lutr6xem",
		".":              "bafybeic4pz637pxdzs2tvepjitmmjguznzud74zqs7kzjfq7mamrqeoksi",
	}
	ls := cidlink.DefaultLinkSystem()
	store := &memstore.Store{}
	ls.SetReadStorage(store)
	ls.SetWriteStorage(store)
	// Default: files of 4 chunks or more are preads hashed in parallel; then every file,
	// the empty one, one chunk and 174 (an exact multiple of the chunk size) included.
	def := parallelMinChunks
	for _, min := range []int64{def, 0} {
		withParallelMinChunks(t, min)
		for _, sub := range sortedKeys(kubo) {
			got, err := Pack(context.Background(), filepath.Join(src, sub), NewHashOnlyDAG(), PackOptions{Unchecked: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := kubo[sub]; got.String() != want {
				t.Errorf("%s (parallel from %d chunks): Pack %s, kubo %s", sub, min, got, want)
			}
		}
	}
	withParallelMinChunks(t, def)
	for _, sub := range sortedKeys(kubo) {
		p := filepath.Join(src, sub)
		got, err := Pack(context.Background(), p, NewHashOnlyDAG(), PackOptions{Unchecked: true})
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := builder.BuildUnixFSRecursive(p, &ls)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != other.String() {
			t.Errorf("%s: Pack %s, go-unixfsnode %s", sub, got, other)
		}
	}
}

// crosscheckFolder writes the test folder under dir and returns it; every write is checked
// (a name over 255 bytes once failed silently here and left a folder empty).
func crosscheckFolder(t testing.TB, dir string) string {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	writeRandom(t, filepath.Join(dir, "one-chunk.bin"), ChunkSize, 1)
	writeRandom(t, filepath.Join(dir, "two-chunks.bin"), ChunkSize+1, 2)
	writeRandom(t, filepath.Join(dir, "174-chunks.bin"), 174*ChunkSize, 3)
	writeRandom(t, filepath.Join(dir, "175-chunks.bin"), 175*ChunkSize+17, 4)
	must(os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644))
	must(os.MkdirAll(filepath.Join(dir, "a", "b", "emptydir"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "a", "b", "x.csv"), []byte("id,label\n1,2\n"), 0o644))
	for _, n := range []int{916, 917} {
		d := filepath.Join(dir, "b"+itoa(n))
		must(os.Mkdir(d, 0o755))
		for i := 1000; i < 1000+n; i++ {
			must(os.WriteFile(filepath.Join(d, strings.Repeat("n", 245)+"-"+itoa(i)), nil, 0o644))
		}
	}
	return dir
}

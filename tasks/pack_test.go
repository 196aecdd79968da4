package tasks

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

const svampDir = "testdata/airs-bench/MathQuestionAnsweringSVAMPAccuracy"

// kubo 0.44: `ipfs add -r --cid-version=1` of the SVAMP fixture folder.
const svampCID = "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi"

func TestPackKuboVector(t *testing.T) {
	for name, d := range map[string]ipld.DAGService{"hash-only": NewHashOnlyDAG(), "memory": NewMemDAG()} {
		t.Run(name, func(t *testing.T) {
			c, err := Pack(context.Background(), svampDir, d, PackOptions{Unchecked: true})
			if err != nil {
				t.Fatal(err)
			}
			if c.String() != svampCID {
				t.Fatalf("root CID = %s, want kubo's %s", c, svampCID)
			}
		})
	}
}

// Well-known kubo CIDs (CIDv1, raw leaves): the empty folder and the empty file; a
// folder holding both.
func TestPackEmptyEntriesAsKubo(t *testing.T) {
	ctx := context.Background()
	empty := t.TempDir()
	c, err := Pack(ctx, empty, NewMemDAG(), PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "bafybeiczsscdsbs7ffqz55asqdf3smv6klcw3gofszvwlyarci47bgf354" {
		t.Errorf("empty folder: %s", c)
	}
	f := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(f, nil, 0o644)
	c, err = Pack(ctx, f, NewMemDAG(), PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku" {
		t.Errorf("empty file: %s", c)
	}
}

func TestPackSkipsHiddenRefusesSymlinks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644)
	before, err := Pack(ctx, dir, NewMemDAG(), PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("h"), 0o644)
	os.Mkdir(filepath.Join(dir, ".git"), 0o755)
	after, err := Pack(ctx, dir, NewMemDAG(), PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	if !before.Equals(after) {
		t.Errorf("hidden names changed the CID: %s → %s", before, after)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(dir, "sub", "evil"))
	_, err = Pack(ctx, dir, NewMemDAG(), PackOptions{Unchecked: true})
	if err == nil || !strings.Contains(err.Error(), "sub/evil") || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("symlink: want an error naming sub/evil, got %v", err)
	}
}

func TestPackCheckedRefusesNonBundle(t *testing.T) {
	_, err := Pack(context.Background(), svampDir, NewMemDAG(), PackOptions{})
	var le *LayoutError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "task.yaml: missing") {
		t.Fatalf("want a layout error, got %v", err)
	}
	if !strings.Contains(err.Error(), "--unchecked") {
		t.Errorf("error does not say how to pack anyway: %v", err)
	}
}

func writeRandom(t testing.TB, p string, n int, seed uint64) []byte {
	t.Helper()
	b := make([]byte, n)
	var key [32]byte
	key[0] = byte(seed)
	rand.NewChaCha8(key).Read(b)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// A file of 175 chunks needs two levels of link nodes (174 links per node); a folder with
// 1,000 entries with 250-byte names crosses the 256 KiB HAMT threshold. Both survive pack → CAR → unpack.
func TestPackUnpackRoundTripDeepFileAndHAMT(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~46 MiB")
	}
	ctx := context.Background()
	src := t.TempDir()
	big := writeRandom(t, filepath.Join(src, "big.bin"), 175*ChunkSize+17, 7)
	many := filepath.Join(src, "many")
	os.Mkdir(many, 0o755)
	for i := 0; i < 1000; i++ {
		os.WriteFile(filepath.Join(many, longName+itoa(i)), []byte(itoa(i)), 0o644)
	}
	os.Mkdir(filepath.Join(src, "emptydir"), 0o755)
	os.WriteFile(filepath.Join(src, "emptyfile"), nil, 0o644)

	dag := NewMemDAG()
	root, err := Pack(ctx, src, dag, PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	// The "many" folder is a HAMT shard, as kubo makes it.
	rootNd, _ := dag.Get(ctx, root)
	d, _ := uio.NewDirectoryFromNode(dag, rootNd)
	mn, err := d.Find(ctx, "many")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uio.NewHAMTDirectoryFromNode(dag, mn); err != nil {
		t.Errorf("1,000-entry folder is not a HAMT shard: %v", err)
	}

	car := filepath.Join(t.TempDir(), "b.car")
	f, _ := os.Create(car)
	if err := WriteCAR(ctx, dag, root, f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := filepath.Join(t.TempDir(), "out")
	got, err := UnpackCAR(ctx, car, out, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equals(root) {
		t.Errorf("CAR root %s, want %s", got, root)
	}
	b, _ := os.ReadFile(filepath.Join(out, "big.bin"))
	if !bytes.Equal(b, big) {
		t.Error("big.bin differs after the round trip")
	}
	for _, i := range []int{0, 500, 999} {
		b, err := os.ReadFile(filepath.Join(out, "many", longName+itoa(i)))
		if err != nil || string(b) != itoa(i) {
			t.Errorf("many/%d: %q %v", i, b, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "emptydir")); err != nil || !fi.IsDir() {
		t.Errorf("emptydir: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(out, "emptyfile")); err != nil || fi.Size() != 0 {
		t.Errorf("emptyfile: %v", err)
	}
	// Re-packing the unpacked folder gives the same CID.
	again, err := Pack(ctx, out, NewHashOnlyDAG(), PackOptions{Unchecked: true})
	if err != nil || !again.Equals(root) {
		t.Errorf("re-pack: %s %v, want %s", again, err, root)
	}
	n, err := DAGSize(ctx, dag, root)
	if err != nil || n != int64(len(big))+int64(sumDigits(1000)) {
		t.Errorf("DAGSize = %d %v", n, err)
	}
}

var longName = strings.Repeat("n", 245) + "-"

func itoa(i int) string { return strconv.Itoa(i) }

func sumDigits(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += len(itoa(i))
	}
	return s
}

func TestPackProgress(t *testing.T) {
	dir := t.TempDir()
	writeRandom(t, filepath.Join(dir, "x"), 3*ChunkSize+5, 1)
	var last int64
	calls := 0
	_, err := Pack(context.Background(), dir, NewHashOnlyDAG(), PackOptions{Unchecked: true, Progress: func(n int64) {
		if n < last {
			t.Errorf("progress went back: %d after %d", n, last)
		}
		last = n
		calls++
	}})
	if err != nil {
		t.Fatal(err)
	}
	if last != 3*ChunkSize+5 || calls < 2 {
		t.Errorf("progress ended at %d after %d calls", last, calls)
	}
}

var _ = cid.Undef

// Streaming into a CAR while chunk buffers are recycled must not corrupt any block.
func TestPackToCARWriterRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	a := writeRandom(t, filepath.Join(src, "a.bin"), 9*ChunkSize+3, 3)
	b := writeRandom(t, filepath.Join(src, "b.bin"), 2*ChunkSize, 4)
	car := filepath.Join(t.TempDir(), "x.car")
	w, err := NewCARWriterDAG(car)
	if err != nil {
		t.Fatal(err)
	}
	root, err := Pack(ctx, src, w, PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(root); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(car)); len(ents) != 1 {
		t.Errorf("temporary files left beside the CAR: %v", ents)
	}
	want, _ := Pack(ctx, src, NewMemDAG(), PackOptions{Unchecked: true})
	if !root.Equals(want) {
		t.Fatalf("CAR-writer root %s, memory root %s", root, want)
	}
	out := filepath.Join(t.TempDir(), "out")
	got, err := UnpackCAR(ctx, car, out, UnpackOptions{})
	if err != nil || !got.Equals(root) {
		t.Fatalf("unpack: %s %v", got, err)
	}
	for name, data := range map[string][]byte{"a.bin": a, "b.bin": b} {
		if g, _ := os.ReadFile(filepath.Join(out, name)); !bytes.Equal(g, data) {
			t.Errorf("%s differs after the CAR round trip", name)
		}
	}
}

// A --car path in a missing folder, or naming a folder, is refused with the path the user
// gave (not the temporary file's), and nothing is written.
func TestCARWriterBadPath(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "nodir", "x.car"), dir} {
		_, err := NewCARWriterDAG(p)
		if err == nil || !strings.Contains(err.Error(), "CAR "+p+":") || strings.Contains(err.Error(), ".tmp") {
			t.Errorf("%s: got %v", p, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %v", ents)
	}
}

// Parallel leaf hashing (files of parallelMinChunks chunks or more) gives the very DAG of
// the one-goroutine importer: the same root and the same bytes under every CID.
func TestPackParallelHashingSameDAG(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeRandom(t, filepath.Join(dir, "big.bin"), 12*ChunkSize+5, 3) // the 175-chunk kubo vector takes this path too
	writeRandom(t, filepath.Join(dir, "small.bin"), 3*ChunkSize, 4)
	pack := func(minChunks int64) (*memDAG, string) {
		defer func(old int64) { parallelMinChunks = old }(parallelMinChunks)
		parallelMinChunks = minChunks
		dag := NewMemDAG().(*memDAG)
		c, err := Pack(ctx, dir, dag, PackOptions{Unchecked: true})
		if err != nil {
			t.Fatal(err)
		}
		return dag, c.String()
	}
	seqDAG, seqRoot := pack(1 << 40)
	parDAG, parRoot := pack(1)
	if seqRoot != parRoot {
		t.Fatalf("root: one goroutine %s, parallel %s", seqRoot, parRoot)
	}
	if len(seqDAG.nodeMap) != len(parDAG.nodeMap) {
		t.Fatalf("blocks: one goroutine %d, parallel %d", len(seqDAG.nodeMap), len(parDAG.nodeMap))
	}
	for c, n := range seqDAG.nodeMap {
		p, ok := parDAG.nodeMap[c]
		if !ok || !bytes.Equal(p.RawData(), n.RawData()) {
			t.Fatalf("block %s differs or is missing in the parallel pack", c)
		}
	}
}

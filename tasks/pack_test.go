package tasks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/rawleaf"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

const svampDir = "testdata/airs-bench/MathQuestionAnsweringSVAMPAccuracy"

// kubo 0.44: `ipfs add -r --cid-version=1` of the SVAMP fixture folder.
const svampCID = "bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi"

func TestPackKuboVector(t *testing.T) {
	for name, d := range map[string]ipld.DAGService{"hash-only": NewHashOnlyDAG(), "memory": NewMemDAG(), "hash-only/parallel": NewHashOnlyDAG()} {
		t.Run(name, func(t *testing.T) {
			if strings.HasSuffix(name, "/parallel") {
				withParallelMinChunks(t, 0) // the fixture's small files through the pread path
			}
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

// Progress counts every byte once, never goes back, on the one-goroutine path and on the
// parallel one (where workers read out of order and the importer reports in file order).
func TestPackProgress(t *testing.T) {
	dir := t.TempDir()
	writeRandom(t, filepath.Join(dir, "x"), 3*ChunkSize+5, 1)
	writeRandom(t, filepath.Join(dir, "y"), 20*ChunkSize, 2)
	const total = 23*ChunkSize + 5
	for _, min := range []int64{1 << 40, 1} {
		withParallelMinChunks(t, min)
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
		if last != total || calls < 24 {
			t.Errorf("parallel from %d chunks: progress ended at %d after %d calls, want %d", min, last, calls, total)
		}
	}
}

var _ = cid.Undef

// packCAR packs src into a new CAR file at car (NewCARWriterDAG) and returns the root.
func packCAR(tb testing.TB, src, car string) cid.Cid {
	tb.Helper()
	w, err := NewCARWriterDAG(car)
	if err != nil {
		tb.Fatal(err)
	}
	root, err := Pack(context.Background(), src, w, PackOptions{Unchecked: true})
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Finish(root); err != nil {
		tb.Fatal(err)
	}
	return root
}

// Streaming into a CAR while chunk buffers are recycled must not corrupt any block.
func TestPackToCARWriterRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	a := writeRandom(t, filepath.Join(src, "a.bin"), 9*ChunkSize+3, 3)
	b := writeRandom(t, filepath.Join(src, "b.bin"), 2*ChunkSize, 4)
	car := filepath.Join(t.TempDir(), "x.car")
	root := packCAR(t, src, car)
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

// withParallelMinChunks sets parallelMinChunks for the rest of the test.
func withParallelMinChunks(t testing.TB, n int64) {
	old := parallelMinChunks
	parallelMinChunks = n
	t.Cleanup(func() { parallelMinChunks = old })
}

// Parallel leaf hashing (files of parallelMinChunks chunks or more: workers pread and hash
// the chunks) gives the very DAG of the one-goroutine importer — the same root and the
// same bytes under every CID — at the sizes where chunking has edges (empty, one byte,
// one chunk less or more a byte, exact multiples, a second level of link nodes at 175
// chunks) and at random sizes. Hash-only (buffers recycled) and CAR-streamed packs give
// the same root too.
func TestPackParallelHashingSameDAG(t *testing.T) {
	ctx := context.Background()
	sizes := []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 4 * ChunkSize, 12*ChunkSize + 5, 174 * ChunkSize, 175*ChunkSize + 17}
	r := rand.New(rand.NewPCG(18, 18))
	for i := 0; i < 6; i++ {
		sizes = append(sizes, r.IntN(40*ChunkSize))
	}
	for i, size := range sizes {
		dir := t.TempDir()
		writeRandom(t, filepath.Join(dir, "f.bin"), size, uint64(i))
		writeRandom(t, filepath.Join(dir, "small.bin"), 3*ChunkSize, 4) // a neighbour in the same folder
		pack := func(minChunks int64, dag ipld.DAGService) string {
			defer func(old int64) { parallelMinChunks = old }(parallelMinChunks)
			parallelMinChunks = minChunks
			c, err := Pack(ctx, dir, dag, PackOptions{Unchecked: true})
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			return c.String()
		}
		seqDAG, parDAG := NewMemDAG().(*memDAG), NewMemDAG().(*memDAG)
		seqRoot, parRoot := pack(1<<40, seqDAG), pack(0, parDAG)
		if seqRoot != parRoot {
			t.Fatalf("size %d: root: one goroutine %s, parallel %s", size, seqRoot, parRoot)
		}
		if len(seqDAG.nodeMap) != len(parDAG.nodeMap) {
			t.Fatalf("size %d: blocks: one goroutine %d, parallel %d", size, len(seqDAG.nodeMap), len(parDAG.nodeMap))
		}
		for c, n := range seqDAG.nodeMap {
			p, ok := parDAG.nodeMap[c]
			if !ok || !bytes.Equal(p.RawData(), n.RawData()) {
				t.Fatalf("size %d: block %s differs or is missing in the parallel pack", size, c)
			}
		}
		if h := pack(0, NewHashOnlyDAG()); h != seqRoot {
			t.Fatalf("size %d: hash-only parallel root %s, want %s", size, h, seqRoot)
		}
		car := filepath.Join(t.TempDir(), "x.car")
		w, err := NewCARWriterDAG(car)
		if err != nil {
			t.Fatal(err)
		}
		if c := pack(0, w); c != seqRoot {
			t.Fatalf("size %d: CAR-streamed parallel root %s, want %s", size, c, seqRoot)
		}
		w.Finish(cid.MustParse(seqRoot))
	}
}

// A file truncated while its chunks are being read ahead ends where the reads found the
// end (the workers read no more than a few chunks ahead), and the pack fails naming it
// with a ChangedError; no worker is left behind.
func TestPackParallelTruncatedMidFile(t *testing.T) {
	dir := t.TempDir()
	const chunks = 64
	p := filepath.Join(dir, "big.bin")
	writeRandom(t, p, chunks*ChunkSize, 9)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p, old, old)
	base := runtime.NumGoroutine()
	truncated := false
	afterPackRead = func(rel string, read int64) {
		if !truncated && read >= ChunkSize {
			truncated = true
			if err := os.Truncate(p, ChunkSize/2); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { afterPackRead = nil })
	_, err := Pack(context.Background(), dir, NewHashOnlyDAG(), PackOptions{Unchecked: true})
	var ce *ChangedError
	if !truncated || !errors.As(err, &ce) || ce.Path != "big.bin" {
		t.Fatalf("truncated %v, Pack error %v: want a ChangedError naming big.bin", truncated, err)
	}
	if ce.Read >= chunks*ChunkSize {
		t.Errorf("read %d bytes of a file truncated after the first chunk: the short reads were not seen", ce.Read)
	}
	testutil.WaitFor(t, 5*time.Second, "the pack's workers to exit", func() bool { return runtime.NumGoroutine() <= base })
}

// failingReaderAt serves bytes from data, except at and after failAt where it fails; it
// counts its calls.
type failingReaderAt struct {
	data   []byte
	failAt int64
	calls  atomic.Int64
}

var errInjected = errors.New("injected I/O error")

func (f *failingReaderAt) ReadAt(b []byte, off int64) (int, error) {
	f.calls.Add(1)
	if off+int64(len(b)) > f.failAt {
		n := max(0, int(f.failAt-off))
		copy(b, f.data[off:off+int64(n)])
		return n, errInjected
	}
	return copy(b, f.data[off:]), nil
}

// A read error in the middle of a file comes out of the importer as that error, saying
// where, and closing the splitter stops every worker: no read after it, no goroutine left.
func TestPreadSplitterReadErrorSurfaces(t *testing.T) {
	const size = 40*ChunkSize + 7
	data := make([]byte, size)
	ra := &failingReaderAt{data: data, failAt: 17*ChunkSize + 100}
	base := runtime.NumGoroutine()
	b := newPrehashedBuilder()
	counted := 0
	spl := newPreadSplitter(ra, size, bytes.NewReader(nil), b, func(n int) { counted += n })
	params := helpers.DagBuilderParams{Dagserv: NewHashOnlyDAG(), RawLeaves: true, Maxlinks: helpers.DefaultLinksPerBlock, CidBuilder: b}
	db, err := params.New(spl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = balanced.Layout(db)
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "read at byte "+itoa(17*ChunkSize+100)) {
		t.Fatalf("Layout error %v: want the injected error at byte %d", err, 17*ChunkSize+100)
	}
	if counted != 17*ChunkSize {
		t.Errorf("progress counted %d bytes, want the %d before the failing chunk", counted, 17*ChunkSize)
	}
	spl.close()
	calls := ra.calls.Load()
	testutil.WaitFor(t, 5*time.Second, "the splitter's workers to exit", func() bool { return runtime.NumGoroutine() <= base })
	if got := ra.calls.Load(); got != calls {
		t.Errorf("%d reads after close", got-calls)
	}
	if _, err := spl.NextBytes(); !errors.Is(err, errInjected) {
		t.Errorf("NextBytes after the error: %v, want the error again", err)
	}
}

// The workers hash pairs of chunks in one pass (internal/sha256x2) and build the leaf's CID
// from the digest: for the default CidBuilder that CID is the one rawLeafPrefix.Sum gives
// (TestPackParallelHashingSameDAG then checks whole DAGs, pairs included).
func TestPairedLeafCIDIsPrefixSum(t *testing.T) {
	if !leavesSHA256() {
		t.Fatalf("the default CidBuilder's raw leaves (%v) are not CIDv1 sha2-256: the workers would never pair chunks", rawLeafPrefix)
	}
	for _, n := range []int{1, ChunkSize - 1, ChunkSize} {
		data := writeRandom(t, filepath.Join(t.TempDir(), "leaf"), n, uint64(n))
		want, err := rawLeafPrefix.Sum(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := rawleaf.CID(sha256.Sum256(data)); !got.Equals(want) {
			t.Fatalf("%d bytes: rawleaf.CID %s, rawLeafPrefix.Sum %s", n, got, want)
		}
	}
}

package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	mdag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	blocks "github.com/ipfs/go-block-format"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	carv2 "github.com/ipld/go-car/v2"
	"github.com/ipld/go-car/v2/storage"
	pool "github.com/libp2p/go-buffer-pool"
	mh "github.com/multiformats/go-multihash"
)

// child is one named link of a hand-built directory.
type child struct {
	name string
	nd   ipld.Node
}

func rawFile(t testing.TB, data string) ipld.Node {
	t.Helper()
	nd, err := mdag.NewRawNodeWPrefix([]byte(data), cid.Prefix{Version: 1, Codec: cid.Raw, MhType: 0x12, MhLength: -1})
	if err != nil {
		t.Fatal(err)
	}
	return nd
}

func protoNode(data []byte, kids ...child) *mdag.ProtoNode {
	nd := mdag.NodeWithData(data)
	nd.SetCidBuilder(CidBuilder)
	for _, k := range kids {
		if err := nd.AddRawLink(k.name, &ipld.Link{Cid: k.nd.Cid(), Size: uint64(len(k.nd.RawData()))}); err != nil {
			panic(err)
		}
	}
	return nd
}

func dirNode(kids ...child) *mdag.ProtoNode { return protoNode(ft.FolderPBData(), kids...) }

// writeHostileCAR stores the given nodes and writes a CAR rooted at root.
func writeHostileCAR(t testing.TB, root ipld.Node, nodes ...ipld.Node) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hostile.car")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := storage.NewWritable(onlyWriter{f}, []cid.Cid{root.Cid()}, carv2.WriteAsCarV1(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append([]ipld.Node{root}, nodes...) {
		if err := w.Put(context.Background(), n.Cid().KeyString(), n.RawData()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}
	return p
}

// bundleish wraps kids with a plausible task.yaml so only the hostile part is wrong.
func bundleish(t testing.TB, kids ...child) (*mdag.ProtoNode, []ipld.Node) {
	ty := rawFile(t, "name: x\n")
	nodes := []ipld.Node{ty}
	for _, k := range kids {
		nodes = append(nodes, k.nd)
	}
	return dirNode(append([]child{{"task.yaml", ty}}, kids...)...), nodes
}

func TestUnpackRefusesHostileDAGs(t *testing.T) {
	file := rawFile(t, "payload")
	symlink := protoNode(mustSymlink(t, "/etc/passwd"))
	symlinkRel := protoNode(mustSymlink(t, "../../outside"))
	huge := protoNode(ft.FilePBData(nil, 1<<40)) // declares 1 TiB, holds nothing
	unknownType := protoNode([]byte{0x08, 0x07}) // UnixFS Data{Type: 7}: no such type (no devices in UnixFS)
	metadata := protoNode([]byte{0x08, 0x03})    // UnixFS Metadata node
	notUnixFS := protoNode([]byte{0xff, 0xff, 0xff})
	inner := dirNode(child{"..", file})

	cases := []struct {
		name   string
		kids   []child
		extra  []ipld.Node
		path   string // the path the refusal must name
		reason string
		opts   UnpackOptions
	}{
		{"dot-dot", []child{{"..", file}}, nil, "..", "escapes", UnpackOptions{}},
		{"dot", []child{{".", file}}, nil, ".", "escapes", UnpackOptions{}},
		{"nested dot-dot", []child{{"public", inner}}, []ipld.Node{file}, "public/..", "escapes", UnpackOptions{}},
		{"absolute", []child{{"/etc/cron.d/x", file}}, nil, "cron.d", "absolute", UnpackOptions{}},
		{"slash", []child{{"a/../../b", file}}, nil, "a", "contains '/'", UnpackOptions{}},
		{"backslash", []child{{`..\..\x`, file}}, nil, `..\..\x`, `'\'`, UnpackOptions{}},
		{"empty name", []child{{"", file}}, nil, "", "empty name", UnpackOptions{}},
		{"NUL", []child{{"a\x00b", file}}, nil, "a", "NUL", UnpackOptions{}},
		{"duplicate", []child{{"public", file}, {"public", rawFile(t, "other")}}, nil, "public", "duplicate", UnpackOptions{}},
		{"symlink outside", []child{{"evil", symlink}}, nil, "evil", "symlink", UnpackOptions{}},
		{"symlink relative", []child{{"public", dirNode(child{"up", symlinkRel})}}, []ipld.Node{symlinkRel}, "public/up", "symlink", UnpackOptions{}},
		{"unknown type", []child{{"dev", unknownType}}, nil, "dev", "unknown UnixFS type", UnpackOptions{}},
		{"metadata node", []child{{"meta", metadata}}, nil, "meta", "metadata", UnpackOptions{}},
		{"not unixfs", []child{{"junk", notUnixFS}}, nil, "junk", "not a UnixFS node", UnpackOptions{}},
		{"huge declared file", []child{{"private", dirNode(child{"labels.csv", huge})}}, []ipld.Node{huge}, "private/labels.csv", "over --max-size 68719476736 (64 GiB); raise --max-size only", UnpackOptions{}},
		{"over max-size", []child{{"a", rawFile(t, "0123456789")}, {"b", rawFile(t, "0123456789")}}, nil, "b", "declared size exceeds", UnpackOptions{MaxSize: 15}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, nodes := bundleish(t, tc.kids...)
			car := writeHostileCAR(t, root, append(nodes, tc.extra...)...)
			if fi, _ := os.Stat(car); fi.Size() > 4096 {
				t.Fatalf("test CAR unexpectedly large: %d", fi.Size())
			}
			parent := t.TempDir()
			out := filepath.Join(parent, "out")
			_, err := UnpackCAR(context.Background(), car, out, tc.opts)
			var ue *UnsafeError
			if !errors.As(err, &ue) {
				t.Fatalf("want an UnsafeError, got %v", err)
			}
			if !strings.Contains(ue.Path, tc.path) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q: want path containing %q and reason %q", err, tc.path, tc.reason)
			}
			if tooLarge := strings.Contains(tc.reason, "max-size") || strings.Contains(tc.reason, "declared size"); errors.Is(err, ErrTooLarge) != tooLarge {
				t.Errorf("errors.Is(err, ErrTooLarge) = %v for %q", !tooLarge, err)
			}
			assertNothingWritten(t, parent)
		})
	}
}

func mustSymlink(t testing.TB, target string) []byte {
	b, err := ft.SymlinkData(target)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertNothingWritten checks that parent is still empty: no DIR, no temporary folder.
func assertNothingWritten(t *testing.T, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}

// A block whose bytes do not hash to its CID is refused, wherever it sits.
func TestUnpackRefusesForgedBlock(t *testing.T) {
	good := rawFile(t, "the real labels")
	root, nodes := bundleish(t, child{"private", dirNode(child{"labels.csv", good})})
	priv := root.Links()[0] // sorted: "private" < "task.yaml"
	privNd := dirNode(child{"labels.csv", good})
	if !priv.Cid.Equals(privNd.Cid()) {
		t.Fatal("test setup: link order")
	}
	forged := &forgedNode{Node: good, data: []byte("forged labels!!")}
	car := writeHostileCAR(t, root, append(nodes[:1], privNd, forged)...)
	parent := t.TempDir()
	_, err := UnpackCAR(context.Background(), car, filepath.Join(parent, "out"), UnpackOptions{})
	if err == nil || !strings.Contains(err.Error(), "does not hash to its CID") {
		t.Fatalf("want a hash mismatch, got %v", err)
	}
	assertNothingWritten(t, parent)
}

type forgedNode struct {
	ipld.Node
	data []byte
}

func (f *forgedNode) RawData() []byte { return f.data }

// A file whose data is longer than its root declares is refused and leaves nothing.
func TestUnpackRefusesSizeMismatch(t *testing.T) {
	leaf := rawFile(t, "0123456789abcdef")
	// A File node over one 16-byte leaf whose declared size is patched after the block
	// sizes were summed: down to 4 bytes, or up to 100.
	// Both ways of reading the leaves: boxo's DagReader, and the pooled path.
	for _, pooled := range []bool{false, true} {
		for _, delta := range []int64{-12, 84} {
			fs := ft.NewFSNode(0x02)
			fs.AddBlockSize(16)
			fs.UpdateFilesize(delta)
			data, _ := fs.GetBytes()
			lying := protoNode(data, child{"", leaf})
			root, nodes := bundleish(t, child{"f", lying})
			car := writeHostileCAR(t, root, append(nodes, leaf)...)
			parent := t.TempDir()
			_, err := unpackCARWith(t, car, filepath.Join(parent, "out"), UnpackOptions{}, pooled)
			var ue *UnsafeError
			if !errors.As(err, &ue) || ue.Path != "f" {
				t.Fatalf("pooled %v, declared %d bytes over 16: want a refusal naming f, got %v", pooled, 16+delta, err)
			}
			assertNothingWritten(t, parent)
		}
	}
}

func TestUnpackTargetChecks(t *testing.T) {
	ctx := context.Background()
	dag := NewMemDAG()
	root, err := Pack(ctx, svampDir, dag, PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("DIR is a symlink to elsewhere", func(t *testing.T) {
		parent, elsewhere := t.TempDir(), t.TempDir()
		link := filepath.Join(parent, "out")
		os.Symlink(elsewhere, link)
		if err := Unpack(ctx, dag, root, link, UnpackOptions{}); err == nil {
			t.Fatal("unpacked through a symlink")
		}
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Errorf("wrote through the symlink: %v", ents)
		}
	})
	t.Run("DIR not empty", func(t *testing.T) {
		out := t.TempDir()
		os.WriteFile(filepath.Join(out, "keep"), []byte("x"), 0o644)
		err := Unpack(ctx, dag, root, out, UnpackOptions{})
		if err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("DIR empty is reused", func(t *testing.T) {
		out := t.TempDir()
		if err := Unpack(ctx, dag, root, out, UnpackOptions{}); err != nil {
			t.Fatal(err)
		}
		again, err := Pack(ctx, out, NewHashOnlyDAG(), PackOptions{Unchecked: true})
		if err != nil || again.String() != svampCID {
			t.Fatalf("unpacked folder packs to %s (%v), want %s", again, err, svampCID)
		}
	})
	t.Run("root is a file", func(t *testing.T) {
		f := rawFile(t, "just a file")
		car := writeHostileCAR(t, f)
		parent := t.TempDir()
		_, err := UnpackCAR(ctx, car, filepath.Join(parent, "out"), UnpackOptions{})
		var ue *UnsafeError
		if !errors.As(err, &ue) {
			t.Fatalf("got %v", err)
		}
		assertNothingWritten(t, parent)
	})
	t.Run("missing block", func(t *testing.T) {
		root, _ := bundleish(t, child{"a", rawFile(t, "absent from the CAR")})
		car := writeHostileCAR(t, root)
		parent := t.TempDir()
		if _, err := UnpackCAR(ctx, car, filepath.Join(parent, "out"), UnpackOptions{}); err == nil {
			t.Fatal("unpacked a CAR with a missing block")
		}
		assertNothingWritten(t, parent)
	})
}

func TestDAGSizeRefusesLikeUnpack(t *testing.T) {
	huge := protoNode(ft.FilePBData(nil, 1<<40))
	root, nodes := bundleish(t, child{"big", huge})
	dag := NewMemDAG()
	dag.AddMany(context.Background(), append(nodes, root))
	n, err := DAGSize(context.Background(), dag, root.Cid())
	if err != nil || n != 1<<40+int64(len("name: x\n")) {
		t.Fatalf("DAGSize = %d, %v", n, err)
	}
	root2, nodes2 := bundleish(t, child{"..", rawFile(t, "x")})
	dag.AddMany(context.Background(), append(nodes2, root2))
	if _, err := DAGSize(context.Background(), dag, root2.Cid()); err == nil {
		t.Fatal("DAGSize accepted '..'")
	}
}

// The target's missing parent folders are made like `mkdir -p`, but only for a DAG that
// passes every check: a refusal or a failure leaves no folder behind, not even a parent.
func TestUnpackCreatesMissingParentsOnlyWhenAccepted(t *testing.T) {
	ctx := context.Background()
	dag := NewMemDAG()
	root, err := Pack(ctx, svampDir, dag, PackOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	out := filepath.Join(base, "a", "b", "out")
	if err := Unpack(ctx, dag, root, out, UnpackOptions{}); err != nil {
		t.Fatalf("unpack into a new nested folder: %v", err)
	}
	if again, err := Pack(ctx, out, NewHashOnlyDAG(), PackOptions{Unchecked: true}); err != nil || again.String() != svampCID {
		t.Fatalf("unpacked folder packs to %s (%v)", again, err)
	}

	hostile, nodes := bundleish(t, child{"..", rawFile(t, "x")})
	car := writeHostileCAR(t, hostile, nodes...)
	parent := t.TempDir()
	if _, err := UnpackCAR(ctx, car, filepath.Join(parent, "x", "y", "out"), UnpackOptions{}); err == nil {
		t.Fatal("hostile CAR accepted")
	}
	assertNothingWritten(t, parent)

	// Accepted DAG, failure while writing (a block is missing): the parents go again.
	missing, _ := bundleish(t, child{"a", rawFile(t, "absent from the CAR")})
	car = writeHostileCAR(t, missing)
	parent = t.TempDir()
	if _, err := UnpackCAR(ctx, car, filepath.Join(parent, "x", "y", "out"), UnpackOptions{}); err == nil {
		t.Fatal("CAR with a missing block accepted")
	}
	assertNothingWritten(t, parent)
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536 << 10: "1.5 MiB", DefaultMaxSize: "64 GiB", 1 << 40: "1 TiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// multiLeafFile is a UnixFS file over n raw leaves of size bytes each (leaf i all 'a'+i), with
// its leaves and its content.
func multiLeafFile(tb testing.TB, size, n int) (file *mdag.ProtoNode, leaves []ipld.Node, content []byte) {
	fs := ft.NewFSNode(ft.TFile)
	var kids []child
	for i := 0; i < n; i++ {
		data := strings.Repeat(string(rune('a'+i)), size)
		leaf := rawFile(tb, data)
		leaves = append(leaves, leaf)
		kids = append(kids, child{"", leaf})
		content = append(content, data...)
		fs.AddBlockSize(uint64(size))
	}
	data, err := fs.GetBytes()
	if err != nil {
		tb.Fatal(err)
	}
	return protoNode(data, kids...), leaves, content
}

// A file's full leaves are checked two at a time (the DagReader preloads them in groups the
// unpacker pairs); a forged leaf in either place of a pair is still refused, and a good file
// comes out byte for byte.
func TestUnpackChecksLeavesInPairs(t *testing.T) {
	for _, mode := range []string{"dagreader", "pooled"} {
		for _, nLeaves := range []int{4, 5} {
			t.Run(fmt.Sprintf("%s/%d leaves", mode, nLeaves), func(t *testing.T) {
				checkLeavesInPairs(t, mode == "pooled", nLeaves)
			})
		}
	}
}

func checkLeavesInPairs(t *testing.T, pooled bool, nLeaves int) {
	const leafSize = 1024
	file, leaves, want := multiLeafFile(t, leafSize, nLeaves)
	var leafGets int64
	unpack := func(leaves []ipld.Node) (string, error) {
		root, nodes := bundleish(t, child{"data.bin", file})
		car := writeHostileCAR(t, root, append(append(nodes[:1:1], file), leaves...)...)
		out := filepath.Join(t.TempDir(), "out")
		var err error
		leafGets, err = unpackCARWith(t, car, out, UnpackOptions{}, pooled)
		return out, err
	}
	before := pairsChecked.Load()
	out, err := unpack(leaves)
	if err != nil {
		t.Fatal(err)
	}
	if pooled && leafGets != int64(nLeaves) {
		t.Errorf("%d leaves read through the LeafGetter, want all %d", leafGets, nLeaves)
	}
	if got, err := os.ReadFile(filepath.Join(out, "data.bin")); err != nil || string(got) != string(want) {
		t.Fatalf("unpacked file differs from its leaves (err %v)", err)
	}
	if n := pairsChecked.Load() - before; n != int64(nLeaves/2) {
		t.Errorf("%d pairs of leaves hashed together, want %d", n, nLeaves/2)
	}
	for bad := 0; bad < nLeaves; bad++ {
		t.Run(fmt.Sprintf("leaf %d forged", bad), func(t *testing.T) {
			forged := slices.Clone(leaves)
			b := slices.Clone(leaves[bad].RawData())
			b[leafSize/2] ^= 1 // same length: the pair is still hashed together
			forged[bad] = &forgedNode{Node: leaves[bad], data: b}
			_, err := unpack(forged)
			if err == nil || !strings.Contains(err.Error(), "does not hash to its CID") || !strings.Contains(err.Error(), leaves[bad].Cid().String()) {
				t.Fatalf("want a hash mismatch naming %s, got %v", leaves[bad].Cid(), err)
			}
		})
	}
}

// unpackCARWith unpacks a CAR as UnpackCAR does, with the file leaves read through a
// LeafGetter over the CAR when pooled; leafGets is how many blocks that served.
func unpackCARWith(t testing.TB, car, out string, opts UnpackOptions, pooled bool) (leafGets int64, err error) {
	ng, root, closeCAR, err := OpenCAR(car)
	if err != nil {
		return 0, err
	}
	defer closeCAR()
	lg := &pooledNodes{ng: ng}
	if pooled {
		opts.Leaves = lg
	}
	err = Unpack(context.Background(), ng, root, out, opts)
	return lg.gets.Load(), err
}

// pooledNodes serves a NodeGetter's blocks as a LeafGetter does, each copied into a
// buffer from go-buffer-pool (so the unpacker's give-backs are exercised); gets counts them.
type pooledNodes struct {
	ng   ipld.NodeGetter
	gets atomic.Int64
}

func (p *pooledNodes) GetPooled(ctx context.Context, c cid.Cid) (blocks.Block, bool, error) {
	nd, err := p.ng.Get(ctx, c)
	if err != nil {
		return nil, false, err
	}
	p.gets.Add(1)
	buf := pool.Get(len(nd.RawData()))
	copy(buf, nd.RawData())
	blk, err := blocks.NewBlockWithCid(buf, c)
	return blk, err == nil, err
}

// Files in every shape unpack the same through the pooled leaf path as through boxo's
// DagReader: the shape Pack writes (two levels of File nodes over raw leaves) takes the
// pooled path; others (dag-pb leaves, a root holding data beside its links, a raw leaf
// hashed with another function) fall back to the DagReader; sizes that do not add up are
// refused alike.
func TestPooledLeavesMatchDagReader(t *testing.T) {
	fileOver := func(data []byte, kids ...ipld.Node) *mdag.ProtoNode {
		fs := ft.NewFSNode(ft.TFile)
		fs.SetData(data)
		var cs []child
		for _, k := range kids {
			fs.AddBlockSize(uint64(len(k.RawData())))
			cs = append(cs, child{"", k})
		}
		b, err := fs.GetBytes()
		if err != nil {
			t.Fatal(err)
		}
		return protoNode(b, cs...)
	}
	half1, leaves1, content1 := multiLeafFile(t, 512, 3)
	half2, leaves2, content2 := multiLeafFile(t, 512, 2)
	twoLevel := fileOver(nil, half1, half2)
	pbLeaf := protoNode(ft.FilePBData([]byte("dag-pb leaf data"), 16))
	withPB := fileOver(nil, leaves1[0], pbLeaf)
	withData := fileOver([]byte("own data"), leaves1[0])
	sha512Leaf, err := mdag.NewRawNodeWPrefix([]byte("sha2-512 leaf"), cid.Prefix{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_512, MhLength: -1})
	if err != nil {
		t.Fatal(err)
	}
	with512 := fileOver(nil, sha512Leaf, leaves1[1])
	every := append(append(slices.Clone(leaves1), leaves2...), half1, half2, pbLeaf, sha512Leaf)
	cases := []struct {
		name   string
		file   *mdag.ProtoNode
		pooled bool // takes the pooled path
		want   string
	}{
		{"two levels of File nodes", twoLevel, true, string(content1) + string(content2)},
		{"a dag-pb leaf", withPB, false, ""},
		{"data beside links", withData, false, ""},
		{"a sha2-512 leaf", with512, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root, nodes := bundleish(t, child{"data.bin", tc.file})
			car := writeHostileCAR(t, root, append(append(nodes[:1:1], tc.file), every...)...)
			outs := map[bool]string{}
			errs := map[bool]error{}
			var leafGets int64
			for _, pooled := range []bool{false, true} {
				outs[pooled] = filepath.Join(t.TempDir(), "out")
				leafGets, errs[pooled] = unpackCARWith(t, car, outs[pooled], UnpackOptions{}, pooled)
			}
			if took := leafGets > 0; took != tc.pooled {
				t.Errorf("%d leaves read through the LeafGetter; want the pooled path taken: %v", leafGets, tc.pooled)
			}
			if (errs[false] == nil) != (errs[true] == nil) {
				t.Fatalf("DagReader: %v; pooled: %v", errs[false], errs[true])
			}
			if errs[false] != nil {
				return
			}
			a, _ := os.ReadFile(filepath.Join(outs[false], "data.bin"))
			b, _ := os.ReadFile(filepath.Join(outs[true], "data.bin"))
			if string(a) != string(b) {
				t.Fatalf("DagReader wrote %q, pooled %q", a, b)
			}
			if tc.want != "" && string(b) != tc.want {
				t.Fatalf("pooled wrote %d bytes, want the %d of the leaves", len(b), len(tc.want))
			}
		})
	}
}

// A CAR cut short by another process after it was opened (its index built) fails the read
// of a block past the cut with an error. Read through a mapping, as go-car's OpenReadOnly
// does, the same read is a SIGBUS, which kills the process: the test binary would crash.
func TestOpenCARTruncatedWhileOpen(t *testing.T) {
	file, leaves, _ := multiLeafFile(t, 64<<10, 8)
	root, nodes := bundleish(t, child{"data.bin", file})
	car := writeHostileCAR(t, root, append(append(nodes[:1:1], file), leaves...)...)
	ng, _, closeCAR, err := OpenCAR(car)
	if err != nil {
		t.Fatal(err)
	}
	defer closeCAR()
	// Whole pages go, so that a mapping of the file would fault on the last leaf's bytes.
	if err := os.Truncate(car, 4096); err != nil {
		t.Fatal(err)
	}
	last := leaves[len(leaves)-1].Cid()
	if _, err := ng.Get(context.Background(), last); err == nil {
		t.Fatalf("block %s read from a CAR cut to 4 KiB", last)
	}
	if _, err := UnpackCAR(context.Background(), car, filepath.Join(t.TempDir(), "out"), UnpackOptions{}); err == nil {
		t.Fatal("unpack of a truncated CAR succeeded")
	}
}

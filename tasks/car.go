package tasks

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	mdag "github.com/ipfs/boxo/ipld/merkledag"
	blocks "github.com/ipfs/go-block-format"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	carv2 "github.com/ipld/go-car/v2"
	carbs "github.com/ipld/go-car/v2/blockstore"
	"github.com/ipld/go-car/v2/storage"
	pool "github.com/libp2p/go-buffer-pool"
)

// WriteCAR writes a CARv1 with root as its only root and every block of the DAG under it,
// each once, in depth-first order (what `ipfs dag export` writes).
func WriteCAR(ctx context.Context, dag ipld.DAGService, root cid.Cid, w io.Writer) error {
	car, err := storage.NewWritable(onlyWriter{w}, []cid.Cid{root}, carv2.WriteAsCarV1(true))
	if err != nil {
		return err
	}
	seen := cid.NewSet()
	var walk func(c cid.Cid) error
	walk = func(c cid.Cid) error {
		if !seen.Visit(c) {
			return nil
		}
		nd, err := dag.Get(ctx, c)
		if err != nil {
			return fmt.Errorf("block %s: %w", c, err)
		}
		if err := car.Put(ctx, c.KeyString(), nd.RawData()); err != nil {
			return err
		}
		for _, l := range nd.Links() {
			if err := walk(l.Cid); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return err
	}
	return car.Finalize()
}

// onlyWriter hides io.WriterAt, so go-car streams from the current position.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(b []byte) (int, error) { return o.w.Write(b) }

// carGetter serves blocks from a CAR file. Blocks are not trusted: Unpack re-hashes them.
type carGetter struct{ bs *carbs.ReadOnly }

func (g carGetter) Get(ctx context.Context, c cid.Cid) (ipld.Node, error) {
	blk, err := g.bs.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	// Rebuild the block under the requested CID: the CAR index may be keyed by multihash.
	blk, err = blocks.NewBlockWithCid(blk.RawData(), c)
	if err != nil {
		return nil, err
	}
	switch c.Prefix().Codec {
	case cid.DagProtobuf:
		return mdag.DecodeProtobufBlock(blk)
	case cid.Raw:
		return mdag.DecodeRawBlock(blk)
	}
	return nil, fmt.Errorf("block %s: codec 0x%x is not dag-pb or raw", c, c.Prefix().Codec)
}

func (g carGetter) GetMany(ctx context.Context, cs []cid.Cid) <-chan *ipld.NodeOption {
	out := make(chan *ipld.NodeOption, len(cs))
	for _, c := range cs {
		nd, err := g.Get(ctx, c)
		out <- &ipld.NodeOption{Node: nd, Err: err}
	}
	close(out)
	return out
}

// OpenCAR opens a CAR file (v1 or v2) with exactly one root and returns a read-only
// NodeGetter over its blocks. Call close when done.
//
// The file is read with pread, not mapped (go-car's OpenReadOnly maps it): a CAR that
// another process truncates while it is read then fails the read with an error instead
// of killing evalmesh with SIGBUS, and on this project's VM `BenchmarkUnpack` spent
// 0.89× the CPU (265-282 MB per CPU-second against 237-243, alternating, 3 rounds): a
// page fault per 4 KiB of the mapping costs more than the copy. It is the reader the
// fuzz target already drives (openCARReaderAt).
func OpenCAR(carPath string) (ng ipld.NodeGetter, root cid.Cid, close func() error, err error) {
	f, err := os.Open(carPath)
	if err != nil {
		return nil, cid.Undef, nil, fmt.Errorf("CAR file: %w", err)
	}
	ng, root, closeBS, err := openCARReaderAt(f, carPath)
	if err != nil {
		f.Close()
		return nil, cid.Undef, nil, err
	}
	return ng, root, func() error {
		err := closeBS()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// openCARReaderAt reads a CAR through r: OpenCAR's file, or bytes in memory (the fuzz target).
func openCARReaderAt(r io.ReaderAt, name string) (ipld.NodeGetter, cid.Cid, func() error, error) {
	bs, err := carbs.NewReadOnly(r, nil, carv2.ZeroLengthSectionAsEOF(true))
	if err != nil {
		return nil, cid.Undef, nil, fmt.Errorf("%s: not a readable CAR file: %w", name, err)
	}
	return carRoot(bs, name)
}

func carRoot(bs *carbs.ReadOnly, carPath string) (ipld.NodeGetter, cid.Cid, func() error, error) {
	roots, err := bs.Roots()
	if err != nil {
		bs.Close()
		return nil, cid.Undef, nil, fmt.Errorf("%s: %w", carPath, err)
	}
	if len(roots) != 1 {
		bs.Close()
		return nil, cid.Undef, nil, fmt.Errorf("%s: has %d roots; a bundle CAR has exactly one", carPath, len(roots))
	}
	return carGetter{bs}, roots[0], bs.Close, nil
}

// UnpackCAR unpacks the bundle in a CAR file into dir (see Unpack) and returns its root.
func UnpackCAR(ctx context.Context, carPath string, dir string, opts UnpackOptions) (cid.Cid, error) {
	ng, root, closeFn, err := OpenCAR(carPath)
	if err != nil {
		return cid.Undef, err
	}
	defer closeFn()
	if err := Unpack(ctx, ng, root, dir, opts); err != nil {
		return root, err
	}
	return root, nil
}

// CARWriterDAG is a DAGService that streams every added block into a CARv1 file, for
// `evalmesh task pack --car` without a node: blocks go to disk as the importer makes
// them, and SetRoot patches the header at the end (root CIDs of a bundle all have the
// same length, so the header keeps its size).
type CARWriterDAG struct {
	f       *os.File
	car     storage.WritableCar
	nodeMap        // dag-pb nodes, for the importer's own look-ups
	path    string // final name; blocks go to f (a temporary file beside it)
}

// placeholderRoot has the byte length of any CIDv1 sha2-256 dag-pb or raw CID.
var placeholderRoot = func() cid.Cid {
	c, _ := CidBuilder.Sum(nil)
	return c
}()

// NewCARWriterDAG returns a DAGService writing into a temporary file beside path; Finish
// renames it to path, so a crash or an error never leaves a truncated CAR under that name.
func NewCARWriterDAG(path string) (*CARWriterDAG, error) {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("CAR %s: the folder %s does not exist; create it first or choose another path", path, filepath.Dir(path))
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("CAR %s: is a folder; give a file name, e.g. %s", path, filepath.Join(path, "bundle.car"))
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("CAR %s: %w", path, err)
	}
	car, err := storage.NewWritable(onlyWriter{f}, []cid.Cid{placeholderRoot}, carv2.WriteAsCarV1(true))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &CARWriterDAG{f: f, car: car, nodeMap: nodeMap{}, path: path}, nil
}

// Finish writes root into the header, syncs and closes the file.
func (d *CARWriterDAG) Finish(root cid.Cid) error {
	if root.ByteLen() != placeholderRoot.ByteLen() {
		d.Abort()
		return fmt.Errorf("root %s: unexpected CID length", root)
	}
	if err := d.car.Finalize(); err != nil {
		d.Abort()
		return err
	}
	if err := d.f.Close(); err != nil {
		os.Remove(d.f.Name())
		return err
	}
	tmp := d.f.Name()
	if err := carv2.ReplaceRootsInFile(tmp, []cid.Cid{root}); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, d.path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(d.path))
}

func syncFile(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Abort closes and removes the temporary file.
func (d *CARWriterDAG) Abort() {
	d.f.Close()
	os.Remove(d.f.Name())
}

func (d *CARWriterDAG) Add(ctx context.Context, n ipld.Node) error {
	if n.Cid().Prefix().Codec == cid.DagProtobuf {
		d.nodeMap[n.Cid()] = n
		return d.car.Put(ctx, n.Cid().KeyString(), n.RawData())
	}
	if err := d.car.Put(ctx, n.Cid().KeyString(), n.RawData()); err != nil {
		return err
	}
	recycleLeaf(n) // on disk now
	return nil
}

func (d *CARWriterDAG) AddMany(ctx context.Context, ns []ipld.Node) error {
	return addEach(ctx, d.Add, ns)
}

// NewHashOnlyDAG returns a DAGService that keeps only the small dag-pb nodes (folders and
// file link nodes) and drops raw leaves: enough to compute a root CID (`task pack`
// without --car) in constant memory per byte of data.
func NewHashOnlyDAG() ipld.DAGService { return &hashOnlyDAG{nodeMap{}} }

type hashOnlyDAG struct{ nodeMap }

func (d *hashOnlyDAG) Add(ctx context.Context, n ipld.Node) error {
	if n.Cid().Prefix().Codec == cid.DagProtobuf {
		d.nodeMap[n.Cid()] = n
		return nil
	}
	recycleLeaf(n)
	return nil
}
func (d *hashOnlyDAG) AddMany(ctx context.Context, ns []ipld.Node) error {
	return addEach(ctx, d.Add, ns)
}

// recycleLeaf returns a raw leaf's chunk buffer to the pool once the leaf is stored or
// dropped: the importer has already linked it (it adds a leaf after taking its CID and
// size), and boxo's chunker took the buffer from this same pool, so it serves the next
// chunk instead of going to the garbage collector.
func recycleLeaf(n ipld.Node) {
	if b := n.RawData(); cap(b) == ChunkSize {
		pool.Put(b[:cap(b)])
	}
}

func addEach(ctx context.Context, add func(context.Context, ipld.Node) error, ns []ipld.Node) error {
	for _, n := range ns {
		if err := add(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// nodeMap is the look-up half of the in-memory DAGs: the nodes they keep, by CID.
type nodeMap map[cid.Cid]ipld.Node

func (m nodeMap) Get(ctx context.Context, c cid.Cid) (ipld.Node, error) {
	if n, ok := m[c]; ok {
		return n, nil
	}
	return nil, ipld.ErrNotFound{Cid: c}
}
func (m nodeMap) GetMany(ctx context.Context, cs []cid.Cid) <-chan *ipld.NodeOption {
	return getManyFrom(ctx, m, cs)
}
func (m nodeMap) Remove(ctx context.Context, c cid.Cid) error { delete(m, c); return nil }
func (m nodeMap) RemoveMany(ctx context.Context, cs []cid.Cid) error {
	for _, c := range cs {
		delete(m, c)
	}
	return nil
}

func getManyFrom(ctx context.Context, g ipld.NodeGetter, cs []cid.Cid) <-chan *ipld.NodeOption {
	out := make(chan *ipld.NodeOption, len(cs))
	for _, c := range cs {
		nd, err := g.Get(ctx, c)
		out <- &ipld.NodeOption{Node: nd, Err: err}
	}
	close(out)
	return out
}

// NewMemDAG returns an in-memory DAGService holding every block (tests, small bundles).
func NewMemDAG() ipld.DAGService { return &memDAG{nodeMap{}} }

type memDAG struct{ nodeMap }

func (d *memDAG) Add(ctx context.Context, n ipld.Node) error { d.nodeMap[n.Cid()] = n; return nil }
func (d *memDAG) AddMany(ctx context.Context, ns []ipld.Node) error {
	return addEach(ctx, d.Add, ns)
}

// CopyBundle copies the bundle folder src into the new folder dir, refusing what Unpack
// would refuse for the same folder packed as a CAR (symlinks and special files, names
// Unpack refuses, more than opts.MaxSize bytes or opts.MaxEntries entries; hidden names
// are skipped as Pack skips them), and returns its root CID. No file data is held in
// memory — a bundle may be tens of GiB: src is packed hash-only first (the CID, the
// refusals and the size, all before anything is written), copied into a temporary folder
// beside dir, and the copy packed again; it is renamed to dir only if it has the same
// CID (else src changed during the copy).
func CopyBundle(ctx context.Context, src, dir string, opts UnpackOptions) (cid.Cid, error) {
	opts.defaults()
	if err := checkTarget(dir, "unpack:"); err != nil {
		return cid.Undef, err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return cid.Undef, err
	}
	if !fi.IsDir() {
		return cid.Undef, &UnsafeError{Reason: fmt.Sprintf("%s is a file; a bundle is a folder", src)}
	}
	var size int64
	root, err := Pack(ctx, src, NewHashOnlyDAG(), PackOptions{Unchecked: true, Progress: func(n int64) { size = n }})
	if err != nil {
		return cid.Undef, err
	}
	if size > opts.MaxSize {
		return cid.Undef, &UnsafeError{Err: ErrTooLarge, Reason: fmt.Sprintf("%v: the folder holds %d bytes, over --max-size %d (%s)", ErrTooLarge, size, opts.MaxSize, humanBytes(opts.MaxSize))}
	}
	err = intoNewFolder(dir, func(tmp string) error {
		c := &copier{ctx: ctx, opts: opts}
		if err := c.copyDir(src, tmp, ""); err != nil {
			return err
		}
		again, err := Pack(ctx, tmp, NewHashOnlyDAG(), PackOptions{Unchecked: true})
		if err != nil {
			return err
		}
		if !again.Equals(root) {
			return fmt.Errorf("unpack: %s changed while it was copied (%s before, %s after); copy it again", src, root, again)
		}
		return nil
	})
	if err != nil {
		return cid.Undef, err
	}
	return root, nil
}

// copier copies a folder with Unpack's checks on names and counts.
type copier struct {
	ctx     context.Context
	opts    UnpackOptions
	entries int
	done    int64
}

func (c *copier) copyDir(src, dst, rel string) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // as Pack
		}
		childRel := joinRel(rel, name)
		if r := checkName(name); r != "" {
			return &UnsafeError{Path: childRel, Reason: r}
		}
		if c.entries++; c.entries > c.opts.MaxEntries {
			return &UnsafeError{Path: childRel, Reason: fmt.Sprintf("more than %d files and folders", c.opts.MaxEntries)}
		}
		s, d := filepath.Join(src, name), filepath.Join(dst, name)
		switch t := e.Type(); {
		case t.IsDir():
			if strings.Count(childRel, "/") >= maxDepth {
				return &UnsafeError{Path: childRel, Reason: fmt.Sprintf("folders nested more than %d deep", maxDepth)}
			}
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			if err := c.copyDir(s, d, childRel); err != nil {
				return err
			}
		case t.IsRegular():
			if err := c.copyFile(s, d); err != nil {
				return fmt.Errorf("%s: %w", childRel, err)
			}
		default:
			return &UnsafeError{Path: childRel, Reason: describeMode(t)}
		}
	}
	return nil
}

func (c *copier) copyFile(src, dst string) error {
	var wrap func(io.Writer) io.Writer
	if c.opts.Progress != nil {
		wrap = func(w io.Writer) io.Writer { return &progressWriter{w: w, done: &c.done, fn: c.opts.Progress} }
	}
	return copyFile(src, dst, wrap, perFileSync)
}

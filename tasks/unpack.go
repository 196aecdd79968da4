package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	mdag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	upb "github.com/ipfs/boxo/ipld/unixfs/pb"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	mh "github.com/multiformats/go-multihash"

	"github.com/evalmesh/evalmesh/internal/rawleaf"
)

// DefaultMaxSize is the default bound on the declared size of a DAG to unpack (64 GiB).
const DefaultMaxSize int64 = 64 << 30

// DefaultMaxEntries bounds the number of files and folders in a DAG to unpack, so a DAG
// that links the same directory block from itself many times over cannot make the walk
// explode.
const DefaultMaxEntries = 1 << 20

// maxDepth bounds folder nesting.
const maxDepth = 256

// UnpackOptions tunes Unpack.
type UnpackOptions struct {
	// MaxSize refuses a DAG whose files declare more bytes in total (default 64 GiB).
	MaxSize int64
	// MaxEntries refuses a DAG with more files and folders (default DefaultMaxEntries).
	MaxEntries int
	// Progress, if set, is called with the number of file bytes written so far.
	Progress func(bytesDone int64)
	// Leaves, if set, serves the raw leaves of files in reused buffers (node's pack store),
	// instead of the DagReader over the DAG getter; they are hashed all the same.
	Leaves LeafGetter
}

func (o *UnpackOptions) defaults() {
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
}

// UnsafeError is a refusal to unpack: Path is the offending path inside the DAG ("" for
// the root), Reason what is wrong with it.
type UnsafeError struct {
	Path   string
	Reason string
	// Err, when set, is the sentinel the refusal is an instance of (ErrTooLarge), for
	// errors.Is.
	Err error
}

func (e *UnsafeError) Unwrap() error { return e.Err }

func (e *UnsafeError) Error() string {
	p := e.Path
	if p == "" {
		p = "/"
	}
	return fmt.Sprintf("refusing to unpack: %s: %s", p, e.Reason)
}

// ErrTooLarge is wrapped by the UnsafeError for a DAG over MaxSize.
var ErrTooLarge = errors.New("declared size exceeds the limit")

// entry is one file or folder of a planned unpack.
type entry struct {
	path string // slash-separated, relative to the root
	// node is kept for small dag-pb nodes only; a raw leaf (up to a chunk of file data)
	// is fetched again when written, so planning a folder of many small files does not
	// hold all their bytes in memory.
	node ipld.Node
	c    cid.Cid
	dir  bool
	size uint64 // declared file size
}

// planner walks a DAG and checks everything before a byte is written.
type planner struct {
	ctx     context.Context
	ng      ipld.NodeGetter
	ds      ipld.DAGService
	opts    UnpackOptions
	total   uint64
	entries []entry
}

// checkName refuses names that are not one plain path component.
func checkName(name string) string {
	switch {
	case name == "":
		return "empty name"
	case name == "." || name == "..":
		return fmt.Sprintf("name %q escapes the folder", name)
	case strings.HasPrefix(name, "/"):
		return fmt.Sprintf("absolute name %q", name)
	case strings.Contains(name, "/"):
		return fmt.Sprintf("name %q contains '/'", name)
	case strings.Contains(name, "\\"):
		return fmt.Sprintf("name %q contains '\\'", name)
	case strings.IndexByte(name, 0) >= 0:
		return "name contains a NUL byte"
	case len(name) > 255:
		return "name longer than 255 bytes"
	}
	return ""
}

func (p *planner) walk(nd ipld.Node, rel string, depth int) error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	kind, size, err := classify(nd)
	if err != nil {
		return &UnsafeError{Path: rel, Reason: err.Error()}
	}
	if len(p.entries) >= p.opts.MaxEntries {
		return &UnsafeError{Path: rel, Reason: fmt.Sprintf("more than %d files and folders", p.opts.MaxEntries)}
	}
	switch kind {
	case kindFile:
		p.total += size
		if size > math.MaxInt64 || p.total > uint64(p.opts.MaxSize) {
			return &UnsafeError{Path: rel, Err: ErrTooLarge, Reason: fmt.Sprintf("%v: this file declares %d bytes, %d in total so far, over --max-size %d (%s); raise --max-size only for a bundle you expect to be that large", ErrTooLarge, size, p.total, p.opts.MaxSize, humanBytes(p.opts.MaxSize))}
		}
		e := entry{path: rel, c: nd.Cid(), size: size}
		if _, raw := nd.(*mdag.RawNode); !raw {
			e.node = nd
		}
		p.entries = append(p.entries, e)
		return nil
	case kindDir:
		if depth > maxDepth {
			return &UnsafeError{Path: rel, Reason: fmt.Sprintf("folders nested more than %d deep", maxDepth)}
		}
		p.entries = append(p.entries, entry{path: rel, c: nd.Cid(), dir: true})
		d, err := uio.NewDirectoryFromNode(p.ds, nd)
		if err != nil {
			return &UnsafeError{Path: rel, Reason: "unreadable directory: " + err.Error()}
		}
		seen := map[string]bool{}
		var links []*ipld.Link
		err = d.ForEachLink(p.ctx, func(l *ipld.Link) error {
			if r := checkName(l.Name); r != "" {
				return &UnsafeError{Path: joinRel(rel, l.Name), Reason: r}
			}
			if seen[l.Name] {
				return &UnsafeError{Path: joinRel(rel, l.Name), Reason: "duplicate name in its folder"}
			}
			seen[l.Name] = true
			links = append(links, l)
			return nil
		})
		if err != nil {
			var ue *UnsafeError
			if errors.As(err, &ue) {
				return ue
			}
			return &UnsafeError{Path: rel, Reason: "unreadable directory: " + err.Error()}
		}
		for _, l := range links {
			child, err := p.ng.Get(p.ctx, l.Cid)
			childRel := joinRel(rel, l.Name)
			if err != nil {
				return fmt.Errorf("%s: block %s: %w", childRel, l.Cid, err)
			}
			if err := p.walk(child, childRel, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return &UnsafeError{Path: rel, Reason: "unsupported node"}
}

// joinRel joins without cleaning, so an error names the path exactly as the DAG spells it
// (path.Join would turn "public/.." into ".").
func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

const (
	kindFile = iota + 1
	kindDir
)

// classify tells a file from a folder and refuses every other UnixFS type: symlinks
// (a bundle has none, so none can point outside it or be written through), metadata
// nodes, and any type this version does not know (UnixFS has no device files; an
// unknown type number is refused the same way).
func classify(nd ipld.Node) (kind int, size uint64, err error) {
	switch n := nd.(type) {
	case *mdag.RawNode:
		return kindFile, uint64(len(n.RawData())), nil
	case *mdag.ProtoNode:
		fs, err := ft.FSNodeFromBytes(n.Data())
		if err != nil {
			return 0, 0, fmt.Errorf("not a UnixFS node: %v", err)
		}
		switch fs.Type() {
		case upb.Data_File, upb.Data_Raw:
			return kindFile, fs.FileSize(), nil
		case upb.Data_Directory, upb.Data_HAMTShard:
			return kindDir, 0, nil
		case upb.Data_Symlink:
			return 0, 0, errors.New("is a symlink; bundles hold no symlinks (one could point outside the folder or be written through)")
		case upb.Data_Metadata:
			return 0, 0, errors.New("is a UnixFS metadata node; not supported in a bundle")
		default:
			return 0, 0, fmt.Errorf("has unknown UnixFS type %d (device files and other special files are refused)", fs.Type())
		}
	default:
		return 0, 0, fmt.Errorf("block codec 0x%x is neither dag-pb nor raw", nd.Cid().Prefix().Codec)
	}
}

// verifyingGetter re-hashes every block it hands out and allows only the codecs and hash
// function a bundle uses, so a CAR or block store cannot feed a block under a CID it
// does not hash to.
type verifyingGetter struct{ ng ipld.NodeGetter }

func checkPrefix(c cid.Cid) error {
	p := c.Prefix()
	if p.Codec != cid.DagProtobuf && p.Codec != cid.Raw {
		return fmt.Errorf("CID %s: codec 0x%x is not dag-pb or raw", c, p.Codec)
	}
	if p.MhType != mh.SHA2_256 {
		return fmt.Errorf("CID %s: hash 0x%x is not sha2-256", c, p.MhType)
	}
	return nil
}

func (v verifyingGetter) Get(ctx context.Context, c cid.Cid) (ipld.Node, error) {
	if err := checkPrefix(c); err != nil {
		return nil, err
	}
	nd, err := v.ng.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	return checked(c, nd)
}

// checked returns nd if its bytes hash to c.
func checked(c cid.Cid, nd ipld.Node) (ipld.Node, error) {
	sum, err := c.Prefix().Sum(nd.RawData())
	if err != nil {
		return nil, err
	}
	if !sum.Equals(c) {
		return nil, forged(c)
	}
	return nd, nil
}

func forged(c cid.Cid) error {
	return fmt.Errorf("block %s: content does not hash to its CID (corrupt or forged)", c)
}

// GetMany serves a file's leaves as boxo's DagReader preloads them (up to 10 at a time),
// hashing two consecutive full leaves in one pass (internal/rawleaf, 1.66x crypto/sha256
// per core); each is still checked against its own CID.
func (v verifyingGetter) GetMany(ctx context.Context, cs []cid.Cid) <-chan *ipld.NodeOption {
	out := make(chan *ipld.NodeOption, len(cs))
	go func() {
		defer close(out)
		send := func(nd ipld.Node, err error) bool {
			select {
			case out <- &ipld.NodeOption{Node: nd, Err: err}:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for i := 0; i < len(cs); i++ {
			if i+1 < len(cs) && rawleaf.Is(cs[i]) && rawleaf.Is(cs[i+1]) {
				a, b, errA, errB := v.getPair(ctx, cs[i], cs[i+1])
				if !send(a, errA) || !send(b, errB) {
					return
				}
				i++
				continue
			}
			if !send(v.Get(ctx, cs[i])) {
				return
			}
		}
	}()
	return out
}

// getPair gets two raw sha2-256 leaves and checks them, together when they are the same
// length (every full leaf), else one by one.
func (v verifyingGetter) getPair(ctx context.Context, ca, cb cid.Cid) (a, b ipld.Node, errA, errB error) {
	if a, errA = v.ng.Get(ctx, ca); errA != nil {
		b, errB = v.Get(ctx, cb)
		return
	}
	if b, errB = v.ng.Get(ctx, cb); errB != nil {
		a, errA = checked(ca, a)
		return
	}
	if len(a.RawData()) != len(b.RawData()) {
		a, errA = checked(ca, a)
		b, errB = checked(cb, b)
		return
	}
	pairsChecked.Add(1)
	okA, okB := rawleaf.Check2(ca, cb, a.RawData(), b.RawData())
	if !okA {
		a, errA = nil, forged(ca)
	}
	if !okB {
		b, errB = nil, forged(cb)
	}
	return
}

// pairsChecked counts the pairs of leaves getPair hashed together (tests read it).
var pairsChecked atomic.Int64

// plan walks the whole DAG under root and checks every name, type and the declared size.
func plan(ctx context.Context, ng ipld.NodeGetter, root cid.Cid, opts UnpackOptions) (*planner, error) {
	opts.defaults()
	vg := verifyingGetter{ng}
	p := &planner{ctx: ctx, ng: vg, ds: mdag.NewReadOnlyDagService(vg), opts: opts}
	nd, err := vg.Get(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", root, err)
	}
	if kind, _, err := classify(nd); err == nil && kind != kindDir {
		return nil, &UnsafeError{Reason: "the root is a file; a bundle is a folder"}
	}
	if err := p.walk(nd, "", 0); err != nil {
		return nil, err
	}
	return p, nil
}

// DAGSize walks the folders and file roots under root (not the file data) and returns the
// total size its files declare, so a node can refuse an oversized bundle before fetching
// it. It refuses what Unpack would refuse.
func DAGSize(ctx context.Context, dag ipld.NodeGetter, root cid.Cid) (int64, error) {
	p, err := plan(ctx, dag, root, UnpackOptions{MaxSize: math.MaxInt64})
	if err != nil {
		return 0, err
	}
	return int64(p.total), nil
}

// Unpack writes the DAG under root into the new folder dir. Everything is checked first
// (names, types, duplicates, declared size — see classify and checkName); then the files
// are written into a temporary folder beside dir, synced, and renamed to dir at the end,
// so a refusal or a failure leaves no partial dir. dir must not exist, or be an empty
// folder. Blocks are re-hashed as they are read.
func Unpack(ctx context.Context, dag ipld.NodeGetter, root cid.Cid, dir string, opts UnpackOptions) error {
	opts.defaults()
	if err := checkTarget(dir, "unpack:"); err != nil {
		return err
	}
	p, err := plan(ctx, dag, root, opts)
	if err != nil {
		return err
	}
	return intoNewFolder(dir, func(tmp string) error {
		var done int64
		for _, e := range p.entries {
			if e.path == "" {
				continue // the root is tmp itself
			}
			dst := filepath.Join(tmp, filepath.FromSlash(e.path))
			if e.dir {
				// private/ (labels, the scorer's inputs) stays the owner's: everything under
				// it is out of other accounts' reach whatever the files' own modes.
				mode := os.FileMode(0o755)
				if e.path == "private" {
					mode = 0o700
				}
				if err := os.Mkdir(dst, mode); err != nil {
					return err
				}
				continue
			}
			if err := writeFile(ctx, p.ng, opts.Leaves, e, dst, &done, opts.Progress); err != nil {
				return err
			}
		}
		return nil
	})
}

// intoNewFolder creates the folders missing above dir (as `mkdir -p`), runs fill on a
// fresh temporary folder beside dir, makes the tree durable and renames it to dir. On
// any error nothing is left behind: not the temporary folder, not the parents it made.
func intoNewFolder(dir string, fill func(tmp string) error) error {
	parent := filepath.Dir(filepath.Clean(dir))
	undoParents, err := makeParents(parent)
	if err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".unpack-")
	if err != nil {
		undoParents()
		return fmt.Errorf("unpack: cannot create a temporary folder beside %s: %w", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
			undoParents()
		}
	}()
	if err := fill(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	// An empty dir may already exist (a mount point, a folder the caller made).
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		if err := os.Remove(dir); err != nil {
			return fmt.Errorf("unpack: %s: %w", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	ok = true
	return syncDir(parent)
}

// checkTarget accepts a dir that does not exist or is an empty folder; what starts the
// error ("unpack:", "import: --out").
func checkTarget(dir, what string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s exists and is not a folder; choose a new folder", what, dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s %s exists and is not empty; choose a new folder or remove it", what, dir)
	}
	return nil
}

func writeFile(ctx context.Context, ng ipld.NodeGetter, lg LeafGetter, e entry, dst string, done *int64, progress func(int64)) error {
	nd := e.node
	if nd == nil {
		var err error
		if nd, err = ng.Get(ctx, e.c); err != nil {
			return fmt.Errorf("%s: %w", e.path, err)
		}
	}
	var leaves []cid.Cid
	if pn, isProto := nd.(*mdag.ProtoNode); isProto && lg != nil {
		list, ok, err := fileLeaves(ctx, ng, pn, e.size)
		if err != nil {
			return fmt.Errorf("%s: %w", e.path, err)
		}
		if ok {
			leaves = list
		}
	}
	var r io.Reader
	if leaves == nil {
		dr, err := uio.NewDagReader(ctx, nd, ng)
		if err != nil {
			return &UnsafeError{Path: e.path, Reason: "unreadable file: " + err.Error()}
		}
		r = io.LimitReader(dr, int64(e.size)+1)
	}
	// O_EXCL: never open something that is already there (a symlink planted by a racing
	// process included).
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	w := io.Writer(f)
	if progress != nil {
		w = &progressWriter{w: f, done: done, fn: progress}
	}
	var n int64
	if leaves != nil {
		var u uint64
		u, err = writeLeaves(ctx, lg, leaves, w, e.size)
		n = int64(u)
	} else {
		n, err = io.Copy(w, r)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", e.path, err)
	}
	if uint64(n) != e.size {
		f.Close()
		return &UnsafeError{Path: e.path, Reason: fmt.Sprintf("file data (%d+ bytes) does not match its declared size %d", n, e.size)}
	}
	if perFileSync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

type progressWriter struct {
	w    io.Writer
	done *int64
	fn   func(int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	*p.done += int64(n)
	p.fn(*p.done)
	return n, err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// makeParents creates dir and the missing folders above it, and returns a func removing
// the ones it created (each only if still empty), so a failed unpack or import leaves the
// file system as it found it.
func makeParents(dir string) (undo func(), err error) {
	var created []string
	for p := dir; ; p = filepath.Dir(p) {
		_, err := os.Lstat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	undo = func() {
		for _, p := range created { // deepest first
			os.Remove(p)
		}
	}
	if len(created) == 0 {
		return undo, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		undo()
		return nil, fmt.Errorf("creating the folder %s: %w", dir, err)
	}
	return undo, nil
}

// humanBytes writes n in binary units for messages (64 GiB, 1.5 MiB).
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, exp := float64(n)/1024, 0
	for v >= 1024 && exp < 5 {
		v /= 1024
		exp++
	}
	return fmt.Sprintf("%.4g %ciB", v, "KMGTPE"[exp])
}

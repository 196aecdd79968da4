package tasks

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	chunker "github.com/ipfs/boxo/chunker"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	mh "github.com/multiformats/go-multihash"
)

// ChunkSize is kubo's default fixed-size chunker (size-262144).
const ChunkSize = 256 << 10

// CidBuilder is the CID prefix of every block a bundle is made of: CIDv1, dag-pb for
// UnixFS nodes (raw for leaves, set by the importer), sha2-256 — what
// `ipfs add --cid-version=1` uses.
var CidBuilder cid.Builder = cid.Prefix{Version: 1, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1}

// BundleCID is the root CID of the valid bundle dir, computed by hashing alone (nothing is
// stored): the one way to name a bundle folder by its CID.
func BundleCID(ctx context.Context, dir string) (cid.Cid, error) {
	return Pack(ctx, dir, NewHashOnlyDAG(), PackOptions{})
}

// PackOptions tunes Pack.
type PackOptions struct {
	// Unchecked packs any folder (or file), not only a valid bundle.
	Unchecked bool
	// Progress, if set, is called with the number of file bytes read so far.
	Progress func(bytesDone int64)
}

// Pack adds the folder dir to dag as a UnixFS DAG and returns its root CID, the same CID
// `ipfs add -r --cid-version=1 dir` prints (kubo defaults: 256 KiB fixed chunks, raw
// leaves, balanced layout with 174 links per node, basic directories that turn into
// HAMT shards above 256 KiB of entries). Like kubo without --hidden, names starting
// with "." are skipped. Symlinks, devices, sockets and pipes are refused: a bundle is
// plain files and folders. Modes and mtimes are not stored.
//
// Unless opts.Unchecked, dir must be a valid bundle (Open).
func Pack(ctx context.Context, dir string, dag ipld.DAGService, opts PackOptions) (cid.Cid, error) {
	if !opts.Unchecked {
		if _, err := Open(dir); err != nil {
			return cid.Undef, fmt.Errorf("%w\n(pack refuses invalid bundles; --unchecked packs any folder)", err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return cid.Undef, err
	}
	p := &packer{ctx: ctx, dag: dag, progress: opts.Progress, buf: make([]byte, ChunkSize)}
	var nd ipld.Node
	switch {
	case fi.IsDir():
		nd, err = p.addDir(dir, ".")
	case fi.Mode().IsRegular():
		nd, err = p.addFile(dir, filepath.Base(dir))
	default:
		err = fmt.Errorf("%s: %s; pack takes a folder or a regular file", dir, describeMode(fi.Mode()))
	}
	if err != nil {
		return cid.Undef, err
	}
	return nd.Cid(), nil
}

// ChangedError is a file that changed while Pack read it: its CID would name bytes that were
// never on disk at any one time.
type ChangedError struct {
	Path          string // bundle-relative
	Before, After string // size and times
	Read          int64  // bytes read
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s changed while it was being packed (before: %s; after: %s; %d bytes read): stop whatever writes to it and pack again", e.Path, e.Before, e.After, e.Read)
}

type packer struct {
	ctx      context.Context
	dag      ipld.DAGService
	progress func(int64)
	done     int64
	buf      []byte
}

func describeMode(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "is a symlink (bundles hold no symlinks: copy the target in instead)"
	case m&os.ModeDevice != 0:
		return "is a device file"
	case m&os.ModeNamedPipe != 0:
		return "is a named pipe"
	case m&os.ModeSocket != 0:
		return "is a socket"
	case m&os.ModeIrregular != 0:
		return "is an irregular file"
	}
	return "is not a regular file or folder"
}

func (p *packer) addDir(abs, rel string) (ipld.Node, error) {
	if err := p.ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(abs) // sorted by name, as kubo's walk
	if err != nil {
		return nil, err
	}
	d, err := uio.NewDirectory(p.dag, uio.WithCidBuilder(CidBuilder))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // kubo's `ipfs add -r` skips hidden files unless --hidden
		}
		childAbs := filepath.Join(abs, name)
		childRel := filepath.ToSlash(filepath.Join(rel, name))
		var nd ipld.Node
		switch t := e.Type(); {
		case t.IsDir():
			nd, err = p.addDir(childAbs, childRel)
		case t.IsRegular():
			nd, err = p.addFile(childAbs, childRel)
		default:
			return nil, fmt.Errorf("%s: %s", childRel, describeMode(t))
		}
		if err != nil {
			return nil, err
		}
		if err := d.AddChild(p.ctx, name, nd); err != nil {
			return nil, fmt.Errorf("%s: %w", childRel, err)
		}
	}
	nd, err := d.GetNode()
	if err != nil {
		return nil, err
	}
	if err := p.dag.Add(p.ctx, nd); err != nil {
		return nil, err
	}
	return nd, nil
}

// countingReader counts the bytes the chunker reads from one file and reports progress.
type countingReader struct {
	r    io.Reader
	p    *packer
	rel  string
	read int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.count(n)
	}
	return n, err
}

// count records n more bytes of the file read; the parallel path (preadSplitter) calls it
// for each chunk as the importer takes it, in file order, on the importer's goroutine.
func (c *countingReader) count(n int) {
	c.read += int64(n)
	c.p.done += int64(n)
	if c.p.progress != nil {
		c.p.progress(c.p.done)
	}
	if afterPackRead != nil {
		afterPackRead(c.rel, c.read)
	}
}

// afterPackRead, when set (by tests only), is called after each read of a file being
// packed with its bundle-relative name and the bytes read so far: the seam that lets a test
// change a file in the middle of a pack, deterministically.
var afterPackRead func(rel string, read int64)

// addFile adds one regular file. It refuses a file that is not regular when opened (see
// OpenRegular), and one that changed while it was read (its size, mtime or ctime differ
// before and after, or the bytes read are not its size): the CID would otherwise name
// content that never existed on disk.
func (p *packer) addFile(abs, rel string) (ipld.Node, error) {
	f, fi, err := OpenRegular(abs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	defer f.Close()
	before := stampOf(fi)
	cr := &countingReader{r: f, p: p, rel: rel}
	var r io.Reader = cr
	params := helpers.DagBuilderParams{
		Dagserv:    p.dag,
		RawLeaves:  true,
		Maxlinks:   helpers.DefaultLinksPerBlock,
		CidBuilder: CidBuilder,
	}
	var spl chunker.Splitter
	if before.size >= parallelMinChunks*ChunkSize {
		// Regular file of known size, fixed-size chunks: workers pread and hash the chunks.
		b := newPrehashedBuilder()
		ps := newPreadSplitter(f, before.size, r, b, cr.count)
		defer ps.close()
		spl, params.CidBuilder = ps, b
	} else {
		spl = chunker.NewSizeSplitter(r, ChunkSize)
	}
	db, err := params.New(spl)
	if err != nil {
		return nil, err
	}
	nd, err := balanced.Layout(db)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	fi, err = f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if after := stampOf(fi); !after.same(before) || cr.read != before.size {
		return nil, &ChangedError{Path: rel, Before: before.String(), After: after.String(), Read: cr.read}
	}
	return nd, nil
}

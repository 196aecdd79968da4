package tasks

import (
	"context"
	"fmt"
	"io"
	"os"

	mdag "github.com/ipfs/boxo/ipld/merkledag"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// Info is what `evalmesh task inspect` shows: the metadata plus the bundle's identity.
type Info struct {
	CID    string `json:"cid"`
	Source string `json:"source"` // "folder" or "car"
	Path   string `json:"path"`
	// Size is the total declared size of the bundle's files in bytes.
	Size int64 `json:"size"`
	// Sealed: the bundle's private part is private.age (docs/bundle-format.md §7).
	Sealed bool `json:"sealed"`
	*Meta
}

// Inspect reads a bundle folder or a CAR file. For a folder it computes the CID (as Pack
// does, without storing blocks); for a CAR it reads task.yaml out of the DAG without
// unpacking, after checking the whole DAG as Unpack would.
func Inspect(ctx context.Context, p string) (*Info, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		b, err := Open(p)
		if err != nil {
			return nil, err
		}
		// The size is what Pack read — the bytes the CID covers, which a CAR of it would
		// declare — so hidden files that pack skips are not counted.
		var size int64
		c, err := Pack(ctx, p, NewHashOnlyDAG(), PackOptions{Unchecked: true, Progress: func(n int64) { size = n }})
		if err != nil {
			return nil, err
		}
		return &Info{CID: c.String(), Source: "folder", Path: p, Size: size, Sealed: b.Sealed, Meta: b.Meta}, nil
	}
	ng, root, closeFn, err := OpenCAR(p)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	m, size, err := MetaFromDAG(ctx, ng, root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &Info{CID: root.String(), Source: "car", Path: p, Size: size, Sealed: sealedInDAG(ctx, ng, root), Meta: m}, nil
}

// MetaFromDAG checks the DAG under root as Unpack would (names, types, declared size),
// then reads and validates its task.yaml. It returns the declared size too.
func MetaFromDAG(ctx context.Context, ng ipld.NodeGetter, root cid.Cid) (*Meta, int64, error) {
	p, err := plan(ctx, ng, root, UnpackOptions{MaxSize: 1<<63 - 1})
	if err != nil {
		return nil, 0, err
	}
	vg := verifyingGetter{ng}
	rootNd, err := vg.Get(ctx, root)
	if err != nil {
		return nil, 0, err
	}
	d, err := uio.NewDirectoryFromNode(mdag.NewReadOnlyDagService(vg), rootNd)
	if err != nil {
		return nil, 0, err
	}
	nd, err := d.Find(ctx, MetaFile)
	if err != nil {
		return nil, 0, fmt.Errorf("no %s at the root of %s: not a bundle", MetaFile, root)
	}
	r, err := uio.NewDagReader(ctx, nd, vg)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", MetaFile, err)
	}
	data, err := io.ReadAll(io.LimitReader(r, maxMetaSize+1))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", MetaFile, err)
	}
	m, err := ParseMeta(data)
	if err != nil {
		return nil, 0, err
	}
	return m, int64(p.total), nil
}

// sealedInDAG reports whether the (already checked) bundle DAG under root holds private.age.
func sealedInDAG(ctx context.Context, ng ipld.NodeGetter, root cid.Cid) bool {
	vg := verifyingGetter{ng}
	rootNd, err := vg.Get(ctx, root)
	if err != nil {
		return false
	}
	d, err := uio.NewDirectoryFromNode(mdag.NewReadOnlyDagService(vg), rootNd)
	if err != nil {
		return false
	}
	_, err = d.Find(ctx, SealedFile)
	return err == nil
}

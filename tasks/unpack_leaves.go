package tasks

// Reading a file's raw leaves in reused buffers (UnpackOptions.Leaves).
//
// Why not boxo's DagReader on this path: profiled on a node's unpack from its pack store
// (node's BenchmarkUnpackFromStore: 4 × 100 MiB and 2,000 × 4 KiB files on tmpfs), a fresh
// 256 KiB slice per leaf cost about a third of the unpack's CPU: the pread faulting in new
// pages, the clearing of each slice, the scavenger's madvise and the GC. The DagReader
// gives no point at which a leaf it was handed is no longer referenced, so its buffers
// cannot be reused; here the writer gives each leaf's buffer back once it is in the file.
// Hand-written because boxo has no pooled reader; it covers only the shape Pack and kubo
// write, and every other file still goes through the DagReader.

import (
	"context"
	"crypto/sha256"
	"io"

	mdag "github.com/ipfs/boxo/ipld/merkledag"
	ft "github.com/ipfs/boxo/ipld/unixfs"
	upb "github.com/ipfs/boxo/ipld/unixfs/pb"
	blocks "github.com/ipfs/go-block-format"
	cid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	pool "github.com/libp2p/go-buffer-pool"

	"github.com/evalmesh/evalmesh/internal/rawleaf"
)

// LeafGetter hands out blocks whose bytes may sit in a buffer from go-buffer-pool: when
// pooled is true the caller gives blk.RawData() back to that pool once done with it. It
// is the shape of node's pack store (and of xfer.PooledGetter). Blocks are not trusted:
// the unpacker hashes every leaf it reads this way.
type LeafGetter interface {
	GetPooled(ctx context.Context, c cid.Cid) (blk blocks.Block, pooled bool, err error)
}

// maxLeafDepth bounds a file's tree on the pooled path: kubo's balanced layout of 64 GiB
// in 256 KiB leaves, 174 links a node, is 4 deep. A deeper file takes the DagReader.
const maxLeafDepth = 32

// fileLeaves lists the raw leaves of the file nd in order, reading its inner nodes through
// ng (which verifies them). ok is false, with no error, when the file is not the shape Pack
// and kubo write: dag-pb File nodes holding no data of their own, over raw sha2-256 leaves,
// and no more leaves than size bytes in 1 KiB pieces (a DAG linking one node many times
// over cannot make the list outgrow the file). The DagReader then reads that file.
func fileLeaves(ctx context.Context, ng ipld.NodeGetter, nd *mdag.ProtoNode, size uint64) (leaves []cid.Cid, ok bool, err error) {
	maxLeaves := size/1024 + 16
	var visit func(nd *mdag.ProtoNode, depth int) (bool, error)
	visit = func(nd *mdag.ProtoNode, depth int) (bool, error) {
		fs, err := ft.FSNodeFromBytes(nd.Data())
		if err != nil || fs.Type() != upb.Data_File || len(fs.Data()) != 0 || len(nd.Links()) == 0 || depth > maxLeafDepth {
			return false, nil
		}
		for _, l := range nd.Links() {
			switch {
			case rawleaf.Is(l.Cid):
				if uint64(len(leaves)) >= maxLeaves {
					return false, nil
				}
				leaves = append(leaves, l.Cid)
			case l.Cid.Prefix().Codec == cid.DagProtobuf:
				child, err := ng.Get(ctx, l.Cid)
				if err != nil {
					return false, err
				}
				inner, isProto := child.(*mdag.ProtoNode)
				if !isProto {
					return false, nil
				}
				if ok, err := visit(inner, depth+1); !ok || err != nil {
					return false, err
				}
			default:
				return false, nil
			}
		}
		return true, nil
	}
	if ok, err = visit(nd, 0); !ok || err != nil {
		return nil, false, err
	}
	return leaves, true, nil
}

// leafData is one leaf on its way from the reader to the writer.
type leafData struct {
	data   []byte
	pooled bool
	err    error
}

func (d leafData) release() {
	if d.pooled {
		pool.Put(d.data)
	}
}

// leafQueue is how many checked leaves wait for the writer (the DagReader preloads 10).
const leafQueue = 8

// writeLeaves writes the leaves in order to w, stopping once more than size bytes are
// written (the caller refuses the file). A second goroutine reads and checks them, two full
// leaves in one hash pass as verifyingGetter.GetMany does, while this one writes; the
// first leaf that cannot be read or does not hash to its CID ends the file with that error.
func writeLeaves(ctx context.Context, lg LeafGetter, leaves []cid.Cid, w io.Writer, size uint64) (written uint64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan leafData, leafQueue)
	go readLeaves(ctx, lg, leaves, ch)
	defer func() {
		cancel()
		for d := range ch {
			d.release()
		}
	}()
	for d := range ch {
		if d.err != nil {
			return written, d.err
		}
		n, err := w.Write(d.data)
		written += uint64(n)
		d.release()
		if err != nil {
			return written, err
		}
		if written > size {
			return written, nil
		}
	}
	return written, ctx.Err()
}

// readLeaves sends the leaves, checked, on ch and closes it; it stops after the first
// error it sends, or when ctx ends.
func readLeaves(ctx context.Context, lg LeafGetter, leaves []cid.Cid, ch chan<- leafData) {
	defer close(ch)
	send := func(ds ...leafData) bool {
		for i, d := range ds {
			select {
			case ch <- d:
			case <-ctx.Done():
				d.release()
				for _, rest := range ds[i+1:] {
					rest.release()
				}
				return false
			}
			if d.err != nil {
				for _, rest := range ds[i+1:] {
					rest.release()
				}
				return false
			}
		}
		return true
	}
	for i := 0; i < len(leaves); i++ {
		a := getLeaf(ctx, lg, leaves[i])
		if a.err != nil || i+1 == len(leaves) {
			checkLeaf(leaves[i], &a)
			if !send(a) {
				return
			}
			continue
		}
		b := getLeaf(ctx, lg, leaves[i+1])
		if b.err == nil && len(a.data) == len(b.data) {
			pairsChecked.Add(1)
			okA, okB := rawleaf.Check2(leaves[i], leaves[i+1], a.data, b.data)
			refuse(leaves[i], &a, okA)
			refuse(leaves[i+1], &b, okB)
		} else {
			checkLeaf(leaves[i], &a)
			checkLeaf(leaves[i+1], &b)
		}
		if !send(a, b) {
			return
		}
		i++
	}
}

func getLeaf(ctx context.Context, lg LeafGetter, c cid.Cid) leafData {
	blk, pooled, err := lg.GetPooled(ctx, c)
	if err != nil {
		return leafData{err: err}
	}
	return leafData{data: blk.RawData(), pooled: pooled}
}

// checkLeaf hashes one leaf that has no partner of its length.
func checkLeaf(c cid.Cid, d *leafData) {
	if d.err == nil {
		refuse(c, d, rawleaf.Names(c, sha256.Sum256(d.data)))
	}
}

// refuse turns d into c's forgery error unless ok, giving its buffer back.
func refuse(c cid.Cid, d *leafData, ok bool) {
	if !ok && d.err == nil {
		d.release()
		*d = leafData{err: forged(c)}
	}
}

// Package xfertest builds what transfer tests and the transfer benchmark need: loopback-only
// libp2p hosts, in-memory blockstores and UnixFS DAGs laid out the way kubo lays them out with
// --cid-version=1 (balanced, 256 KiB chunks, 174 links per node, raw leaves).
package xfertest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	chunker "github.com/ipfs/boxo/chunker"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	dssync "github.com/ipfs/go-datastore/sync"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	mh "github.com/multiformats/go-multihash"
)

// NewHost starts a libp2p host listening on 127.0.0.1 (TCP; TLS preferred then noise, as
// go-libp2p's defaults and the daemon negotiate; yamux) with every discovery and NAT feature
// off, so it sends nothing beyond loopback. TLS first for speed: on CPUs with AES
// instructions its AES-GCM seals about twice as fast as noise's ChaCha20-Poly1305, and a
// stream over it carried 1.08-1.19x noise's MB/s in 5 of 6 runs here (bench/transfer's
// "libp2p stream, noise only" row; docs/transfer-protocol.md).
func NewHost() (host.Host, error) {
	return newHost(libp2p.Security(libp2ptls.ID, libp2ptls.New), libp2p.Security(noise.ID, noise.New))
}

// NewNoiseHost is NewHost offering noise alone, so that its connections use noise.
func NewNoiseHost() (host.Host, error) {
	return newHost(libp2p.Security(noise.ID, noise.New))
}

func newHost(security ...libp2p.Option) (host.Host, error) {
	return libp2p.New(append(security,
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.DisableRelay(),
		libp2p.DisableMetrics(),
	)...)
}

// Connect connects a to b over b's listening addresses.
func Connect(ctx context.Context, a, b host.Host) error {
	return a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()})
}

// MemBlockstore is a boxo blockstore over a synchronized in-memory map datastore.
func MemBlockstore() blockstore.Blockstore {
	return blockstore.NewBlockstore(dssync.MutexWrap(ds.NewMapDatastore()))
}

// DAGService wraps bs for the UnixFS importer (offline: no exchange).
func DAGService(bs blockstore.Blockstore) ipld.DAGService {
	return merkledag.NewDAGService(blockservice.New(bs, nil))
}

// CidBuilder is CIDv1, dag-pb, sha2-256: what `ipfs add --cid-version=1` uses.
var CidBuilder = cid.V1Builder{Codec: cid.DagProtobuf, MhType: mh.SHA2_256}

// AddFile imports r as a UnixFS file and returns its root CID.
func AddFile(dag ipld.DAGService, r io.Reader) (cid.Cid, error) {
	n, err := addFileNode(dag, r)
	if err != nil {
		return cid.Undef, err
	}
	return n.Cid(), nil
}

func addFileNode(dag ipld.DAGService, r io.Reader) (ipld.Node, error) {
	p := helpers.DagBuilderParams{
		Dagserv:    dag,
		Maxlinks:   helpers.DefaultLinksPerBlock,
		RawLeaves:  true,
		CidBuilder: CidBuilder,
	}
	db, err := p.New(chunker.NewSizeSplitter(r, chunker.DefaultBlockSize))
	if err != nil {
		return nil, err
	}
	return balanced.Layout(db)
}

// AddDir imports the directory tree at dir (regular files and directories only) and returns
// its root CID. Entries are added in name order, as kubo does.
func AddDir(ctx context.Context, dag ipld.DAGService, dir string) (cid.Cid, error) {
	n, err := addDir(ctx, dag, dir)
	if err != nil {
		return cid.Undef, err
	}
	return n.Cid(), nil
}

func addDir(ctx context.Context, dag ipld.DAGService, dir string) (ipld.Node, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	d, err := uio.NewDirectory(dag, uio.WithCidBuilder(CidBuilder))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var n ipld.Node
		switch {
		case e.IsDir():
			n, err = addDir(ctx, dag, p)
		case e.Type().IsRegular():
			var f *os.File
			if f, err = os.Open(p); err == nil {
				n, err = addFileNode(dag, f)
				f.Close()
			}
		default:
			return nil, fmt.Errorf("%s: not a regular file or directory", p)
		}
		if err != nil {
			return nil, err
		}
		if err := d.AddChild(ctx, e.Name(), n); err != nil {
			return nil, err
		}
	}
	n, err := d.GetNode()
	if err != nil {
		return nil, err
	}
	return n, dag.Add(ctx, n)
}

// AllCIDs lists every block reachable from root in bs (each once), failing on a missing one.
func AllCIDs(ctx context.Context, bs blockstore.Blockstore, root cid.Cid) ([]cid.Cid, error) {
	var out []cid.Cid
	seen := map[cid.Cid]bool{}
	stack := []cid.Cid{root}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[c] {
			continue
		}
		seen[c] = true
		out = append(out, c)
		if c.Type() == cid.Raw {
			continue
		}
		b, err := bs.Get(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", c, err)
		}
		n, err := merkledag.DecodeProtobuf(b.RawData())
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", c, err)
		}
		for _, l := range n.Links() {
			stack = append(stack, l.Cid)
		}
	}
	return out, nil
}

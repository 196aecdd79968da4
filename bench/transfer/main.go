// Command transfer measures whole-bundle transfer between two libp2p hosts on loopback and
// prints a table: data set, path, store, MB/s, CPU seconds, ratio to raw TCP in the same run.
//
// The data sets are those of issue 5: a 1 GiB file, and a bundle of 2,000 files of 4-64 KiB
// plus 4 x 100 MiB. They are generated once under -dir (random bytes, fixed seed) and imported
// as UnixFS (kubo's --cid-version=1 layout) into the sending node's store.
//
// The xfer and gateway rows run both hosts in this one process (TCP + TLS 1.3 + yamux on 127.0.0.1), so "CPU s" is the
// sender's and the receiver's CPU time together (getrusage of the process, user + system).
//
// Usage: bench/transfer.sh, or go run ./bench/transfer [-dir /tmp/evalmesh-bench] [-stores mem,pebble]
// [-sets 1g,bundle] [-peers 1,2] [-runs 3] [-daemons PATH/evalmesh [-daemon-stores flat,pack]] [-gateway=false]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/evalmesh/evalmesh/node/xfer"
	"github.com/evalmesh/evalmesh/node/xfer/xfertest"
	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/blockstore"
	"github.com/ipfs/boxo/gateway"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ds "github.com/ipfs/go-datastore"
	pebbleds "github.com/ipfs/go-ds-pebble"
	car "github.com/ipld/go-car/v2"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	libp2phttp "github.com/libp2p/go-libp2p/p2p/http"
	"github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
)

func main() {
	dir := flag.String("dir", "/tmp/evalmesh-bench", "work folder for data and stores (not committed)")
	stores := flag.String("stores", "mem,pebble", "blockstores to measure, comma separated: mem, pebble (go-ds-pebble defaults), pebble-tuned (value separation, no compression)")
	sets := flag.String("sets", "1g,bundle", "data sets: 1g, bundle, tiny (a smoke test)")
	peers := flag.String("peers", "1,2", "numbers of sending peers to measure, comma separated")
	gatewayRow = flag.Bool("gateway", true, "also measure boxo/gateway's trustless CAR response over go-libp2p's HTTP transport")
	flag.IntVar(&readAhead, "readahead", -1, "xfer server read-ahead in blocks (-1: the server's default)")
	flag.IntVar(&runs, "runs", 1, "repeat each measurement this many times and keep the fastest (the machine is shared)")
	flag.StringVar(&daemonBin, "daemons", "", "path to an evalmesh binary: also measure two `evalmesh daemon` processes (task add on one, pin add on the other)")
	flag.StringVar(&daemonStores, "daemon-stores", "pack", "blockstore kinds for the two daemons, comma separated: pack (a new home's default), flat (each measured in the same run)")
	flag.StringVar(&kuboBin, "kubo", "", "path to a prebuilt kubo `ipfs` binary: also measure two kubo daemons (ipfs add, then ipfs pin add over bitswap), once")
	flag.StringVar(&homesDir, "homes", "", "folder for the daemons' homes (default DIR/homes; e.g. a tmpfs such as /dev/shm/...)")
	flag.StringVar(&profileDir, "daemon-profile", "", "write each daemon's pprof CPU and allocs profiles under this folder (SET/STORE/RUN/{send,recv}/{cpu,allocs}.pprof)")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile of the xfer runs to this file")
	flag.Parse()
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*dir, split(*stores), split(*sets), split(*peers)); err != nil {
		fmt.Fprintln(os.Stderr, "transfer bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

var (
	gatewayRow *bool
	readAhead  = -1
	runs       = 1
	daemonBin  string
	// daemonStores lists the daemons' blockstore kinds (config field blockstore) to measure.
	daemonStores string
	// homesDir holds the daemons' homes (default DIR/homes; put it on tmpfs to take the disk
	// out of the comparison with the stream rows).
	homesDir string
	// profileDir, when set, gets each daemon's CPU and allocation profiles (see daemonRun).
	profileDir string
)

type row struct {
	set, path, store string
	bytes            int64
	wall, cpu        time.Duration
	raw              float64 // MB/s of raw TCP for this data set
	// The daemon rows only: each daemon's CPU, the receiving daemon's peak RSS (VmHWM) and
	// the libp2p stream row's MB/s in the same run.
	cpuSend, cpuRecv time.Duration
	rssRecv          int64
	stream           float64
	// floor: MB/s of the floor row of the same run (see floorRows); the fetch row prints x floor.
	floor float64
}

func run(dir string, stores, sets, npeers []string) error {
	ctx := context.Background()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "data set\tpath\tstore\tMB/s\tCPU s\tCPU s send/recv\trecv peak RSS MiB\tx raw TCP\tx libp2p stream\tx floor\t\n")
	for _, set := range sets {
		src, size, err := ensureData(dir, set)
		if err != nil {
			return err
		}
		r := measure(func() error { return rawTCP(src) })
		r.set, r.path, r.store, r.bytes = set, "raw TCP", "-", size
		if r.err != nil {
			return r.err
		}
		raw := mbps(size, r.wall)
		r.raw = raw
		print(tw, r.row)
		r = measure(func() error { return diskWrite(src, filepath.Join(dir, "disk-probe")) })
		r.set, r.path, r.store, r.bytes, r.raw = set, "disk: same bytes, write+fsync", "-", size, raw
		if r.err != nil {
			return r.err
		}
		print(tw, r.row)
		r = measure(func() error { return libp2pStream(src, xfertest.NewHost, libp2ptls.ID) })
		r.set, r.path, r.store, r.bytes, r.raw = set, "libp2p stream, no verify", "-", size, raw
		if r.err != nil {
			return r.err
		}
		print(tw, r.row)
		stream := mbps(size, r.wall)
		// The other security transport the daemon offers (issue 18: keep the faster one first).
		noise := measure(func() error { return libp2pStream(src, xfertest.NewNoiseHost, noise.ID) })
		noise.set, noise.path, noise.store, noise.bytes, noise.raw, noise.stream = set, "libp2p stream, noise only", "-", size, raw, stream
		if noise.err != nil {
			return noise.err
		}
		print(tw, noise.row)
		var floor float64 // MB/s a verifying fetch could reach on this machine (see floorRow)
		if daemonBin != "" {
			f, err := floorRows(tw, dir, set, src, size, raw, r)
			if err != nil {
				return err
			}
			floor = f
		}
		for _, store := range split(daemonStores) {
			if daemonBin == "" {
				break
			}
			add, get, err := daemonRows(dir, set, src, store)
			if err != nil {
				return err
			}
			get.stream = stream // the bound the fetch is measured against (issue 18)
			get.floor = floor
			for _, r := range []row{add, get} {
				r.bytes, r.raw = size, raw
				print(tw, r)
			}
		}
		if kuboBin != "" {
			add, get, err := kuboRows(dir, set, src)
			if err != nil {
				return err
			}
			for _, r := range []row{add, get} {
				r.bytes, r.raw = size, raw
				print(tw, r)
			}
		}
		for _, st := range stores {
			srcBS, closeSrc, err := openStore(filepath.Join(dir, "stores", set+"-"+st+"-src"), st)
			if err != nil {
				return err
			}
			t0 := time.Now()
			root, err := importData(ctx, srcBS, src)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "imported %s into %s in %.1fs: %s\n", set, st, time.Since(t0).Seconds(), root)
			for _, np := range npeers {
				n := 1
				fmt.Sscan(np, &n)
				dstPath := filepath.Join(dir, "stores", set+"-"+st+"-dst")
				r := measure(func() error {
					return intoEmptyStore(dstPath, st, func(dst blockstore.Blockstore) error { return xferFetch(ctx, srcBS, dst, root, n) })
				})
				r.set, r.path, r.store, r.bytes, r.raw = set, fmt.Sprintf("xfer, %d peer(s)", n), st, size, raw
				if r.err != nil {
					return r.err
				}
				print(tw, r.row)
			}
			if *gatewayRow {
				dstPath := filepath.Join(dir, "stores", set+"-"+st+"-dst")
				r := measure(func() error {
					return intoEmptyStore(dstPath, st, func(dst blockstore.Blockstore) error { return gatewayFetch(ctx, srcBS, dst, root) })
				})
				r.set, r.path, r.store, r.bytes, r.raw = set, "gateway CAR over libp2p HTTP, 1 peer", st, size, raw
				if r.err != nil {
					return r.err
				}
				print(tw, r.row)
			}
			closeSrc()
			os.RemoveAll(filepath.Join(dir, "stores", set+"-"+st+"-src"))
		}
	}
	return tw.Flush()
}

// print adds a row to the table (printed aligned at the end) and shows it on stderr now.
func print(tw *tabwriter.Writer, r row) {
	m := mbps(r.bytes, r.wall)
	per, rss, xs, xf := "-", "-", "-", "-"
	if r.floor > 0 {
		xf = fmt.Sprintf("%.2f", m/r.floor)
	}
	if r.cpuSend > 0 || r.cpuRecv > 0 {
		per = fmt.Sprintf("%.2f/%.2f", r.cpuSend.Seconds(), r.cpuRecv.Seconds())
	}
	if r.rssRecv > 0 {
		rss = fmt.Sprintf("%.0f", float64(r.rssRecv)/(1<<20))
	}
	if r.stream > 0 {
		xs = fmt.Sprintf("%.2f", m/r.stream)
	}
	line := fmt.Sprintf("%s\t%s\t%s\t%.0f\t%.2f\t%s\t%s\t%.2f\t%s\t%s\t\n", r.set, r.path, r.store, m, r.cpu.Seconds(), per, rss, m/r.raw, xs, xf)
	fmt.Fprint(tw, line)
	fmt.Fprint(os.Stderr, strings.ReplaceAll(line, "\t", "  "))
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

type result struct {
	row
	err error
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f -runs times and keeps the fastest run.
func measure(f func() error) result {
	var best result
	for i := 0; i < max(runs, 1); i++ {
		runtime.GC()
		debug.FreeOSMemory()
		c0, t0 := cpuTime(), time.Now()
		err := f()
		r := result{row: row{wall: time.Since(t0), cpu: cpuTime() - c0}, err: err}
		if err != nil {
			return r
		}
		if i == 0 || r.wall < best.wall {
			best = r
		}
	}
	return best
}

// ensureData writes the data set under dir once and returns its path and byte count.
func ensureData(dir, set string) (string, int64, error) {
	base := filepath.Join(dir, "data", set)
	done := base + ".done"
	type file struct {
		name string
		size int
	}
	var files []file
	switch set {
	case "1g":
		files = []file{{"file", 1 << 30}}
	case "bundle":
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 2000; i++ {
			files = append(files, file{fmt.Sprintf("small/%02d/%04d.bin", i/100, i), 4<<10 + r.IntN(60<<10+1)})
		}
		for i := 0; i < 4; i++ {
			files = append(files, file{fmt.Sprintf("big/%d.bin", i), 100 << 20})
		}
	case "tiny": // CI's smoke run: keeps the benchmark from rotting, measures nothing
		for i := 0; i < 20; i++ {
			files = append(files, file{fmt.Sprintf("small/%04d.bin", i), 4 << 10})
		}
		files = append(files, file{"big/0.bin", 2 << 20})
	default:
		return "", 0, fmt.Errorf("unknown data set %q (want 1g, bundle or tiny)", set)
	}
	var total int64
	for _, f := range files {
		total += int64(f.size)
	}
	if _, err := os.Stat(done); err == nil {
		return base, total, nil
	}
	fmt.Fprintf(os.Stderr, "generating %s (%d files, %d bytes) under %s\n", set, len(files), total, base)
	os.RemoveAll(base)
	rng := rand.NewChaCha8([32]byte{7})
	buf := make([]byte, 1<<20)
	for _, f := range files {
		p := filepath.Join(base, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", 0, err
		}
		out, err := os.Create(p)
		if err != nil {
			return "", 0, err
		}
		for left := f.size; left > 0; {
			n := min(left, len(buf))
			rng.Read(buf[:n])
			if _, err := out.Write(buf[:n]); err != nil {
				return "", 0, err
			}
			left -= n
		}
		if err := out.Close(); err != nil {
			return "", 0, err
		}
	}
	return base, total, os.WriteFile(done, nil, 0o644)
}

func importData(ctx context.Context, bs blockstore.Blockstore, dir string) (cid.Cid, error) {
	return xfertest.AddDir(ctx, xfertest.DAGService(bs), dir)
}

// intoEmptyStore runs fetch into a new, empty store of kind at path, removed afterwards.
// Every measured run needs its own: a fetch resumes from the blocks its store holds, so a
// store kept from the previous run makes the next one instant.
func intoEmptyStore(path, kind string, fetch func(blockstore.Blockstore) error) error {
	os.RemoveAll(path)
	bs, closeStore, err := openStore(path, kind)
	if err != nil {
		return err
	}
	defer func() { closeStore(); os.RemoveAll(path) }()
	return fetch(bs)
}

func openStore(path, kind string) (blockstore.Blockstore, func(), error) {
	var d ds.Batching
	switch kind {
	case "mem":
		return xfertest.MemBlockstore(), func() {}, nil
	case "pebble":
		p, err := pebbleds.NewDatastore(path)
		if err != nil {
			return nil, nil, err
		}
		d = p
	case "pebble-tuned":
		p, err := pebbleds.NewDatastore(path, pebbleds.WithPebbleOpts(tunedPebble()))
		if err != nil {
			return nil, nil, err
		}
		d = p
	default:
		return nil, nil, fmt.Errorf("unknown store %q (want mem, pebble or pebble-tuned)", kind)
	}
	return blockstore.NewBlockstore(d), func() { d.Close() }, nil
}

// tunedPebble suits an LSM to 256 KiB incompressible values: values go to blob files (written
// once, not rewritten by every compaction), no compression, a larger memtable.
func tunedPebble() *pebble.Options {
	o := &pebble.Options{
		FormatMajorVersion: pebble.FormatValueSeparation,
		MemTableSize:       64 << 20,
	}
	o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               true,
			MinimumSize:           1024,
			MaxBlobReferenceDepth: 10,
			RewriteMinimumAge:     5 * time.Minute,
			TargetGarbageRatio:    0.2,
		}
	}
	o.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionNone })
	return o
}

// files lists the regular files under dir in a fixed order.
func files(dir string) ([]string, error) {
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			out = append(out, p)
		}
		return err
	})
	sort.Strings(out)
	return out, err
}

// sendFiles copies every file under dir to w through a 1 MiB buffer, as `tar | nc` would.
func sendFiles(dir string, w io.Writer) error {
	fs, err := files(dir)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	for _, p := range fs {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(bw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// diskWrite writes the data set's bytes into one file and fsyncs it: what any store that keeps
// a fetched bundle durably must at least pay on this disk.
func diskWrite(src, path string) error {
	defer os.Remove(path)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := sendFiles(src, f); err != nil {
		return err
	}
	return f.Sync()
}

// rawTCP moves the data set's bytes over a plain loopback TCP connection.
func rawTCP(dir string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		_, err = io.CopyBuffer(io.Discard, c, make([]byte, 1<<20))
		errc <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	if err := sendFiles(dir, c); err != nil {
		return err
	}
	c.Close()
	return <-errc
}

// libp2pStream moves the same bytes over one libp2p stream between two hosts made by newHost
// (xfertest.NewHost: TCP, TLS 1.3, yamux), unverified: the ceiling for any protocol on these
// hosts. The connection must have negotiated the security transport want.
func libp2pStream(dir string, newHost func() (host.Host, error), want protocol.ID) error {
	a, b, err := twoHostsWith(newHost)
	if err != nil {
		return err
	}
	defer a.Close()
	defer b.Close()
	errc := make(chan error, 1)
	b.SetStreamHandler("/bench/sink", func(s network.Stream) {
		_, err := io.CopyBuffer(io.Discard, s, make([]byte, 1<<20))
		s.Close()
		errc <- err
	})
	s, err := a.NewStream(context.Background(), b.ID(), "/bench/sink")
	if err != nil {
		return err
	}
	if got := s.Conn().ConnState().Security; got != want {
		return fmt.Errorf("libp2p stream: the hosts negotiated %s, want %s", got, want)
	}
	if err := sendFiles(dir, s); err != nil {
		return err
	}
	s.CloseWrite()
	return <-errc
}

func twoHosts() (host.Host, host.Host, error) { return twoHostsWith(xfertest.NewHost) }

func twoHostsWith(newHost func() (host.Host, error)) (host.Host, host.Host, error) {
	a, err := newHost()
	if err != nil {
		return nil, nil, err
	}
	b, err := newHost()
	if err != nil {
		a.Close()
		return nil, nil, err
	}
	if err := xfertest.Connect(context.Background(), a, b); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// xferFetch serves src from n hosts and fetches root into dst from all of them.
func xferFetch(ctx context.Context, src, dst blockstore.Blockstore, root cid.Cid, n int) error {
	getter, err := xfertest.NewHost()
	if err != nil {
		return err
	}
	defer getter.Close()
	var ids []peer.ID
	for i := 0; i < n; i++ {
		h, err := xfertest.NewHost()
		if err != nil {
			return err
		}
		defer h.Close()
		var opts []xfer.ServerOption
		if readAhead >= 0 {
			opts = append(opts, xfer.WithReadAhead(readAhead))
		}
		srv := xfer.NewServer(h, src, opts...)
		defer srv.Close()
		if err := xfertest.Connect(ctx, getter, h); err != nil {
			return err
		}
		ids = append(ids, h.ID())
	}
	st, err := xfer.FetchWithStats(ctx, getter, root, ids, dst, nil)
	if err != nil {
		return err
	}
	if len(st.Dropped) > 0 {
		return fmt.Errorf("peers dropped in a clean run: %v", st.Dropped)
	}
	return nil
}

// gatewayFetch serves src through boxo/gateway (trustless responses only) over go-libp2p's
// HTTP-over-streams transport and fetches /ipfs/ROOT?format=car&dag-scope=all, hashing each
// block against its CID and storing it in batches. It does not check the blocks' order against
// the DAG, so it is an upper bound for a fully verifying CAR client.
func gatewayFetch(ctx context.Context, src, dst blockstore.Blockstore, root cid.Cid) error {
	a, b, err := twoHosts()
	if err != nil {
		return err
	}
	defer a.Close()
	defer b.Close()
	backend, err := gateway.NewBlocksBackend(blockservice.New(src, nil))
	if err != nil {
		return err
	}
	const proto = "/evalmesh-bench/gateway"
	server := &libp2phttp.Host{StreamHost: b}
	server.SetHTTPHandlerAtPath(proto, "/", gateway.NewHandler(gateway.Config{}, backend))
	go server.Serve()
	defer server.Close()
	// Serve registers its stream handler asynchronously; wait for it (with a deadline).
	for deadline := time.Now().Add(10 * time.Second); !supports(b, libp2phttp.ProtocolIDForMultistreamSelect); {
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway: libp2p HTTP server did not start")
		}
		time.Sleep(time.Millisecond)
	}
	client := &libp2phttp.Host{StreamHost: a}
	hc, err := client.NamespacedClient(proto, peer.AddrInfo{ID: b.ID()})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "GET", "/ipfs/"+root.String()+"?format=car&dag-scope=all", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.ipld.car; version=1; order=dfs; dups=n")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("gateway: %s: %s", resp.Status, msg)
	}
	br, err := car.NewBlockReader(bufio.NewReaderSize(resp.Body, 64<<10), car.WithTrustedCAR(true))
	if err != nil {
		return err
	}
	var batch []blocks.Block
	size := 0
	for {
		blk, err := br.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := xfer.Verify(blk.Cid(), blk.RawData()); err != nil {
			return err
		}
		batch = append(batch, blk)
		size += len(blk.RawData())
		if size >= 16<<20 {
			if err := dst.PutMany(ctx, batch); err != nil {
				return err
			}
			batch, size = batch[:0], 0
		}
	}
	if err := dst.PutMany(ctx, batch); err != nil {
		return err
	}
	if ok, err := dst.Has(ctx, root); err != nil || !ok {
		return fmt.Errorf("gateway: root %s not received", root)
	}
	return nil
}

func supports(h host.Host, p protocol.ID) bool {
	for _, q := range h.Mux().Protocols() {
		if q == p {
			return true
		}
	}
	return false
}

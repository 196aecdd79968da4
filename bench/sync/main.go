// Command sync benchmarks anti-entropy (issue 10): two evalmesh nodes (real libp2p hosts
// on 127.0.0.1, each with its own home and pebble store) reconciling and fetching real
// signed run attestations, every one verified before it is stored.
//
// Cases:
//
//	late joiner       node A holds N attestations, B none: B syncs from A
//	in sync           two nodes whose stores hold the same M IDs: one session over the
//	                  real stream (both sets, every frame). The M records are written
//	                  unverified (vstore.Set.FillUnverified, only in this driver's build tag
//	                  evalmesh_benchfill) from M distinct 16-byte stand-in envelopes:
//	                  reconciliation reads IDs and order keys only, and a million real
//	                  envelopes would take many minutes to sign and verify
//	healed partition  A and B share N, then each gets K new ones; B dials A with automatic
//	                  sync on, as a reconnecting node does: timed from the dial to equal
//	                  fingerprints (the session it triggered: fetch K, push K; both verify)
//
// Each node's store is compacted after it is loaded (Store.Compact), the state a long-running
// node's store is in, so that compactions of the loading are not timed in the session.
//
// Signed envelopes are cached under -cache (generating 100,000 takes a while).
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/attestgen"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol/recon"
)

func main() {
	n := flag.Int("n", 100000, "attestations of the late joiner and shared by the healed partition")
	ids := flag.Int("ids", 1000000, "IDs per side of the in-sync case")
	k := flag.Int("new", 1000, "new attestations on each side of the healed partition")
	cache := flag.String("cache", filepath.Join(os.TempDir(), "evalmesh-bench-sync"), "folder caching the signed envelopes")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the late joiner's session to this file")
	flag.Parse()
	if err := run(*n, *ids, *k, *cache); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sync:", err)
		os.Exit(1)
	}
}

type row struct {
	name, goal   string
	wall, verify time.Duration
	cpu          time.Duration // user+sys of the process (both nodes) during the session
	rounds       int
	bytes        int64
	items        int
	note         string
}

var cpuProfile string

func run(n, ids, k int, cache string) error {
	trust, a, b, err := envelopes(cache, n+k, k)
	if err != nil {
		return err
	}
	var rows []row

	// Late joiner.
	src, err := startNode(trust, false)
	if err != nil {
		return err
	}
	defer src.close()
	t0 := time.Now()
	if err := load(src.n, a[:n]); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "loaded %d into the source node in %s\n", n, time.Since(t0).Round(time.Millisecond))
	if err := settle(src); err != nil {
		return err
	}
	late, err := startNode(trust, false)
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
	}
	st, wall, cpu, err := syncPair(late, src)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		late.close()
		return err
	}
	// The two are now in sync: one more session over the real stream (both sets, frames
	// and all) is what a periodic round between in-sync nodes costs.
	again, againWall, againCPU, err := syncPairAll(late, src)
	late.close()
	if err != nil {
		return err
	}
	rows = append(rows, row{name: fmt.Sprintf("late joiner, %d real run attestations", n), goal: "<= 10 s",
		wall: wall, cpu: cpu, verify: st.Verify, rounds: st.Rounds + st.Fetches, bytes: st.BytesSent + st.BytesRecv, items: st.New,
		note: fmt.Sprintf("%d reconcile + %d fetch round trips", st.Rounds, st.Fetches)})

	var againBytes int64
	againRounds := 0
	for _, x := range again {
		againBytes += x.BytesSent + x.BytesRecv
		againRounds += x.Rounds + x.Fetches
	}
	rows = append(rows, row{name: fmt.Sprintf("in sync over the stream, %d IDs each (both sets, every frame)", n), goal: "<= 4 KB, <= 3 round trips",
		wall: againWall, cpu: againCPU, rounds: againRounds, bytes: againBytes})

	// In sync over the stream, ids IDs each.
	r, err := inSync(trust, ids)
	if err != nil {
		return err
	}
	rows = append(rows, r)

	// Healed partition: a second node gets the same n, then each side k new.
	peer, err := startNode(trust, true)
	if err != nil {
		return err
	}
	defer peer.close()
	if err := load(peer.n, a[:n]); err != nil {
		return err
	}
	if err := load(src.n, a[n:n+k]); err != nil {
		return err
	}
	if err := load(peer.n, b[:k]); err != nil {
		return err
	}
	for _, x := range []*benchNode{src, peer} {
		if err := settle(x); err != nil {
			return err
		}
	}
	sts, wall, cpu, err := reconnect(peer, src)
	if err != nil {
		return err
	}
	st = sts[1]
	rows = append(rows, row{name: fmt.Sprintf("healed partition, %d new on each side of %d (dial to equal sets)", k, n), goal: "<= 1 s",
		wall: wall, cpu: cpu, verify: st.Verify, rounds: st.Rounds + st.Fetches, bytes: sts[0].BytesSent + sts[0].BytesRecv + st.BytesSent + st.BytesRecv, items: st.New + st.Have,
		note: fmt.Sprintf("%d reconcile + %d fetch round trips (attestations; campaigns %d), then one Done exchange after the push; the triggered session itself took %s of the wall time; verify share counts the fetched half (the pushed half is verified by the peer inside the wall time)",
			st.Rounds, st.Fetches, sts[0].Rounds+sts[0].Fetches, (sts[0].Wall + st.Wall).Round(time.Millisecond))})

	fmt.Printf("# %s, %d cores (GOMAXPROCS %d)\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Printf("# load average at the end: %s\n", loadavg())
	fmt.Println("| case | goal | wall | CPU s (both nodes) | round trips | bytes | envelopes | verify share | per s | vs go-ds-crdt (48/s one-per-commit, 10 s batched) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		share, rate, anchor := "-", "-", "-"
		if r.wall > 0 && r.verify > 0 {
			share = fmt.Sprintf("%.0f%%", 100*r.verify.Seconds()/r.wall.Seconds())
		}
		if r.items > 0 {
			rate = fmt.Sprintf("%.0f", float64(r.items)/r.wall.Seconds())
			anchor = fmt.Sprintf("%.0fx / %.1fx", float64(r.items)/r.wall.Seconds()/48, (10*float64(r.items)/100000)/r.wall.Seconds())
		}
		wall := r.wall.Round(time.Millisecond).String()
		if r.wall == 0 {
			wall = "-"
		}
		fmt.Printf("| %s | %s | %s | %.2f | %d | %d | %d | %s | %s | %s |\n", r.name, r.goal, wall, r.cpu.Seconds(), r.rounds, r.bytes, r.items, share, rate, anchor)
	}
	for _, r := range rows {
		if r.note != "" {
			fmt.Printf("\n%s: %s", r.name, r.note)
		}
	}
	fmt.Println()
	return nil
}

type benchNode struct {
	n   *node.Node
	dir string
}

func (b *benchNode) close() { b.n.Close(); os.RemoveAll(b.dir) }

func startNode(trust *attest.TrustStore, autoSync bool) (*benchNode, error) {
	dir, err := os.MkdirTemp("", "evalmesh-sync-node")
	if err != nil {
		return nil, err
	}
	h := home.Home{Dir: dir}
	if _, err := h.Init(); err != nil {
		return nil, err
	}
	n, err := node.New(context.Background(), h, node.Options{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, API: "127.0.0.1:0",
		Trust: trust, Sync: syncer.Options{NoAutoSync: !autoSync}})
	if err != nil {
		return nil, err
	}
	return &benchNode{n: n, dir: dir}, nil
}

func load(n *node.Node, envs [][]byte) error {
	for lo := 0; lo < len(envs); lo += 1000 {
		res, err := n.Store().Attestations().Add(envs[lo:min(len(envs), lo+1000)], vstore.SourceLocal, "")
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Status == vstore.StatusRefused {
				return fmt.Errorf("cached envelope refused: %s %s", r.Reason, r.Detail)
			}
		}
	}
	return nil
}

// syncPair connects a to b and times one session a runs with b: wall time and the CPU time
// of the whole process (both nodes).
func syncPair(a, b *benchNode) (syncer.Stats, time.Duration, time.Duration, error) {
	ctx := context.Background()
	if err := a.n.Connect(ctx, b.n.Addrs()[0]); err != nil {
		return syncer.Stats{}, 0, 0, err
	}
	c0 := cpuTime()
	t0 := time.Now()
	sts, err := a.n.Syncer().SyncWith(ctx, b.n.ID())
	wall := time.Since(t0)
	cpu := cpuTime() - c0
	if err != nil {
		return syncer.Stats{}, 0, 0, err
	}
	return sts[1], wall, cpu, nil
}

// syncPairAll is syncPair's session with the stats of every set.
func syncPairAll(a, b *benchNode) ([]syncer.Stats, time.Duration, time.Duration, error) {
	c0 := cpuTime()
	t0 := time.Now()
	sts, err := a.n.Syncer().SyncWith(context.Background(), b.n.ID())
	return sts, time.Since(t0), cpuTime() - c0, err
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// settle compacts a loaded node's store (see the package comment).
func settle(b *benchNode) error {
	t0 := time.Now()
	err := b.n.Store().Compact()
	fmt.Fprintf(os.Stderr, "compacted a store in %s\n", time.Since(t0).Round(time.Millisecond))
	return err
}

// reconnect dials b from a (whose automatic sync is on, so the dial starts a session, as
// for a node coming back from a partition) and times it until both attestation sets are
// equal, then returns the stats of the session the dial started.
func reconnect(a, b *benchNode) ([]syncer.Stats, time.Duration, time.Duration, error) {
	c0 := cpuTime()
	t0 := time.Now()
	if err := a.n.Connect(context.Background(), b.n.Addrs()[0]); err != nil {
		return nil, 0, 0, err
	}
	for a.n.Store().Attestations().Fingerprint() != b.n.Store().Attestations().Fingerprint() {
		if time.Since(t0) > 5*time.Minute {
			return nil, 0, 0, fmt.Errorf("healed partition: sets still differ after 5 minutes")
		}
		time.Sleep(200 * time.Microsecond) // a benchmark's poll, not a test's wait
	}
	wall, cpu := time.Since(t0), cpuTime()-c0
	// The session records its stats after its last frame; wait for them.
	for len(a.n.Syncer().LastStats(b.n.ID())) < 2 {
		if time.Since(t0) > 5*time.Minute {
			return nil, 0, 0, fmt.Errorf("healed partition: no session stats")
		}
		time.Sleep(time.Millisecond)
	}
	return a.n.Syncer().LastStats(b.n.ID()), wall, cpu, nil
}

// inSync gives two nodes the same m IDs (FillUnverified: distinct 16-byte stand-ins, ten
// per second of order key) and times one session between them over the real stream.
func inSync(trust *attest.TrustStore, m int) (row, error) {
	envs := make([][]byte, m)
	times := make([]uint64, m)
	for i := range envs {
		e := make([]byte, 16)
		copy(e, "in-sync ")
		binary.BigEndian.PutUint64(e[8:], uint64(i))
		envs[i], times[i] = e, uint64(1780000000+i/10)
	}
	var nodes [2]*benchNode
	for i := range nodes {
		b, err := startNode(trust, false)
		if err != nil {
			return row{}, err
		}
		defer b.close()
		if err := fill(b.n.Store().Attestations(), envs, times); err != nil {
			return row{}, err
		}
		nodes[i] = b
	}
	if err := nodes[0].n.Connect(context.Background(), nodes[1].n.Addrs()[0]); err != nil {
		return row{}, err
	}
	sts, wall, cpu, err := syncPairAll(nodes[0], nodes[1])
	if err != nil {
		return row{}, err
	}
	var bytes int64
	rounds := 0
	for _, x := range sts {
		bytes += x.BytesSent + x.BytesRecv
		rounds += x.Rounds + x.Fetches
	}
	if got := nodes[1].n.Store().Attestations().Len(); got != m || sts[1].Need+sts[1].Have != 0 {
		return row{}, fmt.Errorf("in sync: %d IDs, need %d, have %d", got, sts[1].Need, sts[1].Have)
	}
	return row{name: fmt.Sprintf("in sync over the stream, %d IDs each (both sets, every frame)", m), goal: "<= 4 KB, <= 3 round trips",
		wall: wall, cpu: cpu, rounds: rounds, bytes: bytes,
		note: fmt.Sprintf("round trips: attestations %d reconcile, campaigns %d; nothing pushed, so no Done is waited for", sts[1].Rounds, sts[0].Rounds)}, nil
}

// envelopes returns a trust store and na runs of lab A and nb of lab B, from the cache or
// signed now (in parallel) and cached.
func envelopes(cache string, na, nb int) (*attest.TrustStore, [][]byte, [][]byte, error) {
	path := filepath.Join(cache, fmt.Sprintf("runs-%d-%d.bin", na, nb))
	if trust, a, b, err := readCache(path); err == nil {
		return trust, a, b, nil
	}
	t0 := time.Now()
	la, err := attestgen.New("lab-a")
	if err != nil {
		return nil, nil, nil, err
	}
	lb, err := attestgen.New("lab-b")
	if err != nil {
		return nil, nil, nil, err
	}
	trust, err := attestgen.Trust(la, lb)
	if err != nil {
		return nil, nil, nil, err
	}
	a, err := signAll(la, na)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := signAll(lb, nb)
	if err != nil {
		return nil, nil, nil, err
	}
	fmt.Fprintf(os.Stderr, "signed %d envelopes in %s (cached in %s)\n", na+nb, time.Since(t0).Round(time.Millisecond), path)
	if err := writeCache(path, trust, a, b); err != nil {
		return nil, nil, nil, err
	}
	return trust, a, b, nil
}

func signAll(f *attestgen.Fixture, n int) ([][]byte, error) {
	out := make([][]byte, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	w := runtime.GOMAXPROCS(0)
	for p := 0; p < w; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += w {
				e, err := f.Run(i)
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				out[i] = e
			}
		}()
	}
	wg.Wait()
	return out, first
}

func writeCache(path string, trust *attest.TrustStore, a, b [][]byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tb, err := trust.Marshal()
	if err != nil {
		return err
	}
	var buf []byte
	buf = recon.AppendFrame(buf, recon.FrameHello, tb)
	for _, set := range [][][]byte{a, b} {
		for lo := 0; lo < len(set); lo += 1000 {
			buf = recon.AppendFrame(buf, recon.FrameEnvelopes, recon.EncodeEnvelopes(set[lo:min(len(set), lo+1000)]))
		}
		buf = recon.AppendFrame(buf, recon.FrameDone, nil)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readCache(path string) (*attest.TrustStore, [][]byte, [][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	_, tb, err := recon.ReadFrame(r, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	trust, err := attest.ParseTrust(tb)
	if err != nil {
		return nil, nil, nil, err
	}
	var sets [2][][]byte
	for i := range sets {
		for {
			typ, body, err := recon.ReadFrame(r, 0)
			if err != nil {
				return nil, nil, nil, err
			}
			if typ == recon.FrameDone {
				break
			}
			envs, err := recon.DecodeEnvelopes(body, attest.MaxEnvelopeSize)
			if err != nil {
				return nil, nil, nil, err
			}
			sets[i] = append(sets[i], envs...)
		}
	}
	return trust, sets[0], sets[1], nil
}

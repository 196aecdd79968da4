// Command repair measures pin repair (issue 46, point 4): the time to restore the pin factor
// after a lab holding N ledger objects leaves, against a whole-DAG fetch of the same bytes
// between the same nodes in the same run (the fetch bench/transfer.sh's daemon row times:
// Node.PinFetch over /evalmesh/xfer), with the ratio to the ≥ 50 % bound.
//
// Each run starts three real nodes (libp2p on 127.0.0.1, the chosen blockstore, homes under
// -dir) of a three-lab network at pin factor 2. Labs A and B add N objects of -size bytes
// (random, one file each: a UnixFS DAG of 256 KiB raw leaves), and a campaign naming them as
// its task bundles goes into every node's store, so each is a ledger object held by A and B.
// Then:
//
//	fetch   C fetches and pins one DAG of N other files of the same sizes from B (the bound)
//	repair  A's node closes; C runs repair rounds (pins.Keeper.RepairPins, what the daemon runs every
//	        5 s) back to back until it holds every object: the factor is restored by B and C
//
// The repair row's time starts when A closes and does not include the wait for the daemon's
// next round (up to its 5 s interval), printed beside it.
package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
)

func main() {
	dir := flag.String("dir", filepath.Join(os.TempDir(), "evalmesh-bench-repair"), "work folder (removed and made again)")
	objects := flag.Int("objects", 100, "ledger objects the leaving lab holds")
	size := flag.Int("size", 1<<20, "bytes per object")
	runs := flag.Int("runs", 3, "runs; each row is the fastest")
	store := flag.String("store", "pack", "the nodes' blockstore kind (flat or pack)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the first run's repair to this file")
	flag.Parse()
	if err := run(*dir, *objects, *size, *runs, *store); err != nil {
		fmt.Fprintln(os.Stderr, "repair bench:", err)
		os.Exit(1)
	}
}

var cpuProfile string

type result struct {
	fetch, repair time.Duration
	rounds        int
}

func run(dir string, objects, size, runs int, store string) error {
	var best result
	for i := range runs {
		r, err := once(filepath.Join(dir, fmt.Sprint(i)), objects, size, store, uint64(i))
		if err != nil {
			return err
		}
		if i == 0 || r.fetch < best.fetch {
			best.fetch = r.fetch
		}
		if i == 0 || r.repair < best.repair {
			best.repair, best.rounds = r.repair, r.rounds
		}
	}
	bytes := int64(objects) * int64(size)
	fetchRate, repairRate := mbps(bytes, best.fetch), mbps(bytes, best.repair)
	ratio := repairRate / fetchRate
	verdict := "meets"
	if ratio < 0.5 {
		verdict = "BELOW"
	}
	fmt.Printf("# %s, %d cores, load %s; %d objects x %d bytes, blockstore %s, fastest of %d\n",
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), loadavg(), objects, size, store, runs)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tMB\tseconds\tMB/s\tx fetch\tbound\t")
	fmt.Fprintf(tw, "fetch: one DAG of the same bytes, 1 peer\t%.1f\t%.2f\t%.1f\t1.00\t\t\n", float64(bytes)/1e6, best.fetch.Seconds(), fetchRate)
	fmt.Fprintf(tw, "repair: %d objects after their holder left (%d rounds)\t%.1f\t%.2f\t%.1f\t%.2f\t>= 0.50 %s\t\n", objects, best.rounds, float64(bytes)/1e6, best.repair.Seconds(), repairRate, ratio, verdict)
	tw.Flush()
	fmt.Printf("a daemon notices the holder left at its next repair round: add up to %s to the repair time\n", "5s")
	return nil
}

func once(dir string, objects, size int, store string, seed uint64) (result, error) {
	var res result
	ctx := context.Background()
	if err := os.RemoveAll(dir); err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	nodes, labs, err := network(dir, store, "laba", "labb", "labc")
	if err != nil {
		return res, err
	}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, p := range [][2]*node.Node{{a, b}, {a, c}, {b, c}} {
		if err := p[0].Connect(ctx, p[1].Addrs()[0]); err != nil {
			return res, err
		}
	}
	// The objects, held by A and B; the bound's DAG (other bytes: no block in common), by B.
	rng := rand.New(rand.NewPCG(seed, 46))
	var cids []string
	for i := range objects {
		d := filepath.Join(dir, "objects", fmt.Sprint(i))
		if err := writeRandom(filepath.Join(d, "data.bin"), size, rng); err != nil {
			return res, err
		}
		var root cid.Cid
		for _, n := range []*node.Node{a, b} {
			if root, err = n.Add(ctx, d, node.AddOptions{Unchecked: true}); err != nil {
				return res, err
			}
		}
		cids = append(cids, root.String())
	}
	whole := filepath.Join(dir, "whole")
	for i := range objects {
		if err := writeRandom(filepath.Join(whole, fmt.Sprint(i), "data.bin"), size, rng); err != nil {
			return res, err
		}
	}
	wroot, err := b.Add(ctx, whole, node.AddOptions{Unchecked: true})
	if err != nil {
		return res, err
	}
	camp, _, err := protocol.SignCampaign(labs[0], &protocol.Campaign{Network: benchNet, Title: "repair bench", Seeds: 1, Replication: 1,
		Created: time.Now().Add(-time.Minute), Deadline: time.Now().Add(time.Hour), Tasks: cids,
		Agents: []protocol.CampaignAgent{protocol.NewCampaignAgent(&agentspec.Spec{Name: "bench", Version: "1", Command: []string{"true"}})}})
	if err != nil {
		return res, err
	}
	for _, n := range nodes {
		r, err := n.Store().Campaigns().Add([][]byte{camp}, vstore.SourceLocal, "")
		if err != nil || r[0].Status == vstore.StatusRefused {
			return res, fmt.Errorf("store the campaign: %+v %v", r, err)
		}
	}
	if sv, err := c.PinKeeper().RepairPins(ctx); err != nil || sv.UnderFactor != 0 || len(sv.Fetched) != 0 {
		return res, fmt.Errorf("before A leaves, C's round should find every object held by A and B: %+v %v", sv, err)
	}

	start := time.Now()
	if _, err := c.PinFetch(ctx, wroot, "bound", nil); err != nil {
		return res, fmt.Errorf("fetch: %w", err)
	}
	res.fetch = time.Since(start)

	if cpuProfile != "" && seed == 0 {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile()
	}
	start = time.Now()
	if err := a.Close(); err != nil {
		return res, err
	}
	for {
		sv, err := c.PinKeeper().RepairPins(ctx)
		if err != nil {
			return res, err
		}
		res.rounds++
		if len(sv.Failed) > 0 {
			return res, fmt.Errorf("repair round %d: %d fetches failed: %v", res.rounds, len(sv.Failed), sv.Failed[0])
		}
		held := 0
		for _, s := range cids {
			cc, _ := cid.Decode(s)
			if c.PinKeeper().HoldsWhole(ctx, cc) {
				held++
			}
		}
		if held == len(cids) {
			break
		}
		if res.rounds > 100 {
			return res, fmt.Errorf("after %d repair rounds C holds %d of %d objects", res.rounds, held, len(cids))
		}
	}
	res.repair = time.Since(start)
	return res, nil
}

// benchNet is the network of the bench: a fresh home's (internal/home/config.go), which the
// campaign store checks a campaign against.
const benchNet = "evalmesh-dev"

// network starts one node per lab of a network of those labs (pin factor 2, the default),
// each certified by its lab.
func network(dir, store string, names ...string) ([]*node.Node, []*attest.Lab, error) {
	var labs []*attest.Lab
	var nl []protocol.NetworkLab
	for _, name := range names {
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return nil, nil, err
		}
		l, err := attest.NewLab(key)
		if err != nil {
			return nil, nil, err
		}
		labs = append(labs, l)
		nl = append(nl, protocol.NetworkLab{Name: name, Key: base64.StdEncoding.EncodeToString(l.Pub)})
	}
	doc, err := protocol.ParseNetworkDoc((&protocol.NetworkDoc{Version: protocol.NetworkDocVersion, Network: benchNet,
		Labs: nl, Ledger: protocol.LedgerPolicy{Worst: "population"}}).Canonical())
	if err != nil {
		return nil, nil, err
	}
	trust, err := doc.TrustStore()
	if err != nil {
		return nil, nil, err
	}
	var nodes []*node.Node
	for i, l := range labs {
		h := home.Home{Dir: filepath.Join(dir, "homes", names[i])}
		if _, err := h.Init(); err != nil {
			return nil, nil, err
		}
		n, err := node.New(context.Background(), h, node.Options{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, API: "127.0.0.1:0",
			Blockstore: store, Trust: trust, Network: doc, StallTimeout: 20 * time.Second})
		if err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, n)
		cert, err := l.Certify(n.ID().String(), time.Now().Add(-time.Hour), 24*time.Hour)
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(h.CertPath(), cert.Raw(), 0o644); err != nil {
			return nil, nil, err
		}
	}
	return nodes, labs, nil
}

func writeRandom(path string, size int, rng *rand.Rand) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return os.WriteFile(path, b, 0o644)
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

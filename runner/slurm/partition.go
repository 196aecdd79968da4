package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/runner/gpu"
)

// node is one compute node of the partition as `scontrol show node -d -o` reports it.
type node struct {
	Name       string
	State      string
	Partitions []string
	GPUType    string
	GPUs       int // configured gres/gpu
	GPUsUsed   int // allocated now
	CPUs       int
	CPUsUsed   int
}

// usable reports whether the node can start jobs (not down, drained, failing or booting).
func (n node) usable() bool {
	for _, bad := range []string{"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWER", "REBOOT", "FUTURE", "MAINT", "INVAL", "UNKNOWN"} {
		if strings.Contains(n.State, bad) {
			return false
		}
	}
	return !strings.HasSuffix(n.State, "*") // "*": not responding
}

// parseNodes reads `scontrol show node -d -o`: one node per line.
func parseNodes(out []byte) []node {
	var nodes []node
	for _, line := range strings.Split(string(out), "\n") {
		f := parseFields(line)
		if f["NodeName"] == "" {
			continue
		}
		n := node{Name: f["NodeName"], State: f["State"]}
		if p := f["Partitions"]; p != "" && p != "(null)" {
			n.Partitions = strings.Split(p, ",")
		}
		n.GPUType, n.GPUs = gresGPUs(f["Gres"])
		_, n.GPUsUsed = gresGPUs(f["GresUsed"])
		n.CPUs, _ = strconv.Atoi(f["CPUTot"])
		n.CPUsUsed, _ = strconv.Atoi(f["CPUAlloc"])
		nodes = append(nodes, n)
	}
	return nodes
}

// gresGPUs reads the gpu entries of a GRES list ("gpu:h200:8(S:0-1),nic:1" or
// "gpu:fake:1(IDX:0)"): their type and total count.
func gresGPUs(gres string) (typ string, count int) {
	// Commas also separate socket/index lists inside parentheses: drop those first.
	var b strings.Builder
	depth := 0
	for _, r := range gres {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth = max(depth-1, 0)
		case depth == 0:
			b.WriteRune(r)
		}
	}
	for _, e := range strings.Split(b.String(), ",") {
		parts := strings.Split(e, ":")
		if len(parts) < 2 || parts[0] != "gpu" {
			continue
		}
		n, err := strconv.Atoi(parts[len(parts)-1])
		if err != nil || n < 0 {
			continue
		}
		count += n
		if len(parts) == 3 && typ == "" {
			typ = parts[1]
		}
	}
	return typ, count
}

// nodes lists the partition's nodes (every node in some partition when the executor uses
// the cluster's default partition).
func (e *Executor) nodes(ctx context.Context) ([]node, error) {
	out, err := e.cli.run(ctx, "scontrol", "show", "node", "-d", "-o")
	if err != nil {
		return nil, err
	}
	var in []node
	for _, n := range parseNodes(out) {
		for _, p := range n.Partitions {
			if e.o.Partition == "" || p == e.o.Partition {
				in = append(in, n)
				break
			}
		}
	}
	if len(in) == 0 {
		return nil, fmt.Errorf("slurm executor: partition %q has no nodes", e.o.Partition)
	}
	return in, nil
}

// GPUSource is the partition's GPUs as a gpu.Source: what the runner allocates from and
// `evalmesh gpus` lists on a Slurm node. Each GPU is named slurm:<node>/gpu<i> (the
// compute node's NVML UUIDs are not visible from here); Slurm decides which one a job gets,
// the runner only counts them. Energy and utilisation are not read here: the compute node
// reads its NVML counters for the job (RunJob).
func (e *Executor) GPUSource() gpu.Source { return partitionGPUs{e} }

type partitionGPUs struct{ e *Executor }

var errRemoteGPU = errors.New("slurm partition GPUs are read on their compute node")

func (p partitionGPUs) Inventory() (gpu.Inventory, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes, err := p.e.nodes(ctx)
	if err != nil {
		return gpu.Inventory{}, err
	}
	inv := gpu.Inventory{Driver: "slurm partition " + p.e.o.Partition, GPUs: []gpu.Info{}}
	for _, n := range nodes {
		if !n.usable() {
			continue
		}
		name := n.GPUType
		if name == "" {
			name = "gpu"
		}
		for i := 0; i < n.GPUs; i++ {
			inv.GPUs = append(inv.GPUs, gpu.Info{Index: len(inv.GPUs), UUID: fmt.Sprintf("slurm:%s/gpu%d", n.Name, i), Name: name})
		}
	}
	if len(inv.GPUs) == 0 {
		inv.CPUOnly, inv.Reason = true, fmt.Sprintf("slurm partition %q has no usable GPU nodes", p.e.o.Partition)
	}
	return inv, nil
}

func (partitionGPUs) EnergyMilliJoules(string) (uint64, error) { return 0, errRemoteGPU }
func (partitionGPUs) Sample(string) (gpu.Sample, error)        { return gpu.Sample{}, errRemoteGPU }

// Capacity is how many runs the partition can start now besides the running ones this node
// already holds (running): its free GPUs on usable nodes when it has GPUs, else its free
// CPUs (a run takes at least one), capped by the QoS's MaxJobsPerUser where Slurm reports one.
// The daemon re-reads it so claims never exceed what the cluster can start.
func (e *Executor) Capacity(ctx context.Context, running int) (int, error) {
	nodes, err := e.nodes(ctx)
	if err != nil {
		return 0, err
	}
	gpus, freeGPUs, freeCPUs := 0, 0, 0
	for _, n := range nodes {
		if !n.usable() {
			continue
		}
		gpus += n.GPUs
		freeGPUs += max(n.GPUs-n.GPUsUsed, 0)
		freeCPUs += max(n.CPUs-n.CPUsUsed, 0)
	}
	c := running + freeCPUs
	if gpus > 0 {
		c = running + freeGPUs
	}
	if limit := e.qosMaxJobs(ctx); limit > 0 {
		c = min(c, limit)
	}
	return c, nil
}

// qosMaxJobs is the configured QoS's MaxJobsPU (0: none, or accounting is off).
func (e *Executor) qosMaxJobs(ctx context.Context) int {
	if e.o.QoS == "" {
		return 0
	}
	out, err := e.cli.run(ctx, "scontrol", "show", "assoc_mgr", "flags=qos", "qos="+e.o.QoS)
	if err != nil {
		return 0
	}
	return maxJobsPU(string(out))
}

// maxJobsPU reads "MaxJobsPU=N(used)" from `scontrol show assoc_mgr flags=qos`.
func maxJobsPU(out string) int {
	i := strings.Index(out, "MaxJobsPU=")
	if i < 0 {
		return 0
	}
	v := out[i+len("MaxJobsPU="):]
	if j := strings.IndexAny(v, "( \n"); j >= 0 {
		v = v[:j]
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

package home

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"go.yaml.in/yaml/v3"
)

// Config is the node's config file. Defaults never send a packet outside 127.0.0.0/8: a lab
// opts in to wider listening, bootstrap peers and mDNS explicitly.
type Config struct {
	// Network names the federation; it is part of every pubsub topic name.
	Network string `yaml:"network"`
	// Listen holds libp2p multiaddrs to listen on.
	Listen []string `yaml:"listen"`
	// API is the host:port of the local HTTP API.
	API string `yaml:"api"`
	// Bootstrap holds multiaddrs (with /p2p/) of peers to connect to at start, and again
	// whenever not connected (node/redial.go).
	Bootstrap []string `yaml:"bootstrap"`
	// MDNS turns on LAN discovery.
	MDNS bool `yaml:"mdns"`
	// PrivateNetworkKey is a path to a libp2p pre-shared key file for a closed federation.
	PrivateNetworkKey string `yaml:"private_network_key"`
	// MaxBundleSize caps the declared size of a bundle this node will fetch or unpack.
	MaxBundleSize int64 `yaml:"max_bundle_size"`
	// Blockstore is "flat" (one file per block, HOME/blocks) or "pack" (blocks appended to
	// segment files with an index, HOME/blocks-pack).
	Blockstore string `yaml:"blockstore"`
	// Runner holds the lab's execution policy.
	Runner RunnerConfig `yaml:"runner"`
}

// RunnerConfig is the lab's policy for runs on this node.
type RunnerConfig struct {
	// Executor is "docker", "process" or "slurm".
	Executor string `yaml:"executor"`
	// AllowNetwork lets agents whose spec asks for a network have one.
	AllowNetwork bool `yaml:"allow_network"`
	// GPUs lists GPU UUIDs evalmesh may use; empty means all that NVML reports.
	GPUs []string `yaml:"gpus"`
	// MaxParallel is how many runs a node takes on at once when it has no GPU (a GPU node
	// takes one run per free GPU); 0 means 1.
	MaxParallel int `yaml:"max_parallel"`
	// Models is which models this node serves beside agents (docs/agents.md).
	Models ModelsConfig `yaml:"models"`
	// Slurm configures the slurm executor (runner/slurm).
	Slurm SlurmConfig `yaml:"slurm"`
}

// ModelsConfig is the lab's model policy: an agent spec naming a model image or weight
// folder not listed here, or more GPUs than MaxGPUs, is not claimed and not run.
type ModelsConfig struct {
	// Images are the model image IDs (sha256:…) this node will run; empty: none.
	Images []string `yaml:"images"`
	// Weights maps a weight folder's name (what specs reference) to its host path; the
	// folder is mounted read-only and checked against the digest the spec records.
	Weights map[string]string `yaml:"weights"`
	// MaxGPUs is the most GPUs one model may take; 0 means 1.
	MaxGPUs int `yaml:"max_gpus"`
}

// SlurmConfig is where and how the slurm executor submits jobs.
type SlurmConfig struct {
	// Partition, Account and QoS are passed to sbatch; empty: the cluster's defaults.
	Partition string `yaml:"partition"`
	Account   string `yaml:"account"`
	QoS       string `yaml:"qos"`
	// ContainerRuntime runs the agent on the compute node: "docker" or "podman" (its
	// Docker-compatible socket; rootless for a non-root job user, docs/slurm.md).
	ContainerRuntime string `yaml:"container_runtime"`
	// SbatchOptions are further sbatch options the lab allows, each --name or --name=value
	// (e.g. --constraint=h200); options evalmesh sets from the task are refused.
	SbatchOptions []string `yaml:"sbatch_options"`
}

// DefaultConfigYAML is what `evalmesh init` writes; it is also parsed for the defaults, so
// the comments and the behaviour cannot drift apart.
const DefaultConfigYAML = `# evalmesh node config. Every default keeps traffic on 127.0.0.1: to join other labs,
# listen on a routable address and list their nodes under bootstrap.

# Name of the federation; pubsub topics are /evalmesh/<network>/... .
network: evalmesh-dev

# libp2p listen addresses (TCP and QUIC). Use /ip4/0.0.0.0/... to accept other machines.
listen:
  - /ip4/127.0.0.1/tcp/4201
  - /ip4/127.0.0.1/udp/4201/quic-v1

# Local HTTP API the CLI talks to (docs/api.md). Port 0: a free port at each start, written
# to HOME/api. Only the account that can read HOME/api.token may use it; keep it on loopback.
api: 127.0.0.1:0

# Peers to dial at start, as multiaddrs ending in /p2p/PEER_ID. Empty: talk to nobody.
# They, and peers connected to since, are dialled again while not connected (HOME/peers.json).
bootstrap: []

# Find peers on the local network with mDNS (multicast; off by default).
mdns: false

# Path to a libp2p pre-shared key (swarm.key) for a closed federation; empty: none.
private_network_key: ""

# Largest bundle (declared DAG size, bytes) this node will fetch or unpack: 64 GiB.
max_bundle_size: 68719476736

# Block storage: pack (blocks appended to 1 GiB segment files under HOME/blocks-pack with
# a checksummed index; about 2x faster transfers than flat here) or flat (one file per
# block under HOME/blocks, kubo's flatfs layout). Switching does not move blocks already
# stored: the node refuses to open a home whose blocks are in the other store.
blockstore: pack

runner:
  # docker (production) or process (development, no isolation beyond the OS), or slurm
  # (each task a batch job on the cluster: see runner.slurm below and docs/slurm.md).
  executor: docker
  # Give agents a network when their spec asks for one.
  allow_network: false
  # GPU UUIDs evalmesh may use; empty: every GPU NVML reports.
  gpus: []
  # Runs at once on a node without GPUs (a GPU node takes one run per allowed GPU).
  max_parallel: 1
  # Models served beside agents (docs/agents.md): the model image IDs this node runs, the
  # weight folders it offers (name: host path, mounted read-only), and the most GPUs one
  # model may take. A campaign whose agent asks for anything else is not claimed here.
  models:
    images: []
    weights: {}
    max_gpus: 1
  # The slurm executor: jobs go to this partition (empty: the cluster's default), account
  # and QoS; the compute node runs the agent through its Docker engine; sbatch_options are
  # further options the lab allows, e.g. [--constraint=h200].
  slurm:
    partition: ""
    account: ""
    qos: ""
    container_runtime: docker
    sbatch_options: []
`

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	var c Config
	if err := yaml.Unmarshal([]byte(DefaultConfigYAML), &c); err != nil {
		panic("default config does not parse: " + err.Error())
	}
	return c
}

// Config reads the home's config file; a missing file gives the defaults. Unknown fields are
// an error naming the field, so a typo does not silently fall back to a default.
func (h Home) Config() (Config, error) {
	cfg := DefaultConfig()
	raw, err := os.ReadFile(h.ConfigPath())
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("config %s: %w", h.ConfigPath(), err)
	}
	return cfg, nil
}

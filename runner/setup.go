package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

// ForHome builds the Runner a node home describes: its identity signs, its node certificate
// (if any) rides along, its config's runner section sets the policy (allowed GPUs,
// network), and NVML is opened once (CPU-only, said once on log, when absent). executor
// overrides config's runner.executor when not empty; executors are the ones the caller
// could construct (the docker executor needs an engine).
func ForHome(h home.Home, executors map[string]Executor, executor string, log io.Writer) (*Runner, error) {
	key, err := h.Identity()
	if err != nil {
		return nil, err
	}
	cfg, err := h.Config()
	if err != nil {
		return nil, err
	}
	if executor == "" {
		executor = cfg.Runner.Executor
	}
	if _, ok := executors[executor]; !ok {
		return nil, fmt.Errorf("executor %q is not available (have %v): pass --executor process, or set runner.executor in %s", executor, sortedKeys(executors), h.ConfigPath())
	}
	r := &Runner{
		Home: h, Executors: executors, Executor: executor, Key: key,
		AllowNetwork: cfg.Runner.AllowNetwork, AllowedGPUs: cfg.Runner.GPUs,
		Models: PolicyFromConfig(cfg.Runner),
	}
	cert, err := attest.LoadNodeCert(h.CertPath())
	switch {
	case err == nil:
		r.Cert, r.Lab = cert, cert.Lab
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, err
	}
	// Sealed bundles: this lab's grants among the home's envelope files (where `task grant`
	// writes them); a daemon's mesh replaces this with its store's.
	keys := &GrantKeys{Lab: r.Lab, Grants: DirGrants(h.AttestationsDir())}
	if id, err := attest.LoadAgeIdentity(h.LabAgeKeyPath()); err == nil {
		keys.Identity = id
	}
	r.Keys = keys
	src, err := gpu.System(log)
	if err != nil {
		// NVML is present but broken: say so and run CPU-only rather than not at all.
		fmt.Fprintf(log, "evalmesh: %v: this node runs CPU-only\n", err)
	} else if src != nil {
		r.GPUs = src
	}
	return r, nil
}

// Inventory is the node's GPU inventory as runs see it (NVML, read once).
func (r *Runner) Inventory() (gpu.Inventory, error) { return r.inventory() }

// PolicyFromConfig is the lab's model and network policy of a config's runner section.
func PolicyFromConfig(c home.RunnerConfig) ModelPolicy {
	return ModelPolicy{Images: c.Models.Images, Weights: c.Models.Weights, MaxGPUs: c.Models.MaxGPUs, AllowNetwork: c.AllowNetwork}
}

// sortedKeys returns m's keys in order, so error messages list executors the same way each time.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

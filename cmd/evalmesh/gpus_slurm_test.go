package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evalmesh/evalmesh/runner/slurm/slurmtest"
)

// On a node whose runner.executor is slurm, `evalmesh gpus` lists its partition's GPUs
// (the test cluster's two fake GRES GPUs).
func TestGPUsOnSlurmNode(t *testing.T) {
	c, err := slurmtest.Start()
	if errors.Is(err, slurmtest.ErrNoSlurm) {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Setenv("SLURM_CONF", c.Conf)
	h := filepath.Join(t.TempDir(), "node")
	mustCLI(t, "init", "--home", h)
	cfg, err := os.ReadFile(filepath.Join(h, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(cfg), "executor: docker", "executor: slurm", 1)
	y = strings.Replace(y, "    partition: \"\"", "    partition: "+slurmtest.Partition, 1)
	if err := os.WriteFile(filepath.Join(h, "config.yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, "gpus", "--home", h)
	for _, want := range []string{"slurm partition " + slurmtest.Partition + ": 2 GPU(s)", "slurm:localhost/gpu0", "slurm:localhost/gpu1", "fake"} {
		if !strings.Contains(out, want) {
			t.Errorf("evalmesh gpus lacks %q:\n%s", want, out)
		}
	}
	if js := mustCLI(t, "gpus", "--home", h, "--json"); !strings.Contains(js, `"uuid": "slurm:localhost/gpu1"`) {
		t.Errorf("evalmesh gpus --json:\n%s", js)
	}
}

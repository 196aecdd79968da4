//go:build cgo

package doctor

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

// The GPU check over go-nvml's mock of an 8-GPU H200 machine and over a machine without
// NVML (the nil source, what gpu.System gives there).
func TestGPUsCheck(t *testing.T) {
	n, err := gpu.Open(dgxh200.New())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	h200 := n.Inventory
	noDriver := (*gpu.NVML)(nil).Inventory
	inv, err := h200()
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(gpus ...string) home.Config {
		c := home.DefaultConfig()
		c.Runner.GPUs = gpus
		return c
	}
	for _, tc := range []struct {
		name   string
		cfg    home.Config
		inv    func() (gpu.Inventory, error)
		want   Status
		detail []string
	}{
		{"all GPUs", cfg(), h200, OK, []string{"8 GPU(s) NVIDIA H200", "driver 550.54.15"}},
		{"two allowed", cfg(inv.GPUs[0].UUID, inv.GPUs[3].UUID), h200, OK, []string{"runner.gpus allows 2"}},
		{"one not there", cfg(inv.GPUs[0].UUID, "GPU-not-here"), h200, Fail, []string{"does not report: GPU-not-here"}},
		{"no driver, CPU-only node", cfg(), noDriver, Warn, []string{"no NVIDIA driver", "CPU-only"}},
		{"no driver, GPUs asked for", cfg(inv.GPUs[0].UUID), noDriver, Fail, []string{"no NVIDIA driver", "runner.gpus lists 1 GPU(s)"}},
	} {
		c := checkGPUs(tc.cfg, tc.inv)
		if c.Status != tc.want {
			t.Errorf("%s: status %s, want %s (%s)", tc.name, c.Status, tc.want, c.Detail)
		}
		for _, s := range tc.detail {
			if !strings.Contains(c.Detail, s) {
				t.Errorf("%s: detail %q lacks %q", tc.name, c.Detail, s)
			}
		}
		if c.Status == Fail && c.Fix == "" {
			t.Errorf("%s: a fail with no fix", tc.name)
		}
	}
}

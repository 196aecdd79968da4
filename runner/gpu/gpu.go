package gpu

import (
	"errors"
	"sort"
)

// ErrNoNVML means the NVML library is not on this machine: the node runs CPU-only.
var ErrNoNVML = errors.New("no NVML library (libnvidia-ml.so.1) found")

// Info describes one GPU.
type Info struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	Name        string `json:"name"`
	MemoryBytes uint64 `json:"memory_bytes"`
}

// Inventory is what `evalmesh gpus` prints.
type Inventory struct {
	// CPUOnly is set when NVML is absent or reports no GPU; Reason says which.
	CPUOnly     bool   `json:"cpu_only"`
	Reason      string `json:"reason,omitempty"`
	Driver      string `json:"driver,omitempty"`
	NVMLVersion string `json:"nvml_version,omitempty"`
	CUDAVersion int    `json:"cuda_driver_version,omitempty"`
	GPUs        []Info `json:"gpus"`
}

// Model is the name shared by the GPUs listed, or a comma-joined list of distinct names.
func (inv Inventory) Model(uuids []string) string {
	seen := map[string]bool{}
	var names []string
	for _, g := range inv.GPUs {
		if !contains(uuids, g.UUID) || seen[g.Name] {
			continue
		}
		seen[g.Name] = true
		names = append(names, g.Name)
	}
	sort.Strings(names)
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Sample is one utilisation reading of one GPU.
type Sample struct {
	GPUPercent    uint32 `json:"gpu_percent"`
	MemoryPercent uint32 `json:"memory_percent"`
	UsedBytes     uint64 `json:"used_bytes"`
}

// Source reads GPUs. *NVML implements it; a nil *NVML is the CPU-only source.
type Source interface {
	Inventory() (Inventory, error)
	// EnergyMilliJoules reads the total-energy counter (mJ since the driver loaded).
	EnergyMilliJoules(uuid string) (uint64, error)
	Sample(uuid string) (Sample, error)
}

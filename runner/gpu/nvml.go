package gpu

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
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

// NVML is a Source over an initialised NVML library (real or go-nvml's mock).
type NVML struct {
	mu  sync.Mutex // NVML handles are thread-safe, but the mock's maps are not
	lib nvml.Interface
}

// Open initialises lib (nvml.New() for the real library, a mock server in tests). It
// returns ErrNoNVML when the library cannot be loaded.
func Open(lib nvml.Interface) (*NVML, error) {
	ret := lib.Init()
	if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
		return nil, ErrNoNVML
	}
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML init: %v (is the NVIDIA driver loaded? try nvidia-smi)", ret)
	}
	return &NVML{lib: lib}, nil
}

// Close shuts NVML down.
func (n *NVML) Close() error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %v", ret)
	}
	return nil
}

var (
	systemOnce sync.Once
	systemSrc  *NVML
	systemErr  error
)

// System opens the machine's NVML once per process. When NVML is missing it writes one
// line to log (only the first call) and returns nil: the CPU-only source.
func System(log io.Writer) (*NVML, error) {
	systemOnce.Do(func() {
		systemSrc, systemErr = Open(nvml.New())
		if errors.Is(systemErr, ErrNoNVML) {
			if log != nil {
				fmt.Fprintln(log, "evalmesh: no NVML library found: this node runs CPU-only (runs get no GPUs)")
			}
			systemSrc, systemErr = nil, nil
		}
	})
	return systemSrc, systemErr
}

// Inventory lists the GPUs. A nil receiver reports CPU-only.
func (n *NVML) Inventory() (Inventory, error) {
	if n == nil {
		return Inventory{CPUOnly: true, Reason: ErrNoNVML.Error(), GPUs: []Info{}}, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	inv := Inventory{GPUs: []Info{}}
	var ret nvml.Return
	if inv.Driver, ret = n.lib.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		return inv, fmt.Errorf("NVML driver version: %v", ret)
	}
	if v, ret := n.lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
		inv.NVMLVersion = v
	}
	if v, ret := n.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		inv.CUDAVersion = v
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return inv, fmt.Errorf("NVML device count: %v", ret)
	}
	for i := 0; i < count; i++ {
		d, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return inv, fmt.Errorf("NVML device %d: %v", i, ret)
		}
		info := Info{Index: i}
		if info.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return inv, fmt.Errorf("NVML device %d UUID: %v", i, ret)
		}
		if info.Name, ret = d.GetName(); ret != nvml.SUCCESS {
			return inv, fmt.Errorf("NVML device %d name: %v", i, ret)
		}
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			info.MemoryBytes = mem.Total
		}
		inv.GPUs = append(inv.GPUs, info)
	}
	if len(inv.GPUs) == 0 {
		inv.CPUOnly, inv.Reason = true, "NVML reports no GPU"
	}
	return inv, nil
}

func (n *NVML) device(uuid string) (nvml.Device, error) {
	d, ret := n.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("GPU %s: %v", uuid, ret)
	}
	return d, nil
}

// EnergyMilliJoules reads the GPU's total-energy counter (Volta and newer).
func (n *NVML) EnergyMilliJoules(uuid string) (uint64, error) {
	if n == nil {
		return 0, ErrNoNVML
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	d, err := n.device(uuid)
	if err != nil {
		return 0, err
	}
	e, ret := d.GetTotalEnergyConsumption()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("GPU %s energy counter: %v", uuid, ret)
	}
	return e, nil
}

// Sample reads utilisation and memory in use.
func (n *NVML) Sample(uuid string) (Sample, error) {
	if n == nil {
		return Sample{}, ErrNoNVML
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	d, err := n.device(uuid)
	if err != nil {
		return Sample{}, err
	}
	u, ret := d.GetUtilizationRates()
	if ret != nvml.SUCCESS {
		return Sample{}, fmt.Errorf("GPU %s utilisation: %v", uuid, ret)
	}
	s := Sample{GPUPercent: u.Gpu, MemoryPercent: u.Memory}
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		s.UsedBytes = m.Used
	}
	return s, nil
}

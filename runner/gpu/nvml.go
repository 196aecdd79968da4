//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

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

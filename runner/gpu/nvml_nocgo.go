//go:build !cgo

package gpu

import (
	"fmt"
	"io"
	"sync"
)

// NVML is unavailable in a binary built without cgo (go-nvml loads the library through
// cgo): such a node is CPU-only.
type NVML struct{}

var systemOnce sync.Once

// System reports CPU-only, once, in a binary built with CGO_ENABLED=0.
func System(log io.Writer) (*NVML, error) {
	systemOnce.Do(func() {
		if log != nil {
			fmt.Fprintln(log, "evalmesh: built without cgo, so without NVML: this node runs CPU-only (runs get no GPUs)")
		}
	})
	return nil, nil
}

// Close does nothing.
func (n *NVML) Close() error { return nil }

// Inventory reports CPU-only.
func (n *NVML) Inventory() (Inventory, error) {
	return Inventory{CPUOnly: true, Reason: "built without cgo (no NVML)", GPUs: []Info{}}, nil
}

// EnergyMilliJoules always fails: there is no NVML.
func (n *NVML) EnergyMilliJoules(string) (uint64, error) { return 0, ErrNoNVML }

// Sample always fails: there is no NVML.
func (n *NVML) Sample(string) (Sample, error) { return Sample{}, ErrNoNVML }

// Package gpu is the runner's view of the lab's NVIDIA GPUs through NVML (go-nvml): the
// inventory (count, UUID, name, memory, driver), the choice of free GPUs for a run, and the
// telemetry a run attestation carries (the total-energy counter's delta over the run and
// utilisation samples).
//
// A machine without the NVML library runs CPU-only: Open reports ErrNoNVML, System logs
// that once, and every run gets no GPUs. Tests drive the same code with go-nvml's mock
// server, so nothing here needs a GPU to be tested.
//
// Allocation (Allocate) and telemetry accumulation (Telemetry.Add) are pure functions; the
// caller owns persistence of which run holds which GPU, so a restarted node can release them.
package gpu

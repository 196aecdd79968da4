package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Telemetry summarises what a run's GPUs did. It is the attestation's telemetry block.
type Telemetry struct {
	// EnergyStartMJ is each GPU's counter when the run started (kept so a restarted node
	// can still compute the delta).
	EnergyStartMJ map[string]uint64 `json:"energy_start_mj,omitempty"`
	EnergyJoules  float64           `json:"energy_joules"`
	// EnergyJoulesByGPU is each GPU's part of EnergyJoules (set by Finish), so a run that
	// split its GPUs (a model beside its agent) can say what each part used.
	EnergyJoulesByGPU map[string]float64 `json:"energy_joules_by_gpu,omitempty"`
	// Samples counts readings (one per GPU per poll).
	Samples int `json:"samples"`
	// UtilMeanPercent is the mean over samples and GPUs; UtilMaxPercent the largest reading.
	UtilMeanPercent float64 `json:"util_mean_percent"`
	UtilMaxPercent  uint32  `json:"util_max_percent"`
	PeakMemoryBytes uint64  `json:"peak_memory_bytes"`
	utilSum         float64
}

// Add folds one sample into the summary.
func (t *Telemetry) Add(s Sample) {
	t.utilSum += float64(s.GPUPercent)
	t.Samples++
	t.UtilMeanPercent = t.utilSum / float64(t.Samples)
	if s.GPUPercent > t.UtilMaxPercent {
		t.UtilMaxPercent = s.GPUPercent
	}
	if s.UsedBytes > t.PeakMemoryBytes {
		t.PeakMemoryBytes = s.UsedBytes
	}
}

// Meter measures a run's GPUs. Start reads the energy counters; Poll adds utilisation
// samples; Finish computes the energy delta. Zero GPUs or a nil Source give zeros.
type Meter struct {
	src  Source
	gpus []string
	T    Telemetry
	// Last is the most recent per-GPU sample mean, for a live status line.
	Last float64
}

// StartMeter reads the energy counters now. Counters that cannot be read are left out
// (the run's energy is then a lower bound, and Telemetry says how many GPUs counted).
func StartMeter(src Source, gpus []string) *Meter {
	m := &Meter{src: src, gpus: gpus, T: Telemetry{EnergyStartMJ: map[string]uint64{}}}
	if src == nil || len(gpus) == 0 {
		return m
	}
	for _, u := range gpus {
		if e, err := src.EnergyMilliJoules(u); err == nil {
			m.T.EnergyStartMJ[u] = e
		}
	}
	return m
}

// ResumeMeter continues a meter from telemetry persisted before a restart.
func ResumeMeter(src Source, gpus []string, t Telemetry) *Meter {
	if t.EnergyStartMJ == nil {
		t.EnergyStartMJ = map[string]uint64{}
	}
	t.utilSum = t.UtilMeanPercent * float64(t.Samples)
	return &Meter{src: src, gpus: gpus, T: t}
}

// Poll takes one utilisation sample of every GPU.
func (m *Meter) Poll() {
	if m.src == nil || len(m.gpus) == 0 {
		return
	}
	sum, n := 0.0, 0
	for _, u := range m.gpus {
		s, err := m.src.Sample(u)
		if err != nil {
			continue
		}
		m.T.Add(s)
		sum += float64(s.GPUPercent)
		n++
	}
	if n > 0 {
		m.Last = sum / float64(n)
	}
}

// Finish reads the counters again and sets EnergyJoules to the summed delta. A counter that
// went backwards (driver reload) counts as zero rather than a huge wrap-around.
func (m *Meter) Finish() Telemetry {
	if m.src != nil {
		total := 0.0
		by := map[string]float64{}
		for u, start := range m.T.EnergyStartMJ {
			end, err := m.src.EnergyMilliJoules(u)
			if err != nil || end < start {
				continue
			}
			by[u] = float64(end-start) / 1000
			total += by[u]
		}
		m.T.EnergyJoules = total
		if len(by) > 0 {
			m.T.EnergyJoulesByGPU = by
		}
	}
	return m.T
}

// GPUSeconds is the run's GPU time: wall time times the number of GPUs held.
func GPUSeconds(wall time.Duration, n int) float64 { return wall.Seconds() * float64(n) }

// HashUUID hides a GPU's UUID in attestations while letting the same lab's runs be linked:
// hex sha256 of the UUID string.
func HashUUID(uuid string) string {
	h := sha256.Sum256([]byte(uuid))
	return hex.EncodeToString(h[:])
}

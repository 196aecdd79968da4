//go:build cgo

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

type gpuCollector struct {
	src gpu.Source
	clk clock.Clock // nil: the wall clock
}

func (gpuCollector) Describe(chan<- *prometheus.Desc) {}
func (c gpuCollector) Collect(ch chan<- prometheus.Metric) {
	clk := c.clk
	if clk == nil {
		clk = clock.Real()
	}
	collectGPUs(c.src, clk, ch)
}

// slowGPUs is a GPU source of n GPUs whose every sample takes each long on a fake clock.
type slowGPUs struct {
	n    int
	clk  *clock.Fake
	each time.Duration
}

func (s slowGPUs) Inventory() (gpu.Inventory, error) {
	inv := gpu.Inventory{}
	for i := range s.n {
		inv.GPUs = append(inv.GPUs, gpu.Info{Index: i, UUID: fmt.Sprintf("GPU-%d", i)})
	}
	return inv, nil
}
func (s slowGPUs) EnergyMilliJoules(string) (uint64, error) { return 1000, nil }
func (s slowGPUs) Sample(string) (gpu.Sample, error) {
	s.clk.Advance(s.each)
	return gpu.Sample{GPUPercent: 50}, nil
}

// A scrape stops reading GPUs once gpuSampleTimeout has passed on the node's clock: GPUs
// whose samples take 0.9 s each of the fake clock's time are read up to the third (0 s,
// 0.9 s and 1.8 s are before the 2 s bound), not the eight the machine has. On the wall
// clock the samples take no time and all eight would be read.
func TestGPUScrapeStopsAtItsTimeoutOnTheNodeClock(t *testing.T) {
	fake := clock.NewFake(time.Date(2031, 3, 1, 9, 0, 0, 0, time.UTC))
	c := gpuCollector{src: slowGPUs{n: 8, clk: fake, each: 900 * time.Millisecond}, clk: fake}
	if n := promtest.CollectAndCount(c, "evalmesh_gpu_utilization_ratio"); n != 3 {
		t.Fatalf("%d GPUs read in one scrape, want 3 (the bound is 2 s on the node's clock)", n)
	}
}

// TestGPUMetricsThroughNVML reads utilisation, memory and energy through the real NVML path
// (runner/gpu.Open) over go-nvml's DGX H200 mock: one series per GPU index, no UUID.
func TestGPUMetricsThroughNVML(t *testing.T) {
	s := dgxh200.New()
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		i := i
		dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return uint64(1_000_000 * (i + 1)), nvml.SUCCESS }
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: 5}, nvml.SUCCESS
		}
	}
	src, err := gpu.Open(s)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(gpuCollector{src: src})
	want := `
# HELP evalmesh_gpu_utilization_ratio GPU utilisation (0-1) sampled at scrape, by the GPU's index on this machine.
# TYPE evalmesh_gpu_utilization_ratio gauge
evalmesh_gpu_utilization_ratio{gpu="0"} 0
evalmesh_gpu_utilization_ratio{gpu="1"} 0.1
evalmesh_gpu_utilization_ratio{gpu="2"} 0.2
evalmesh_gpu_utilization_ratio{gpu="3"} 0.3
evalmesh_gpu_utilization_ratio{gpu="4"} 0.4
evalmesh_gpu_utilization_ratio{gpu="5"} 0.5
evalmesh_gpu_utilization_ratio{gpu="6"} 0.6
evalmesh_gpu_utilization_ratio{gpu="7"} 0.7
# HELP evalmesh_gpu_energy_joules_total The GPU's energy counter since its driver loaded, by index.
# TYPE evalmesh_gpu_energy_joules_total counter
evalmesh_gpu_energy_joules_total{gpu="0"} 1000
evalmesh_gpu_energy_joules_total{gpu="1"} 2000
evalmesh_gpu_energy_joules_total{gpu="2"} 3000
evalmesh_gpu_energy_joules_total{gpu="3"} 4000
evalmesh_gpu_energy_joules_total{gpu="4"} 5000
evalmesh_gpu_energy_joules_total{gpu="5"} 6000
evalmesh_gpu_energy_joules_total{gpu="6"} 7000
evalmesh_gpu_energy_joules_total{gpu="7"} 8000
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "evalmesh_gpu_utilization_ratio", "evalmesh_gpu_energy_joules_total"); err != nil {
		t.Error(err)
	}
	if n := promtest.CollectAndCount(gpuCollector{src: src}, "evalmesh_gpu_memory_used_bytes"); n != 8 {
		t.Errorf("%d memory series, want 8", n)
	}
	out, _ := reg.Gather()
	for _, mf := range out {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.HasPrefix(l.GetValue(), "GPU-") {
					t.Errorf("%s labelled with a UUID %s", mf.GetName(), l.GetValue())
				}
			}
		}
	}
	// A CPU-only source (no NVML) yields no GPU series.
	var none *gpu.NVML
	if n := promtest.CollectAndCount(gpuCollector{src: none}); n != 0 {
		t.Errorf("CPU-only: %d series", n)
	}
}

func TestNodeCountersKeepTheirLabelSetsBounded(t *testing.T) {
	nm := newNodeMetrics()
	nm.runEnded(protocol.RunOutcome{Kind: protocol.RunValid}, true, protocol.AbortFinishedElsewhere) // a result counts even after the slot was let go
	nm.runEnded(protocol.RunOutcome{Kind: protocol.RunAgentFailed}, false, "")
	nm.runEnded(protocol.RunOutcome{Kind: protocol.RunInfraFailed}, true, protocol.AbortHardLimit)
	nm.runEnded(protocol.RunOutcome{Kind: protocol.RunInfraFailed}, false, "")
	// Given up: another node holds the attempt (the coordinator's RunGivenUp, after a GiveUp
	// cut the run short), or another node's result finished the slot.
	nm.runEnded(protocol.RunOutcome{Kind: protocol.RunGivenUp}, false, "")
	nm.runEnded(protocol.RunOutcome{Kind: protocol.RunInfraFailed}, true, protocol.AbortFinishedElsewhere)
	for outcome, want := range map[string]float64{"valid": 1, "agent_failed": 1, "aborted": 1, "infra_failed": 1, "given_up": 2} {
		if got := promtest.ToFloat64(nm.runs.WithLabelValues(outcome)); got != want {
			t.Errorf("runs{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	nm.claim("sent", protocol.ClaimKindClaim)
	nm.claim("received", "12D3KooWSomebodyChoseThis")
	if got := promtest.ToFloat64(nm.claims.WithLabelValues("received", "other")); got != 1 {
		t.Errorf("an unknown claim kind is not counted as other: %v", got)
	}
	if n := promtest.CollectAndCount(nm.claims); n != 2 {
		t.Errorf("%d claim series, want 2", n)
	}
	nm.syncSession([]syncer.Stats{{Rounds: 3, BytesSent: 100, BytesRecv: 40}, {Rounds: 2, BytesSent: 10, BytesRecv: 5}}, nil)
	nm.syncSession(nil, errors.New("stream reset"))
	if promtest.ToFloat64(nm.syncRounds) != 5 || promtest.ToFloat64(nm.syncBytes.WithLabelValues("sent")) != 110 ||
		promtest.ToFloat64(nm.syncBytes.WithLabelValues("received")) != 45 || promtest.ToFloat64(nm.syncSessions.WithLabelValues("error")) != 1 {
		t.Error("sync counters do not add up")
	}
}

type certCollector struct{ h home.Home }

func (certCollector) Describe(chan<- *prometheus.Desc)      {}
func (c certCollector) Collect(ch chan<- prometheus.Metric) { collectCertExpiry(c.h, ch) }

// The certificate's expiry is read from HOME/node-cert.json at each scrape: absent without
// one, its not_after once written, the renewed one's after a renewal is copied in.
func TestCertificateExpiryMetricFollowsTheFile(t *testing.T) {
	h := home.Home{Dir: t.TempDir()}
	lab, err := attest.InitLab(filepath.Join(t.TempDir(), "lab"), "acme")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(certCollector{h})
	if n, err := promtest.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("without a certificate: %d series (%v), want none", n, err)
	}
	from := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, valid := range []time.Duration{90 * 24 * time.Hour, 180 * 24 * time.Hour} {
		c, err := lab.Certify("12D3KooWHVkCdciFMrNZpVztsvKMJrxvPmdcn3GC3z9ob4KKqhvR", from, valid)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.CertPath(), c.Raw(), 0o644); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("# HELP evalmesh_certificate_expiry_timestamp_seconds %s\n# TYPE evalmesh_certificate_expiry_timestamp_seconds gauge\nevalmesh_certificate_expiry_timestamp_seconds %d\n",
			"When the node certificate in HOME/node-cert.json stops being valid (not_after), in Unix seconds, read at scrape time (absent without a readable certificate).", from.Add(valid).Unix())
		if err := promtest.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
			t.Errorf("certificate valid %s: %v", valid, err)
		}
	}
}

//go:build cgo

package gpu

import (
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeCounters gives every mock device the energy counter and utilisation readings the
// dgxh200 mock lacks. energy is in mJ and advanced by the test.
type fakeCounters struct {
	mu     sync.Mutex
	energy map[string]uint64
	util   map[string]uint32
}

func newMockH200(t *testing.T) (*server.Server, *fakeCounters) {
	t.Helper()
	s := dgxh200.New()
	fc := &fakeCounters{energy: map[string]uint64{}, util: map[string]uint32{}}
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		uuid := dev.UUID
		fc.energy[uuid] = 1_000_000
		dev.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return fc.energy[uuid], nvml.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return nvml.Utilization{Gpu: fc.util[uuid], Memory: fc.util[uuid] / 2}, nvml.SUCCESS
		}
	}
	return s, fc
}

func TestInventoryFromMockH200(t *testing.T) {
	s, _ := newMockH200(t)
	n, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	inv, err := n.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if inv.CPUOnly || len(inv.GPUs) != 8 {
		t.Fatalf("inventory: cpu_only=%v, %d GPUs, want 8", inv.CPUOnly, len(inv.GPUs))
	}
	if inv.Driver != "550.54.15" {
		t.Errorf("driver %q", inv.Driver)
	}
	seen := map[string]bool{}
	for i, g := range inv.GPUs {
		if g.Index != i || !strings.HasPrefix(g.UUID, "GPU-") || seen[g.UUID] {
			t.Errorf("GPU %d: %+v (duplicate or malformed UUID)", i, g)
		}
		seen[g.UUID] = true
		if !strings.Contains(g.Name, "H200") {
			t.Errorf("GPU %d name %q, want an H200", i, g.Name)
		}
		if g.MemoryBytes < 140<<30 {
			t.Errorf("GPU %d memory %d bytes, want about 141 GB", i, g.MemoryBytes)
		}
	}
	if m := inv.Model([]string{inv.GPUs[0].UUID, inv.GPUs[1].UUID}); !strings.Contains(m, "H200") || strings.Contains(m, ",") {
		t.Errorf("model %q", m)
	}
}

func TestNilSourceIsCPUOnly(t *testing.T) {
	var n *NVML
	inv, err := n.Inventory()
	if err != nil || !inv.CPUOnly || len(inv.GPUs) != 0 {
		t.Fatalf("nil source: %+v, %v", inv, err)
	}
	m := StartMeter(nil, []string{"GPU-x"})
	m.Poll()
	if tel := m.Finish(); tel.EnergyJoules != 0 || tel.Samples != 0 {
		t.Fatalf("nil source telemetry %+v", tel)
	}
}

type failingInit struct{ nvml.Interface }

func (failingInit) Init() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }

func TestOpenWithoutLibrary(t *testing.T) {
	if _, err := Open(failingInit{}); err != ErrNoNVML {
		t.Fatalf("Open without library: %v, want ErrNoNVML", err)
	}
}

func TestMeterEnergyAndUtilisation(t *testing.T) {
	s, fc := newMockH200(t)
	n, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := n.Inventory()
	a, b := inv.GPUs[2].UUID, inv.GPUs[5].UUID
	m := StartMeter(n, []string{a, b})

	fc.mu.Lock()
	fc.util[a], fc.util[b] = 80, 40
	fc.mu.Unlock()
	m.Poll()
	fc.mu.Lock()
	fc.util[a], fc.util[b] = 100, 20
	fc.energy[a] += 250_000                  // 250 J
	fc.energy[b] += 1_500                    // 1.5 J
	fc.energy[inv.GPUs[0].UUID] += 9_999_999 // not this run's GPU
	fc.mu.Unlock()
	m.Poll()

	tel := m.Finish()
	if tel.EnergyJoules != 251.5 {
		t.Errorf("energy %v J, want 251.5", tel.EnergyJoules)
	}
	if tel.Samples != 4 || tel.UtilMeanPercent != 60 || tel.UtilMaxPercent != 100 {
		t.Errorf("utilisation: samples %d mean %v max %d, want 4, 60, 100", tel.Samples, tel.UtilMeanPercent, tel.UtilMaxPercent)
	}
	if m.Last != 60 {
		t.Errorf("last poll mean %v, want 60", m.Last)
	}

	// A restart: the persisted telemetry resumes, and the counter delta still spans the run.
	r := ResumeMeter(n, []string{a, b}, tel)
	fc.mu.Lock()
	fc.energy[a] += 1_000
	fc.util[a], fc.util[b] = 60, 60
	fc.mu.Unlock()
	r.Poll()
	tel2 := r.Finish()
	if tel2.EnergyJoules != 252.5 || tel2.Samples != 6 || tel2.UtilMeanPercent != 60 {
		t.Errorf("resumed: %+v", tel2)
	}
}

func TestEnergyCounterReset(t *testing.T) {
	s, fc := newMockH200(t)
	n, _ := Open(s)
	inv, _ := n.Inventory()
	a := inv.GPUs[0].UUID
	m := StartMeter(n, []string{a})
	fc.mu.Lock()
	fc.energy[a] = 10 // driver reloaded: counter restarted
	fc.mu.Unlock()
	if tel := m.Finish(); tel.EnergyJoules != 0 {
		t.Fatalf("energy after counter reset %v, want 0", tel.EnergyJoules)
	}
}

func TestAllocate(t *testing.T) {
	inv := Inventory{GPUs: []Info{{Index: 1, UUID: "B"}, {Index: 0, UUID: "A"}, {Index: 2, UUID: "C"}, {Index: 3, UUID: "D"}}}
	tests := []struct {
		name    string
		allowed []string
		busy    []string
		n       int
		want    string
		err     string
	}{
		{name: "none needed", n: 0, want: ""},
		{name: "lowest index first", n: 2, want: "A,B"},
		{name: "skips busy", busy: []string{"A", "C"}, n: 2, want: "B,D"},
		{name: "lab allow-list", allowed: []string{"C", "D"}, n: 1, want: "C"},
		{name: "not enough free", busy: []string{"A", "B", "C"}, n: 2, err: "1 of this node's 4 are free"},
		{name: "allow-list matches nothing", allowed: []string{"Z"}, n: 1, err: "has none it may use"},
		{name: "cpu only", n: 1, allowed: nil, busy: []string{"A", "B", "C", "D"}, err: "0 of this node's 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy := map[string]bool{}
			for _, b := range tt.busy {
				busy[b] = true
			}
			got, err := Allocate(inv, tt.allowed, busy, tt.n)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != tt.want {
				t.Fatalf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
	if _, err := Allocate(Inventory{CPUOnly: true}, nil, nil, 1); err == nil || !strings.Contains(err.Error(), "CPU-only") {
		t.Fatalf("CPU-only allocate: %v", err)
	}
}

func TestHashUUID(t *testing.T) {
	h := HashUUID("GPU-1")
	if len(h) != 64 || h == HashUUID("GPU-2") || h != HashUUID("GPU-1") {
		t.Fatalf("hash %s", h)
	}
}

package node

import (
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/clock"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/syncer"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner/gpu"
)

// Metrics: the node's own Prometheus registry (never the global one), served on the
// dashboard's /metrics. Every name has the evalmesh_ prefix; no label value is a peer ID,
// a CID or another unbounded identifier (topic kinds, outcomes, reasons, GPU indices only),
// so a scrape stays small however large the network grows. docs/api.md lists them.
//
// Counters are updated where the events happen (hooks in the mesh, the syncer and fetch);
// state (heads, store sizes, GPUs) is read at scrape time by nodeStateCollector.

type nodeMetrics struct {
	runs          *prometheus.CounterVec
	claims        *prometheus.CounterVec
	syncSessions  *prometheus.CounterVec
	syncRounds    prometheus.Counter
	syncBytes     *prometheus.CounterVec
	transferBytes prometheus.Counter
	spotChecks    *prometheus.CounterVec
	ledgerSeconds prometheus.Histogram
	runGPUSeconds prometheus.Counter
	runEnergy     prometheus.Counter
	// claimingStopped is 1 once the node stopped claiming for failures of its own
	// (node/mesh/health.go); stoppedWhy says why (a string), for LedgerStatus and doctor.
	claimingStopped prometheus.Gauge
	stoppedWhy      atomic.Value

	regOnce sync.Once
	reg     *prometheus.Registry
}

func newNodeMetrics() *nodeMetrics {
	return &nodeMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evalmesh_runs_total",
			Help: "Runs this node ended, by outcome (valid, agent_failed, infra_failed, awaiting_key, given_up, aborted)."}, []string{"outcome"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evalmesh_claims_total",
			Help: "Claim messages sent and received, by direction and kind (claim, renew, release)."}, []string{"direction", "kind"}),
		syncSessions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evalmesh_sync_sessions_total",
			Help: "Anti-entropy sessions this node started, by result (ok, error)."}, []string{"result"}),
		syncRounds: prometheus.NewCounter(prometheus.CounterOpts{Name: "evalmesh_sync_rounds_total",
			Help: "Reconciliation round trips of the sessions this node started."}),
		syncBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evalmesh_sync_bytes_total",
			Help: "Bytes of the sessions this node started, by direction (sent, received)."}, []string{"direction"}),
		transferBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "evalmesh_transfer_bytes_total",
			Help: "Bundle and object bytes fetched from peers (streaming transfer or bitswap)."}),
		spotChecks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evalmesh_holdings_spotcheck_total",
			Help: "Spot checks of other labs' holdings claims (a random root-to-leaf path of a claimed object, asked of the claiming node alone), by result (pass, fail)."}, []string{"result"}),
		ledgerSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "evalmesh_ledger_recompute_seconds",
			Help: "Time to recompute the ledger from the store.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		runGPUSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "evalmesh_run_gpu_seconds_total",
			Help: "GPU-seconds of the runs this node signed."}),
		runEnergy: prometheus.NewCounter(prometheus.CounterOpts{Name: "evalmesh_run_energy_joules_total",
			Help: "Energy of the runs this node signed, from the GPUs' counters."}),
		claimingStopped: prometheus.NewGauge(prometheus.GaugeOpts{Name: "evalmesh_claiming_stopped",
			Help: "1 when this node stopped claiming because its own runs kept failing on its side (the log's WARN line says why); 0 otherwise."}),
	}
}

// runEnded counts a run of this node by how it ended. A run that produced a result counts
// as valid or agent_failed even when the claim machine had already let go of the slot
// (its own attestation finishes the slot first). A run whose attempt the node gave up to
// another (o is the coordinator's RunGivenUp: another node holds the attempt by the claim
// records; or the abort's reason is that another node's result finished the slot) is
// "given_up", not a failure of this node's; one cut short otherwise (hard limit, campaign
// deadline, shutdown) is "aborted".
func (nm *nodeMetrics) runEnded(o protocol.RunOutcome, aborted bool, abortReason string) {
	outcome := "infra_failed"
	switch {
	case o.Kind == protocol.RunValid:
		outcome = "valid"
	case o.Kind == protocol.RunAgentFailed:
		outcome = "agent_failed"
	case o.Kind == protocol.RunAwaitingKey:
		outcome = "awaiting_key"
	case o.Kind == protocol.RunGivenUp, aborted && abortReason == protocol.AbortFinishedElsewhere:
		outcome = "given_up"
	case aborted:
		outcome = "aborted"
	}
	nm.runs.WithLabelValues(outcome).Inc()
}

// claim counts a claim message; a kind the protocol does not define counts as "other", so
// no peer can grow the label set.
func (nm *nodeMetrics) claim(direction, kind string) {
	switch kind {
	case protocol.ClaimKindClaim, protocol.ClaimKindRenew, protocol.ClaimKindRelease:
	default:
		kind = "other"
	}
	nm.claims.WithLabelValues(direction, kind).Inc()
}

// signed adds a run this node signed to the GPU and energy totals.
func (nm *nodeMetrics) signed(p attest.RunPredicate) {
	nm.runGPUSeconds.Add(p.GPUSeconds)
	nm.runEnergy.Add(p.EnergyJoules)
}

// syncSession counts one session this node started (Syncer.SyncWith).
func (nm *nodeMetrics) syncSession(stats []syncer.Stats, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	nm.syncSessions.WithLabelValues(result).Inc()
	for _, s := range stats {
		nm.syncRounds.Add(float64(s.Rounds))
		nm.syncBytes.WithLabelValues("sent").Add(float64(s.BytesSent))
		nm.syncBytes.WithLabelValues("received").Add(float64(s.BytesRecv))
	}
}

// Metrics returns the node's Prometheus registry: Go runtime, process and build-info
// collectors, the node's counters, gossip verdicts (PubSub.Collector) and its state.
func (n *Node) Metrics() *prometheus.Registry {
	nm := n.metrics
	nm.regOnce.Do(func() {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			collectors.NewBuildInfoCollector(),
			nm.runs, nm.claims, nm.syncSessions, nm.syncRounds, nm.syncBytes, nm.transferBytes, nm.spotChecks, nm.ledgerSeconds,
			nm.runGPUSeconds, nm.runEnergy, nm.claimingStopped, nodeStateCollector{n}, n.pins.Collector())
		nm.reg = reg
	})
	return nm.reg
}

var (
	headsDesc = prometheus.NewDesc("evalmesh_heads", "Peers' last heads, by whether they agree with ours (agree, disagree: another root or set under our network document, other_document, no_root, stale: older than the staleness bound).", []string{"state"}, nil)
	peersDesc = prometheus.NewDesc("evalmesh_peers", "Peers connected now.", nil, nil)
	knownDesc = prometheus.NewDesc("evalmesh_known_peers", "Peers this node re-dials while not connected (HOME/peers.json and bootstrap).", nil, nil)
	headAge   = prometheus.NewDesc("evalmesh_head_age_seconds", "Seconds since the last head heard from the connected peer heard from longest ago (absent when no connected peer has sent one).", nil, nil)
	clockOff  = prometheus.NewDesc("evalmesh_clock_offset_seconds", "The largest clock offset of a peer against ours (its clock minus ours, signed), measured on fresh heads that carry the sender's time; includes the heads' one-way delay (good to about a second). Absent when no such head was heard.", nil, nil)
	storeDesc = prometheus.NewDesc("evalmesh_store_envelopes", "Envelopes in the verified store, by set and status (accepted, refused).", []string{"set", "status"}, nil)
	gpuUtil   = prometheus.NewDesc("evalmesh_gpu_utilization_ratio", "GPU utilisation (0-1) sampled at scrape, by the GPU's index on this machine.", []string{"gpu"}, nil)
	gpuEnergy = prometheus.NewDesc("evalmesh_gpu_energy_joules_total", "The GPU's energy counter since its driver loaded, by index.", []string{"gpu"}, nil)
	gpuMemory = prometheus.NewDesc("evalmesh_gpu_memory_used_bytes", "GPU memory in use, by index.", []string{"gpu"}, nil)
	certDesc  = prometheus.NewDesc("evalmesh_certificate_expiry_timestamp_seconds", "When the node certificate in HOME/node-cert.json stops being valid (not_after), in Unix seconds, read at scrape time (absent without a readable certificate).", nil, nil)
)

// nodeStateCollector reads what is state, not events, at scrape time: heads agreement,
// store sizes, gossip counters and GPU readings. It is unchecked (Describe sends nothing):
// the gossip and GPU series exist only on a node in a network or with GPUs.
type nodeStateCollector struct{ n *Node }

func (nodeStateCollector) Describe(chan<- *prometheus.Desc) {}

func (c nodeStateCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	st := n.LedgerStatus()
	counts := map[string]int{"agree": 0, "disagree": 0, "other_document": 0, "no_root": 0, "stale": 0}
	for _, p := range st.Peers {
		switch {
		case p.Agrees:
			counts["agree"]++
		case p.Status == protocol.StatusStale:
			counts["stale"]++
		case p.Status == protocol.StatusOtherDocument:
			counts["other_document"]++
		case p.Status == protocol.StatusNoRoot:
			counts["no_root"]++
		default:
			counts["disagree"]++
		}
	}
	for state, k := range counts {
		ch <- prometheus.MustNewConstMetric(headsDesc, prometheus.GaugeValue, float64(k), state)
	}
	connected := n.Peers()
	ch <- prometheus.MustNewConstMetric(peersDesc, prometheus.GaugeValue, float64(len(connected)))
	ch <- prometheus.MustNewConstMetric(knownDesc, prometheus.GaugeValue, float64(len(n.KnownPeers())))
	collectCertExpiry(n.home, ch)
	oldest, heard := 0.0, false
	for _, p := range connected {
		if p.HeadAgeSeconds != nil {
			oldest, heard = max(oldest, *p.HeadAgeSeconds), true
		}
	}
	if heard {
		ch <- prometheus.MustNewConstMetric(headAge, prometheus.GaugeValue, oldest)
	}
	if worst, _ := protocol.LargestClockOffset(st.Peers); worst != nil {
		ch <- prometheus.MustNewConstMetric(clockOff, prometheus.GaugeValue, *worst.ClockOffsetSeconds)
	}
	if s := n.vstore; s != nil {
		for _, set := range []*vstore.Set{s.Attestations(), s.Campaigns()} {
			ch <- prometheus.MustNewConstMetric(storeDesc, prometheus.GaugeValue, float64(set.Len()), string(set.Name()), "accepted")
			ch <- prometheus.MustNewConstMetric(storeDesc, prometheus.GaugeValue, float64(set.RefusedLen()), string(set.Name()), "refused")
		}
	}
	m := n.Mesh()
	if m == nil {
		return
	}
	if ps := n.gossipsub(); ps != nil {
		ps.Collector().Collect(ch)
	}
	if r := m.Runner(); r != nil && r.GPUs != nil {
		collectGPUs(r.GPUs, n.opts.Clock, ch)
	}
}

// collectCertExpiry reports the certificate on disk, not the one the node started with: a
// renewal copied into the home shows at the next scrape, and an alert on
// evalmesh_certificate_expiry_timestamp_seconds - time() fires before either lapses.
func collectCertExpiry(h home.Home, ch chan<- prometheus.Metric) {
	raw, err := os.ReadFile(h.CertPath())
	if err != nil {
		return
	}
	c, err := attest.ParseNodeCert(raw)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(certDesc, prometheus.GaugeValue, float64(c.NotAfter.Unix()))
}

// gpuSampleTimeout bounds one scrape's GPU readings.
const gpuSampleTimeout = 2 * time.Second

// collectGPUs reads each GPU's utilisation, memory and energy counter, until
// gpuSampleTimeout has passed on clk. GPUs are labelled by index, never by UUID (an
// inventory identifier labs do not publish).
func collectGPUs(src gpu.Source, clk clock.Clock, ch chan<- prometheus.Metric) {
	inv, err := src.Inventory()
	if err != nil || inv.CPUOnly {
		return
	}
	deadline := clk.Now().Add(gpuSampleTimeout)
	for _, g := range inv.GPUs {
		if clk.Now().After(deadline) {
			return
		}
		idx := strconv.Itoa(g.Index)
		if s, err := src.Sample(g.UUID); err == nil {
			ch <- prometheus.MustNewConstMetric(gpuUtil, prometheus.GaugeValue, float64(s.GPUPercent)/100, idx)
			ch <- prometheus.MustNewConstMetric(gpuMemory, prometheus.GaugeValue, float64(s.UsedBytes), idx)
		}
		if mj, err := src.EnergyMilliJoules(g.UUID); err == nil {
			ch <- prometheus.MustNewConstMetric(gpuEnergy, prometheus.CounterValue, float64(mj)/1000, idx)
		}
	}
}

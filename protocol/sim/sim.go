// Package sim runs many nodes of the real coordinator (protocol.Coordinator, which wraps the
// claim state machine, as each daemon's loop drives it) in
// virtual time, over a network that loses, delays, duplicates and partitions messages, with
// nodes that crash and restart, and reports what happened: whether every slot finished, how
// much work was duplicated, the protocol's own claim→start latency, message counts and
// re-scoring. Labs use it to choose lease, heartbeat and settle settings before running a
// daemon (`evalmesh sim`).
//
// Everything is driven by one event queue and one seeded RNG (math/rand/v2 PCG): the same
// Config gives the same Result, bit for bit. Run is single-threaded and does no I/O; separate
// Runs may proceed concurrently.
package sim

import (
	"bytes"
	"container/heap"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
)

// Config is one simulated network and campaign. Zero fields take the defaults of Defaults.
type Config struct {
	Nodes    int // nodes in the network
	Labs     int // labs; nodes are dealt to labs round-robin
	Slots    int // slots of the one campaign
	Capacity int // runs each node can hold at once (its GPUs)

	Loss    float64       // probability that one delivery of a message to one node is lost
	Dup     float64       // probability that a delivered message is delivered twice
	DelayLo time.Duration // one-way delay: DelayLo + (DelayHi-DelayLo)·u³, u uniform
	DelayHi time.Duration

	PartitionFrac float64       // fraction of nodes cut off from the rest ...
	PartitionFor  time.Duration // ... for this long (0: no partition) ...
	PartitionAt   time.Duration // ... starting here (0: a quarter of the expected makespan)

	Crashes   int           // nodes that crash once each, at random times, losing their runs
	CrashDown time.Duration // how long a crashed node stays down before restarting

	RunMin, RunMax time.Duration // run lengths, uniform in [RunMin, RunMax]
	AgentFail      float64       // probability a run ends as an agent failure (a valid result)
	InfraFail      float64       // probability a run ends as an infrastructure failure (retried)
	Hang           float64       // probability a run hangs until the hard limit aborts it
	Grace          time.Duration // hard limit = RunMax + Grace

	Lease, Heartbeat, Settle time.Duration // the claim machine's knobs (protocol.ClaimConfig)
	MaxInfraAttempts         int
	// DeadAfter is protocol.ClaimConfig.DeadAfter (0: its default; negative: off).
	// AliveEvery is how often each node is heard by the others apart from claim messages
	// (the daemon's heads: every 5 s; each copy lost as a message is); negative: never, so
	// only claim messages tell a node alive.
	DeadAfter, AliveEvery time.Duration

	Replication    int           // labs that must re-score each run
	RescoreTimeout time.Duration // silence after which the next lab steps in
	RescoreTime    time.Duration // how long a re-score takes
	SilentLabs     int           // labs that never re-score (the first ones)

	// Sealed is the fraction of the campaign's ten tasks that are sealed bundles; the nodes
	// of the last KeylessLabs labs hold no key to them, so their runs of those slots end
	// awaiting a key (no grant comes in the simulation) and they leave them to key holders
	// for KeyHolderHeadStart (0: the lease) first (docs/protocol-claims.md rule 11).
	Sealed             float64
	KeylessLabs        int
	KeyHolderHeadStart time.Duration

	// DishonestLabs: the last labs cheat as well as run their share (docs/design.md §9). The
	// first node of each forges, for every slot at a random time, infra releases of every
	// attempt up to MaxInfraAttempts, which it never held; and, on hearing another lab's node
	// renew a run, publishes a fabricated result of that slot at once. Their other nodes run
	// honestly. Results report what the fabrications cost the honest nodes.
	DishonestLabs int

	// ClaimRecords: the network requires signed claim records (ledger.claims "required",
	// as `evalmesh network create` writes; docs/design.md §9 "Pre-emption"). A node signs a
	// record of each attempt it starts before its run starts; records are gossiped and
	// reconciled like attestations. The holder of an attempt is the record of least
	// attest.ClaimRank, as each node's coordinator computes it from the records it holds
	// (protocol.Coordinator.ClaimRecord, AttemptHolder): a node that hears a better-ranked
	// record of the attempt it runs gives the run up (CoordActions.GiveUp), a result
	// finishes its slot on a node only once that node's records name its runner the holder,
	// and the ledger (Result) counts a slot's honest result only from the holder of its
	// attempt by every record signed. The dishonest labs' forger then also signs, for each
	// attempt it hears another lab's node renew, either a claim record of that attempt
	// (which it never runs: it wins those its draw outranks) or a result of a slot it never
	// claimed, at random.
	ClaimRecords bool

	// ReconEvery is the anti-entropy period: an attestation lost in gossip reaches a node
	// at the next reconciliation with a connected node that has it.
	ReconEvery time.Duration

	Seed uint64
}

// Defaults is the configuration of `evalmesh sim` without flags.
var Defaults = Config{
	Nodes: 20, Labs: 5, Slots: 2000, Capacity: 2,
	Loss: 0.05, Dup: 0.01, DelayLo: 5 * time.Millisecond, DelayHi: 120 * time.Millisecond,
	PartitionFrac: 0.3, PartitionFor: 10 * time.Minute,
	Crashes: 2, CrashDown: 2 * time.Minute,
	RunMin: 2 * time.Minute, RunMax: 20 * time.Minute,
	AgentFail: 0.1, InfraFail: 0.01, Hang: 0.002, Grace: 10 * time.Minute,
	Lease: protocol.DefaultLease, Heartbeat: protocol.DefaultHeartbeat, Settle: protocol.DefaultSettle,
	MaxInfraAttempts: protocol.DefaultMaxInfraAttempts,
	AliveEvery:       30 * time.Second,
	Replication:      2, RescoreTimeout: 10 * time.Minute, RescoreTime: time.Minute,
	ReconEvery:   time.Minute,
	ClaimRecords: true,
	Seed:         1,
}

// WithDefaults fills the zero fields of c from Defaults. Loss, Dup, fractions, Crashes,
// SilentLabs and the partition keep their zero values (zero is meaningful for them) only
// when set explicitly through the CLI; here a zero is a zero, and so is a false
// ClaimRecords.
func (c Config) WithDefaults() Config {
	d := Defaults
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	set(&c.Nodes, d.Nodes)
	set(&c.Labs, d.Labs)
	set(&c.Slots, d.Slots)
	set(&c.Capacity, d.Capacity)
	set(&c.MaxInfraAttempts, d.MaxInfraAttempts)
	set(&c.Replication, d.Replication)
	setD(&c.DelayLo, d.DelayLo)
	setD(&c.DelayHi, d.DelayHi)
	setD(&c.CrashDown, d.CrashDown)
	setD(&c.RunMin, d.RunMin)
	setD(&c.RunMax, d.RunMax)
	setD(&c.Grace, d.Grace)
	setD(&c.Lease, d.Lease)
	setD(&c.Settle, d.Settle)
	setD(&c.AliveEvery, d.AliveEvery)
	setD(&c.RescoreTimeout, d.RescoreTimeout)
	setD(&c.RescoreTime, d.RescoreTime)
	setD(&c.ReconEvery, d.ReconEvery)
	if c.Heartbeat == 0 {
		c.Heartbeat = c.Lease / 3
	}
	c.Labs = min(c.Labs, c.Nodes)
	c.RunMax = max(c.RunMax, c.RunMin)
	c.DelayHi = max(c.DelayHi, c.DelayLo)
	return c
}

// Check says what is wrong with a configuration, naming the field.
func (c Config) Check() error {
	switch {
	case c.Nodes < 1, c.Labs < 1, c.Slots < 1, c.Capacity < 1:
		return fmt.Errorf("nodes (%d), labs (%d), slots (%d) and capacity (%d) must be at least 1", c.Nodes, c.Labs, c.Slots, c.Capacity)
	case !(c.Loss >= 0 && c.Loss < 1), !(c.Dup >= 0 && c.Dup < 1): // NaN too
		return fmt.Errorf("loss (%g) and dup (%g) must be in [0, 1)", c.Loss, c.Dup)
	case !(c.PartitionFrac >= 0 && c.PartitionFrac < 1):
		return fmt.Errorf("partition fraction %g must be in [0, 1)", c.PartitionFrac)
	case c.Crashes < 0 || c.Crashes > c.Nodes:
		return fmt.Errorf("crashes %d must be between 0 and nodes (%d)", c.Crashes, c.Nodes)
	case !(c.AgentFail >= 0 && c.InfraFail >= 0 && c.Hang >= 0 && c.AgentFail+c.InfraFail+c.Hang < 1):
		return fmt.Errorf("agent-fail (%g) + infra-fail (%g) + hang (%g) must be in [0, 1)", c.AgentFail, c.InfraFail, c.Hang)
	case c.Heartbeat >= c.Lease:
		return fmt.Errorf("heartbeat %s must be shorter than the lease %s", c.Heartbeat, c.Lease)
	case c.SilentLabs < 0 || c.SilentLabs >= c.Labs:
		return fmt.Errorf("silent labs %d must be fewer than labs (%d)", c.SilentLabs, c.Labs)
	case !(c.Sealed >= 0 && c.Sealed <= 1):
		return fmt.Errorf("sealed fraction %g must be in [0, 1]", c.Sealed)
	case c.KeylessLabs < 0 || c.KeylessLabs > c.Labs:
		return fmt.Errorf("keyless labs %d must be between 0 and labs (%d)", c.KeylessLabs, c.Labs)
	case c.DishonestLabs < 0 || c.DishonestLabs >= c.Labs:
		return fmt.Errorf("dishonest labs %d must be fewer than labs (%d)", c.DishonestLabs, c.Labs)
	}
	return nil
}

// Latency is a distribution summary in milliseconds of virtual time.
type Latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Result is what happened. Field names are those of `evalmesh sim --json`.
type Result struct {
	Slots    int `json:"slots"`
	Finished int `json:"finished"` // slots with a run attestation (valid or agent-failed)
	// LostSlots never finished: attempts exhausted, or still open when the simulation ended.
	LostSlots   int `json:"lost_slots"`
	FailedSlots int `json:"failed_slots"` // of the lost: attempts exhausted by infra failures
	Runs        int `json:"runs"`         // runs started
	// DuplicateRuns counts runs started for a slot while another run of it had started and
	// not failed (retries after an infrastructure failure or a crash are not duplicates).
	// DuplicateRunsPartitioned counts those of them started while the network was
	// partitioned: the cut-off side cannot hear the others' renewals, so their leases lapse
	// there, a cost the partition's length sets rather than the protocol.
	DuplicateRuns            int `json:"duplicate_runs"`
	DuplicateRunsPartitioned int `json:"duplicate_runs_partitioned"`
	// ExtraResults counts results beyond the first for a slot (duplicates that finished).
	ExtraResults int `json:"extra_results"`
	// Equivocations counts pairs of results of one slot by one lab with one attempt number:
	// the ledger would drop both. Should be 0.
	Equivocations int `json:"equivocations"`
	InfraFailures int `json:"infra_failures"` // runs ended by infra failure, crash, hang or deadline
	// ClaimToStart is, for each run, the time from the moment its node had free capacity
	// while the slot was free (campaign known, lease lapsed, or released) to the run's start.
	ClaimToStart    Latency `json:"claim_to_start_ms"`
	MessagesPerSlot float64 `json:"messages_per_slot"` // claim-topic messages published / slots
	// Takeover is, for each slot a crashed node was running, the time from the crash until
	// the slot was free again on the node that claimed it next (its lease lapsed, or its
	// holder was taken for dead), in seconds: what a dead holder costs a campaign's tail.
	Takeover Latency `json:"takeover_s"`
	// AlivePerSlot: liveness messages (AliveEvery; the daemon's heads, which it sends
	// anyway) published / slots: not claim messages, not in MessagesPerSlot.
	AlivePerSlot      float64 `json:"alive_per_slot"`
	DeliveriesPerSlot float64 `json:"deliveries_per_slot"` // of those, deliveries to nodes / slots
	MessagesLost      int     `json:"messages_lost"`       // deliveries lost (loss, partition, node down)
	// RescoredOK counts finished slots whose counted run was re-scored by Replication
	// distinct labs other than its runner's.
	RescoredOK int `json:"rescored_ok"`
	// RescoreSelfOrShort counts counted runs re-scored by their own lab or by too few
	// distinct labs at the end: should be 0 when enough labs answer.
	RescoreSelfOrShort int `json:"rescore_self_or_short"`
	Crashes            int `json:"crashes"`
	// KeylessRuns counts runs of sealed slots started by nodes that hold no key: their
	// results wait for a grant (none comes here), so the GPU time is spent for nothing yet.
	KeylessRuns int `json:"keyless_runs"`
	// ForgedReleases and FabricatedResults count what the DishonestLabs sent;
	// AbortedByFabricated counts honest runs cut short by a fabricated result (the claim
	// rules allow none), and LostSlots counts slots that never got an honest result.
	ForgedReleases      int `json:"forged_releases"`
	FabricatedResults   int `json:"fabricated_results"`
	AbortedByFabricated int `json:"aborted_by_fabricated"`
	// With ClaimRecords: ClaimRecords counts the records signed (honest and not);
	// SquatClaims the dishonest forger's records of attempts another lab's node was
	// running, which it never runs; GivenUp the honest runs cut short because a
	// better-ranked record held their attempt, GivenUpToDishonest those of them given up to
	// a squat; HeldElsewhere the starts refused because, by the time its own record was
	// stored, the node held a better-ranked record of the attempt (no run started).
	ClaimRecords       int     `json:"claim_records,omitempty"`
	SquatClaims        int     `json:"squat_claims,omitempty"`
	GivenUp            int     `json:"given_up,omitempty"`
	GivenUpToDishonest int     `json:"given_up_to_dishonest,omitempty"`
	HeldElsewhere      int     `json:"held_elsewhere,omitempty"`
	VirtualSeconds     float64 `json:"virtual_seconds"` // until the last slot finished (or the run ended)
	Events             int     `json:"events"`
}

// Run simulates c and returns what happened.
func Run(c Config) Result {
	c = c.WithDefaults()
	w := newWorld(c)
	return w.run()
}

type evKind int

const (
	evDeliver  evKind = iota // claim message to node
	evFinished               // a run attestation reaches node
	evWake                   // node's machine asked for a tick
	evRunEnd
	evCrash
	evRestart
	evPartition
	evHeal
	evRecon
	evRescore // check which labs are due for run
	evRescoreDone
	evForge  // a dishonest node forges infra releases of slot
	evAlive  // node is heard by the others (the daemon's heads), apart from claims
	evRecord // a claim record (run: its index in world.recs) reaches node
)

type event struct {
	at    time.Duration
	seq   uint64
	kind  evKind
	node  int
	epoch int
	msg   *protocol.ClaimMessage
	slot  int
	run   int
	lab   int
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any     { o := *q; e := o[len(o)-1]; *q = o[:len(o)-1]; return e }

type run struct {
	slot, node, lab, attempt int
	start, end               time.Duration
	active                   bool
	result                   bool // ended valid or agent-failed
	failed                   bool // ended without a result
	fabricated               bool // a dishonest lab's "result" of a run that never happened
	id                       string
	rescoreDone              map[string]bool
	rescoreAsked             map[string]bool
}

type node struct {
	id     string
	lab    int
	m      *protocol.Coordinator
	up     bool
	epoch  int
	wakeAt time.Duration
	side   bool // in the partitioned minority
	known  []bool
	// missing attestations (run indices) and claim records (indices in world.recs) lost in
	// gossip, fetched at reconciliation
	missing, missingRecs []int
	// has: with ClaimRecords, the results (run indices) in its store, its own included. A
	// result finishes its slot here when the records held name its runner the attempt's
	// holder (protocol.Coordinator.finishesSlot). reg: the slots whose results its
	// coordinator holds as the daemon's does (protocol.Coordinator.Run), from the first
	// record of an attempt it has a result of on: the coordinator then decides what that
	// record and later ones do (finish the slot, or reopen it: ClaimMachine.SlotReopened).
	// Only those: Coordinator.Tick re-checks the re-score duty of every run it holds, which
	// the simulator models itself, and handing it every run made BenchmarkSim 11 times
	// slower.
	has     map[int]bool
	reg     map[int]bool
	runs    map[int]int // slot -> run index, active runs
	keyless bool        // its lab holds no key to the sealed tasks
	// forger: the node of a dishonest lab that forges releases and results; fabricated:
	// the slots it has published a result of; squatted: the slots it takes attempts of by
	// claim records (true) or fabricates a result of (false), chosen once per slot.
	forger     bool
	fabricated map[int]bool
	squatted   map[int]bool
	// awaiting: slots whose run here ended awaiting a key, to that run's attempt (HOME/runs
	// survives restarts)
	awaiting map[int]int
	// capacity accounting for claim→start: times at which capacity units became free,
	// oldest first, and the units held by pending claims.
	freeUnits []time.Duration
	pending   map[int]time.Duration // slot -> the time its unit became ready
	inherit   []time.Duration
}

type world struct {
	c           Config
	rng         *rand.Rand
	t0          time.Time
	now         time.Duration
	q           queue
	seq         uint64
	nodes       []*node
	labs        []string
	spec        protocol.CampaignSpec
	slotIdx     map[string]int
	runs        []*run
	slotRuns    [][]int
	finished    []bool
	nFinished   int
	lastFinish  time.Duration
	partitioned bool
	res         Result
	c2s         []float64
	published   int
	alive       int                   // liveness messages (evAlive) published
	crashedAt   map[int]time.Duration // slot -> when the node running it crashed
	takeover    []float64             // seconds from such a crash to the slot's being free
	delivered   int
	recs        []protocol.ClaimRecordHeard // every claim record signed (ClaimRecords)
	recNode     []int                       // the node that signed each
	slotRecs    map[int][]int               // slot -> indices in recs
}

func newWorld(c Config) *world {
	w := &world{c: c, rng: rand.New(rand.NewPCG(c.Seed, 0x65766d73696d)), // "evmsim"
		t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), slotIdx: map[string]int{}, crashedAt: map[int]time.Duration{}, slotRecs: map[int][]int{}}
	for l := range c.Labs {
		w.labs = append(w.labs, fmt.Sprintf("lab%02d", l))
	}
	hard := c.RunMax + c.Grace
	w.spec = protocol.CampaignSpec{ID: "campaign", Created: w.t0, Deadline: w.t0.Add(30 * 24 * time.Hour)}
	for s := range c.Slots {
		id := fmt.Sprintf("slot%06d", s)
		w.spec.Slots = append(w.spec.Slots, protocol.SlotSpec{ID: id, HardLimit: hard,
			Slot: attest.Slot{Campaign: w.spec.ID, Task: fmt.Sprintf("task%d", s%10), Agent: "agent", Seed: s}})
		w.slotIdx[id] = s
	}
	w.slotRuns = make([][]int, c.Slots)
	w.finished = make([]bool, c.Slots)
	for i := range c.Nodes {
		n := &node{id: fmt.Sprintf("node%03d", i), lab: i % c.Labs, up: true, known: make([]bool, c.Slots),
			runs: map[int]int{}, pending: map[int]time.Duration{}, awaiting: map[int]int{}, has: map[int]bool{}, reg: map[int]bool{}}
		n.keyless = n.lab >= c.Labs-c.KeylessLabs
		// Nodes are dealt to labs round-robin, so node i < Labs is its lab's first.
		n.forger = n.lab >= c.Labs-c.DishonestLabs && i < c.Labs
		n.fabricated, n.squatted = map[int]bool{}, map[int]bool{}
		w.nodes = append(w.nodes, n)
	}
	return w
}

func (w *world) push(e *event) {
	w.seq++
	e.seq = w.seq
	heap.Push(&w.q, e)
}

func (w *world) at(d time.Duration) time.Time { return w.t0.Add(d) }

// expected is the makespan if capacity were always busy.
func (w *world) expected() time.Duration {
	mean := (w.c.RunMin + w.c.RunMax) / 2
	return time.Duration(float64(mean) * float64(w.c.Slots) / float64(w.c.Nodes*w.c.Capacity))
}

func (w *world) run() Result {
	c := w.c
	for i := range w.nodes {
		w.startNode(i)
	}
	if c.PartitionFor > 0 && c.PartitionFrac > 0 {
		at := c.PartitionAt
		if at == 0 {
			at = w.expected() / 4
		}
		w.push(&event{at: at, kind: evPartition})
		w.push(&event{at: at + c.PartitionFor, kind: evHeal})
	}
	for _, i := range w.rng.Perm(c.Nodes)[:c.Crashes] {
		at := time.Duration(float64(w.expected()) * (0.1 + 0.6*w.rng.Float64()))
		w.push(&event{at: at, kind: evCrash, node: i})
	}
	w.push(&event{at: c.ReconEvery, kind: evRecon})
	for i, n := range w.nodes {
		if n.forger {
			for s := range c.Slots {
				w.push(&event{at: time.Duration(w.rng.Float64() * float64(w.expected())), kind: evForge, node: i, slot: s})
			}
		}
	}
	limit := w.spec.Deadline.Sub(w.t0)
	for w.q.Len() > 0 {
		e := heap.Pop(&w.q).(*event)
		if e.at > limit {
			break
		}
		w.now = e.at
		w.res.Events++
		w.handle(e)
	}
	return w.result()
}

func (w *world) startNode(i int) {
	n := w.nodes[i]
	// The runs waiting for a key survive a restart (HOME/runs), as a daemon reads them.
	awaiting := map[string]int{}
	if n.keyless && w.c.Sealed > 0 {
		for s, attempt := range n.awaiting {
			awaiting[w.spec.Slots[s].ID] = attempt
		}
	}
	n.m = protocol.NewCoordinator(protocol.CoordinatorConfig{Claims: protocol.ClaimConfig{
		Self: n.id, Lab: w.labs[n.lab], Cert: []byte(`{}`),
		Lease: w.c.Lease, Heartbeat: w.c.Heartbeat, Settle: w.c.Settle,
		MaxInfraAttempts: w.c.MaxInfraAttempts, KeyHolderHeadStart: w.c.KeyHolderHeadStart,
		DeadAfter: w.c.DeadAfter,
	}, Labs: w.labs, AwaitingKey: awaiting, RequireClaimRecords: w.c.ClaimRecords})
	if w.c.AliveEvery > 0 {
		w.push(&event{at: w.now + time.Duration(w.rng.Float64()*float64(w.c.AliveEvery)), kind: evAlive, node: i, epoch: n.epoch})
	}
	n.freeUnits = n.freeUnits[:0]
	for range w.c.Capacity {
		n.freeUnits = append(n.freeUnits, w.now)
	}
	clear(n.pending)
	n.inherit = n.inherit[:0]
	n.wakeAt = -1
	now := w.at(w.now)
	// The daemon's order: campaigns, then what its attestation store knows (it survives
	// restarts), then what reconciliation with a peer brings, and only then capacity, so a
	// restarted node does not claim what finished while it was down.
	w.apply(i, n.m.AddCampaign(protocol.CoordinatorCampaign{Spec: w.specFor(n), Lab: w.labs[0]}, now))
	for s, k := range n.known {
		if k {
			w.apply(i, n.m.SlotFinished(w.spec.Slots[s].ID, "", now)) // replayed from its store
		}
	}
	// The claim records: its store's and, by reconciliation, its peers'; a fresh
	// coordinator holds none. (Those of cut-off nodes come at a later reconciliation.)
	n.missingRecs = n.missingRecs[:0]
	for k := range w.recs {
		n.missingRecs = append(n.missingRecs, k)
	}
	clear(n.reg)
	stored := sortedKeys(n.has)
	w.reconcile(i)
	for _, idx := range stored {
		w.finishIfHeld(i, idx) // replayed from its store
	}
	w.apply(i, n.m.OpenCapacity(w.c.Capacity, now))
}

// sealed says whether slot s's task (task s mod 10) is a sealed bundle.
func (c Config) sealed(s int) bool {
	return float64(s%10) < math.Round(c.Sealed*10)
}

// specFor is the campaign as node n's daemon hands it to its coordinator: a keyless node
// marks the sealed slots NoKey (the coordinator marks those its runs wait on AwaitingKey).
func (w *world) specFor(n *node) protocol.CampaignSpec {
	if !n.keyless || w.c.Sealed == 0 {
		return w.spec
	}
	spec := w.spec
	spec.Slots = slices.Clone(w.spec.Slots)
	for s := range spec.Slots {
		spec.Slots[s].NoKey = w.c.sealed(s)
	}
	return spec
}

func (w *world) connected(a, b int) bool {
	return !w.partitioned || w.nodes[a].side == w.nodes[b].side
}

func (w *world) delay() time.Duration {
	u := w.rng.Float64()
	return w.c.DelayLo + time.Duration(float64(w.c.DelayHi-w.c.DelayLo)*u*u*u)
}

// apply carries out a node's actions.
func (w *world) apply(i int, a protocol.CoordActions) {
	n := w.nodes[i]
	// Pending claims the machine dropped without starting (yielded, finished elsewhere)
	// hand their unit's ready time to the node's next claim.
	if len(n.pending) > 0 {
		held := n.m.Held()
		for _, s := range sortedKeys(n.pending) {
			if _, ok := slices.BinarySearch(held, w.spec.Slots[s].ID); !ok {
				n.inherit = append(n.inherit, n.pending[s])
				delete(n.pending, s)
			}
		}
		slices.Sort(n.inherit)
	}
	// Aborts first: the capacity they free is what the claims in the same Actions use.
	for _, ab := range a.Abort {
		s := w.slotIdx[ab.SlotID]
		if r, ok := n.runs[s]; ok {
			if ab.Reason == protocol.AbortFinishedElsewhere && !w.honestResult(s) {
				w.res.AbortedByFabricated++
			}
			w.endRun(r, false, ab.Reason != protocol.AbortFinishedElsewhere)
		}
	}
	for _, g := range a.GiveUp {
		s := w.slotIdx[g.SlotID]
		if r, ok := n.runs[s]; ok && w.runs[r].attempt == g.Attempt {
			w.res.GivenUp++
			if h := n.m.AttemptHolder(g.SlotID, g.Attempt); h != "" && w.nodes[w.nodeIndex(h)].forger {
				w.res.GivenUpToDishonest++
			}
			// Cut short, as the daemon does; the attempt is the holder's, not a failure here.
			w.endRun(r, false, false)
			w.apply(i, n.m.RunEnded(g.SlotID, g.Attempt, protocol.RunOutcome{Kind: protocol.RunInfraFailed, Detail: g.Why}, w.at(w.now)))
		}
	}
	for k := range a.Publish {
		msg := a.Publish[k]
		s := w.slotIdx[msg.Slot]
		w.published++
		if msg.Kind == protocol.ClaimKindClaim {
			if _, ok := n.pending[s]; !ok {
				free := n.m.FreeSince(msg.Slot).Sub(w.t0)
				if t, ok := w.crashedAt[s]; ok && free >= t {
					// The first claim of a slot a crashed node held: it was free here from
					// its lapse on (whenever this node got round to it).
					w.takeover = append(w.takeover, (free - t).Seconds())
					delete(w.crashedAt, s)
				}
				n.pending[s] = max(w.takeUnit(n), free)
			}
		}
		for j := range w.nodes {
			if j == i {
				continue
			}
			copies := 1
			if w.rng.Float64() < w.c.Dup {
				copies = 2
			}
			for range copies {
				if w.rng.Float64() < w.c.Loss {
					w.res.MessagesLost++
					continue
				}
				w.push(&event{at: w.now + w.delay(), kind: evDeliver, node: j, epoch: w.nodes[j].epoch, msg: &msg})
			}
		}
	}
	for _, id := range a.Reannounce {
		s := w.slotIdx[id]
		if r := w.resultOf(s, i); r >= 0 {
			w.broadcastResult(r)
		}
	}
	for _, st := range a.Start {
		s := w.slotIdx[st.Slot.ID]
		if w.c.ClaimRecords && !w.signClaim(i, s, st.Attempt) {
			continue
		}
		w.startRun(i, s, st.Attempt)
	}
	if len(n.inherit) > 0 {
		// Not claimed again at once: the units are free, as of their ready times.
		n.freeUnits = append(n.freeUnits, n.inherit...)
		slices.Sort(n.freeUnits)
		n.inherit = n.inherit[:0]
	}
	if !a.Wake.IsZero() {
		at := a.Wake.Sub(w.t0)
		if at != n.wakeAt {
			n.wakeAt = at
			w.push(&event{at: at, kind: evWake, node: i, epoch: n.epoch})
		}
	}
}

// takeUnit is the ready time of the capacity unit a new claim uses: a unit handed on by a
// dropped claim first, else the oldest free unit.
func (w *world) takeUnit(n *node) time.Duration {
	if len(n.inherit) > 0 {
		t := n.inherit[0]
		n.inherit = n.inherit[1:]
		return t
	}
	if len(n.freeUnits) > 0 {
		t := n.freeUnits[0]
		n.freeUnits = n.freeUnits[1:]
		return t
	}
	return w.now
}

func (w *world) startRun(i, s, attempt int) {
	n := w.nodes[i]
	ready, ok := n.pending[s]
	if !ok {
		ready = w.now
	}
	delete(n.pending, s)
	w.c2s = append(w.c2s, float64(w.now-ready)/float64(time.Millisecond))

	for _, r := range w.slotRuns[s] {
		if o := w.runs[r]; o.active || (o.result && !o.fabricated) {
			w.res.DuplicateRuns++
			if w.partitioned {
				w.res.DuplicateRunsPartitioned++
			}
			break
		}
	}
	r := &run{slot: s, node: i, lab: n.lab, attempt: attempt, start: w.now, active: true,
		id: fmt.Sprintf("run/%s/%s/%d", w.spec.Slots[s].ID, n.id, attempt)}
	idx := len(w.runs)
	w.runs = append(w.runs, r)
	w.slotRuns[s] = append(w.slotRuns[s], idx)
	n.runs[s] = idx
	w.res.Runs++
	noKey := n.keyless && w.c.sealed(s)
	if noKey {
		w.res.KeylessRuns++
	}
	w.apply(i, n.m.RunStarted(w.spec.Slots[s].ID, w.at(w.now)))
	u := w.rng.Float64()
	switch {
	case u < w.c.Hang:
		return // never ends by itself: the hard limit aborts it
	case u < w.c.Hang+w.c.InfraFail:
		// Infra failures tend to come early (fetch, container start).
		d := time.Duration(w.rng.Float64() * float64(w.c.RunMin))
		w.push(&event{at: w.now + d, kind: evRunEnd, node: i, epoch: n.epoch, run: idx, slot: int(protocol.RunInfraFailed)})
	default:
		kind := protocol.RunValid
		switch {
		case noKey:
			kind = protocol.RunAwaitingKey
		case u < w.c.Hang+w.c.InfraFail+w.c.AgentFail:
			kind = protocol.RunAgentFailed
		}
		d := w.c.RunMin + time.Duration(w.rng.Float64()*float64(w.c.RunMax-w.c.RunMin))
		w.push(&event{at: w.now + d, kind: evRunEnd, node: i, epoch: n.epoch, run: idx, slot: int(kind)})
	}
}

// endRun records the end of an active run; a result is published as its attestation.
func (w *world) endRun(idx int, result, infra bool) {
	r := w.runs[idx]
	if !r.active {
		return
	}
	r.active, r.end = false, w.now
	r.result, r.failed = result, !result
	n := w.nodes[r.node]
	delete(n.runs, r.slot)
	n.freeUnits = append(n.freeUnits, w.now)
	if !result {
		if infra {
			w.res.InfraFailures++
		}
		return
	}
	if !w.c.ClaimRecords {
		n.known[r.slot] = true
	}
	if !w.finished[r.slot] {
		w.finished[r.slot] = true
		w.nFinished++
		w.lastFinish = w.now
	}
	w.broadcastResult(idx)
	r.rescoreDone, r.rescoreAsked = map[string]bool{}, map[string]bool{}
	w.push(&event{at: w.now, kind: evRescore, run: idx})
}

// broadcastResult gossips run idx's attestation from its node; a node that misses it gets
// it at the next reconciliation.
func (w *world) broadcastResult(idx int) {
	r := w.runs[idx]
	for j, n := range w.nodes {
		if j == r.node || n.known[r.slot] || n.has[idx] {
			continue
		}
		if w.rng.Float64() < w.c.Loss || !w.connected(r.node, j) || !n.up {
			if !slices.Contains(n.missing, idx) {
				n.missing = append(n.missing, idx)
			}
			continue
		}
		w.push(&event{at: w.now + w.delay(), kind: evFinished, node: j, epoch: n.epoch, run: idx})
	}
}

// resultOf is the run of slot s by node i that produced a result, or -1.
func (w *world) resultOf(s, i int) int {
	for _, idx := range w.slotRuns[s] {
		if r := w.runs[idx]; r.node == i && r.result {
			return idx
		}
	}
	return -1
}

// reconcile gives node j every attestation it missed that a connected node has.
func (w *world) reconcile(j int) {
	n := w.nodes[j]
	keep := n.missing[:0]
	for _, idx := range n.missing {
		if w.connected(w.runs[idx].node, j) {
			w.learn(j, idx)
		} else {
			keep = append(keep, idx)
		}
	}
	n.missing = keep
	keepRecs := n.missingRecs[:0]
	for _, k := range n.missingRecs {
		if w.connected(w.recNode[k], j) {
			w.hearRecord(j, k)
		} else {
			keepRecs = append(keepRecs, k)
		}
	}
	n.missingRecs = keepRecs
}

func (w *world) learn(j, idx int) {
	n := w.nodes[j]
	r := w.runs[idx]
	s := r.slot
	if w.c.ClaimRecords {
		if !n.has[idx] {
			n.has[idx] = true
			w.finishIfHeld(j, idx)
		}
		return
	}
	if n.known[s] {
		return
	}
	n.known[s] = true
	w.apply(j, n.m.SlotFinished(w.spec.Slots[s].ID, w.nodes[r.node].id, w.at(w.now)))
}

// finishIfHeld hands result idx, in node j's store, to its coordinator: as a run where it
// holds the slot's results, else as finishing the slot where the records held name its
// runner the attempt's holder.
func (w *world) finishIfHeld(j, idx int) {
	n := w.nodes[j]
	r := w.runs[idx]
	sid, by := w.spec.Slots[r.slot].ID, w.nodes[r.node].id
	switch {
	case n.reg[r.slot]:
		w.apply(j, n.m.Run(w.runHeard(idx), w.at(w.now)))
	case n.m.AttemptHolder(sid, r.attempt) == by:
		w.apply(j, n.m.SlotFinished(sid, by, w.at(w.now)))
	}
}

// runHeard is run idx's attestation as a daemon hands it to its coordinator.
func (w *world) runHeard(idx int) protocol.RunHeard {
	r := w.runs[idx]
	sl := w.spec.Slots[r.slot]
	return protocol.RunHeard{ID: r.id, Node: w.nodes[r.node].id, Lab: w.labs[r.lab], SlotID: sl.ID, Slot: sl.Slot,
		Attempt: r.attempt, Metric: "accuracy", Valid: true}
}

// signClaim is node i's claim record of slot s's attempt, signed and stored before its run
// starts, then gossiped; it reports whether the run may start: the daemon refuses to start
// one whose attempt its coordinator already gives to a better-ranked record
// (node/mesh/claimrec.go), an infrastructure failure that costs no run.
func (w *world) signClaim(i, s, attempt int) bool {
	n := w.nodes[i]
	w.addRecord(i, s, attempt)
	sid := w.spec.Slots[s].ID
	if h := n.m.AttemptHolder(sid, attempt); h == n.id {
		return true
	}
	w.res.HeldElsewhere++
	// Like a yielded claim, the capacity unit keeps the time it became ready.
	ready, ok := n.pending[s]
	if !ok {
		ready = w.now
	}
	delete(n.pending, s)
	n.freeUnits = append(n.freeUnits, ready)
	slices.Sort(n.freeUnits)
	now := w.at(w.now)
	w.apply(i, n.m.RunStarted(sid, now))
	w.apply(i, n.m.RunEnded(sid, attempt, protocol.RunOutcome{Kind: protocol.RunInfraFailed, Detail: "held elsewhere by the claim records"}, now))
	return false
}

// addRecord signs node i's claim record of slot s's attempt, hands it to its own
// coordinator and gossips it.
func (w *world) addRecord(i, s, attempt int) {
	n := w.nodes[i]
	sl := w.spec.Slots[s]
	lab := w.labs[n.lab]
	rec := protocol.ClaimRecordHeard{ID: fmt.Sprintf("claim/%s/%s/%d", sl.ID, n.id, attempt), SlotID: sl.ID, Campaign: w.spec.ID,
		Attempt: attempt, Node: n.id, Lab: lab, Rank: attest.RankOf(sl.Slot, attempt, lab, n.id)}
	k := len(w.recs)
	w.recs, w.recNode = append(w.recs, rec), append(w.recNode, i)
	w.slotRecs[s] = append(w.slotRecs[s], k)
	w.res.ClaimRecords++
	w.hearRecord(i, k)
	for j, o := range w.nodes {
		if j == i {
			continue
		}
		if w.rng.Float64() < w.c.Loss || !w.connected(i, j) || !o.up {
			o.missingRecs = append(o.missingRecs, k)
			continue
		}
		w.push(&event{at: w.now + w.delay(), kind: evRecord, node: j, epoch: o.epoch, run: k})
	}
}

// hearRecord hands claim record k to node j's coordinator, and first the results of its
// slot in j's store where one is of its attempt (reg).
func (w *world) hearRecord(j, k int) {
	n := w.nodes[j]
	rec := w.recs[k]
	s := w.slotIdx[rec.SlotID]
	if !n.reg[s] && slices.ContainsFunc(w.slotRuns[s], func(idx int) bool { return n.has[idx] && w.runs[idx].attempt == rec.Attempt }) {
		n.reg[s] = true
		for _, idx := range w.slotRuns[s] {
			if n.has[idx] {
				w.apply(j, n.m.Run(w.runHeard(idx), w.at(w.now)))
			}
		}
	}
	w.apply(j, n.m.ClaimRecord(rec, w.at(w.now)))
}

func (w *world) handle(e *event) {
	now := w.at(w.now)
	switch e.kind {
	case evDeliver:
		n := w.nodes[e.node]
		from := w.nodeIndex(e.msg.PeerID)
		if !n.up || e.epoch != n.epoch || !w.connected(from, e.node) {
			w.res.MessagesLost++
			return
		}
		w.delivered++
		w.apply(e.node, n.m.Claim(e.msg, now))
		if s := w.slotIdx[e.msg.Slot]; n.forger && e.msg.Kind == protocol.ClaimKindRenew && w.nodes[from].lab != n.lab && !w.finished[s] {
			w.cheat(e.node, s, e.msg.Attempt)
		}
	case evRecord:
		n := w.nodes[e.node]
		if !n.up || e.epoch != n.epoch {
			n.missingRecs = append(n.missingRecs, e.run)
			return
		}
		w.hearRecord(e.node, e.run)
	case evFinished:
		n := w.nodes[e.node]
		if !n.up || e.epoch != n.epoch {
			n.missing = append(n.missing, e.run)
			return
		}
		w.learn(e.node, e.run)
	case evWake:
		n := w.nodes[e.node]
		if !n.up || e.epoch != n.epoch || e.at != n.wakeAt {
			return
		}
		n.wakeAt = -1
		w.apply(e.node, n.m.Tick(now))
	case evRunEnd:
		n := w.nodes[e.node]
		r := w.runs[e.run]
		if !n.up || e.epoch != n.epoch || !r.active {
			return
		}
		kind := protocol.RunOutcomeKind(e.slot)
		if kind == protocol.RunAwaitingKey {
			n.awaiting[r.slot] = r.attempt
		}
		w.endRun(e.run, kind == protocol.RunValid || kind == protocol.RunAgentFailed, kind == protocol.RunInfraFailed)
		w.apply(e.node, n.m.RunEnded(w.spec.Slots[r.slot].ID, r.attempt, protocol.RunOutcome{Kind: kind}, now))
		if r.result {
			w.learn(e.node, e.run) // its attestation enters its own store too
		}
	case evAlive:
		n := w.nodes[e.node]
		if !n.up || e.epoch != n.epoch {
			return
		}
		w.alive++
		for j, o := range w.nodes {
			if j != e.node && o.up && w.connected(e.node, j) && w.rng.Float64() >= w.c.Loss {
				o.m.PeerSeen(n.id, now)
			}
		}
		if w.nFinished < w.c.Slots {
			w.push(&event{at: w.now + w.c.AliveEvery, kind: evAlive, node: e.node, epoch: n.epoch})
		}
	case evCrash:
		n := w.nodes[e.node]
		w.res.Crashes++
		for s := range n.runs {
			w.crashedAt[s] = w.now
		}
		for _, idx := range sortedValues(n.runs) {
			w.runs[idx].active = false
			w.runs[idx].failed = true
			w.runs[idx].end = w.now
			w.res.InfraFailures++
		}
		clear(n.runs)
		n.up = false
		n.epoch++
		w.push(&event{at: w.now + w.c.CrashDown, kind: evRestart, node: e.node})
	case evRestart:
		n := w.nodes[e.node]
		n.up = true
		n.epoch++
		// A (re)started daemon reconciles its attestations with a peer before it claims
		// (docs/protocol-claims.md), so it does not claim what finished while it was down.
		w.startNode(e.node)
	case evPartition:
		w.partitioned = true
		k := int(math.Round(w.c.PartitionFrac * float64(w.c.Nodes)))
		for _, i := range w.rng.Perm(w.c.Nodes)[:k] {
			w.nodes[i].side = true
		}
	case evHeal:
		w.partitioned = false
	case evRecon:
		for j, n := range w.nodes {
			if n.up && len(n.missing)+len(n.missingRecs) > 0 {
				w.reconcile(j)
			}
		}
		if w.nFinished < w.c.Slots || w.anyMissing() {
			w.push(&event{at: w.now + w.c.ReconEvery, kind: evRecon})
		}
	case evRescore:
		r := w.runs[e.run]
		elapsed := w.now - r.end
		due := protocol.RescorersDue(r.id, w.labs[r.lab], w.labs, w.c.Replication, r.rescoreDone, elapsed, w.c.RescoreTimeout)
		for _, l := range due {
			if r.rescoreAsked[l] {
				continue
			}
			r.rescoreAsked[l] = true
			li := slices.Index(w.labs, l)
			if li < w.c.SilentLabs {
				continue // a silent lab: the next one steps in after the timeout
			}
			w.push(&event{at: w.now + w.c.RescoreTime, kind: evRescoreDone, run: e.run, lab: li})
		}
		if len(due) > 0 && len(r.rescoreAsked) < len(w.labs)-1 {
			w.push(&event{at: r.end + time.Duration(int64(elapsed/w.c.RescoreTimeout)+1)*w.c.RescoreTimeout, kind: evRescore, run: e.run})
		}
	case evRescoreDone:
		w.runs[e.run].rescoreDone[w.labs[e.lab]] = true
	case evForge:
		n := w.nodes[e.node]
		if !n.up {
			return
		}
		for attempt := 1; attempt <= w.c.MaxInfraAttempts; attempt++ {
			w.res.ForgedReleases++
			w.apply(e.node, protocol.CoordActions{Actions: protocol.Actions{Publish: []protocol.ClaimMessage{{V: protocol.Version, Kind: protocol.ClaimKindRelease,
				Campaign: w.spec.ID, Slot: w.spec.Slots[e.slot].ID, PeerID: n.id, Lab: w.labs[n.lab], Cert: []byte(`{}`),
				Lamport: 1, Attempt: attempt, Reason: protocol.ReleaseInfra}}}})
		}
	}
}

// cheat is what dishonest node i does on hearing another lab's node renew its run of slot
// s's attempt: without claim records, it publishes a fabricated result of the slot (once per
// slot); with them, each slot is drawn once to be either so fabricated (a result of a slot
// it never claimed) or squatted: a claim record of each attempt of it heard renewed, which
// it never runs nor releases (claims of attempts it does not hold, won where its draw
// outranks the runner's).
func (w *world) cheat(i, s, attempt int) {
	n := w.nodes[i]
	if w.c.ClaimRecords {
		squat, drawn := n.squatted[s]
		if !drawn {
			squat = w.rng.IntN(2) == 0
			n.squatted[s] = squat
		}
		if squat {
			if !slices.ContainsFunc(w.recsOf(s), func(k int) bool { return w.recNode[k] == i && w.recs[k].Attempt == attempt }) {
				w.res.SquatClaims++
				w.addRecord(i, s, attempt)
			}
			return
		}
	}
	if !n.fabricated[s] {
		n.fabricated[s] = true
		w.fabricate(i, s, attempt)
	}
}

// fabricate publishes, from dishonest node i, a "result" of slot s under attempt: a run that
// never happened, gossiped like any result.
func (w *world) fabricate(i, s, attempt int) {
	n := w.nodes[i]
	r := &run{slot: s, node: i, lab: n.lab, attempt: attempt, start: w.now, end: w.now, result: true, fabricated: true,
		id: fmt.Sprintf("run/%s/%s/%d/fabricated", w.spec.Slots[s].ID, n.id, attempt)}
	idx := len(w.runs)
	w.runs = append(w.runs, r)
	w.slotRuns[s] = append(w.slotRuns[s], idx)
	w.res.FabricatedResults++
	w.broadcastResult(idx)
}

// honestResult reports whether slot s has a result of a run that happened.
func (w *world) honestResult(s int) bool {
	for _, idx := range w.slotRuns[s] {
		if r := w.runs[idx]; r.result && !r.fabricated {
			return true
		}
	}
	return false
}

func (w *world) anyMissing() bool {
	for _, n := range w.nodes {
		if len(n.missing)+len(n.missingRecs) > 0 {
			return true
		}
	}
	return false
}

func (w *world) nodeIndex(id string) int {
	var i int
	fmt.Sscanf(id, "node%03d", &i)
	return i
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedValues(m map[int]int) []int {
	out := make([]int, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// recsOf is the indices of slot s's claim records.
func (w *world) recsOf(s int) []int { return w.slotRecs[s] }

// holder is the node that holds slot s's attempt by every claim record signed (the
// ledger's view, attest.AttemptHolders: least attest.ClaimRank), or -1.
func (w *world) holder(s, attempt int) int {
	best := -1
	for _, k := range w.slotRecs[s] {
		if w.recs[k].Attempt == attempt && (best < 0 || w.recs[k].Rank.Less(w.recs[best].Rank)) {
			best = k
		}
	}
	if best < 0 {
		return -1
	}
	return w.recNode[best]
}

// counted is the honest run the ledger counts for slot s: among its results (with
// ClaimRecords, those of their attempt's holder by every record), the lowest attempt, then
// the least sha256 of slot, attempt and lab (attest.FillKey: nothing the lab that ran them
// can steer by re-signing).
func (w *world) counted(s int) *run {
	var best *run
	var bestDraw [32]byte
	for _, idx := range w.slotRuns[s] {
		r := w.runs[idx]
		if !r.result || r.fabricated || (w.c.ClaimRecords && w.holder(s, r.attempt) != r.node) {
			continue
		}
		draw := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s", w.spec.Slots[s].ID, r.attempt, w.labs[r.lab]))
		if best == nil || r.attempt < best.attempt || (r.attempt == best.attempt && bytes.Compare(draw[:], bestDraw[:]) < 0) {
			best, bestDraw = r, draw
		}
	}
	return best
}

func (w *world) result() Result {
	res := w.res
	c := w.c
	res.Slots = c.Slots
	res.Finished = w.nFinished
	if c.ClaimRecords {
		// What the ledger counts: a slot whose only honest results are not their
		// attempt's holder's is not finished, whatever the nodes thought.
		res.Finished = 0
		for s := range c.Slots {
			if w.counted(s) != nil {
				res.Finished++
			}
		}
	}
	res.LostSlots = c.Slots - res.Finished
	for s := range c.Slots {
		if w.finished[s] && (!c.ClaimRecords || w.counted(s) != nil) {
			type key struct{ lab, attempt int }
			seen := map[key]bool{}
			results := 0
			for _, idx := range w.slotRuns[s] {
				r := w.runs[idx]
				if !r.result || r.fabricated {
					continue
				}
				results++
				k := key{r.lab, r.attempt}
				if seen[k] {
					res.Equivocations++
				}
				seen[k] = true
			}
			res.ExtraResults += results - 1
			r := w.counted(s)
			n := 0
			self := false
			for l, ok := range r.rescoreDone {
				if ok {
					n++
					self = self || l == w.labs[r.lab]
				}
			}
			if n >= c.Replication && !self {
				res.RescoredOK++
			} else {
				res.RescoreSelfOrShort++
			}
			continue
		}
		fails := 0
		for _, idx := range w.slotRuns[s] {
			if w.runs[idx].failed {
				fails++
			}
		}
		if fails >= c.MaxInfraAttempts {
			res.FailedSlots++
		}
	}
	if len(w.c2s) > 0 {
		x := slices.Clone(w.c2s)
		slices.Sort(x)
		res.ClaimToStart = Latency{
			P50: round3(stat.Quantile(0.5, stat.Empirical, x, nil)),
			P99: round3(stat.Quantile(0.99, stat.Empirical, x, nil)),
			Max: round3(x[len(x)-1]),
		}
	}
	if len(w.takeover) > 0 {
		x := slices.Clone(w.takeover)
		slices.Sort(x)
		res.Takeover = Latency{
			P50: round3(stat.Quantile(0.5, stat.Empirical, x, nil)),
			P99: round3(stat.Quantile(0.99, stat.Empirical, x, nil)),
			Max: round3(x[len(x)-1]),
		}
	}
	res.AlivePerSlot = round3(float64(w.alive) / float64(c.Slots))
	res.MessagesPerSlot = round3(float64(w.published) / float64(c.Slots))
	res.DeliveriesPerSlot = round3(float64(w.delivered) / float64(c.Slots))
	end := w.lastFinish
	if w.nFinished < c.Slots {
		end = w.now
	}
	res.VirtualSeconds = round3(end.Seconds())
	return res
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// ParsePartition reads the --partition flag, FRAC:DURATION[@AT] (e.g. "0.3:10m" or
// "0.5:1h@2h"): that fraction of the nodes is cut off from the rest for DURATION, starting at
// AT (0: a quarter of the expected makespan).
func ParsePartition(s string) (frac float64, dur, at time.Duration, err error) {
	bad := func(why string) error {
		return fmt.Errorf("--partition %q: %s; want FRAC:DURATION[@AT], e.g. 0.3:10m or 0.5:1h@2h", s, why)
	}
	f, rest, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, 0, bad("no ':'")
	}
	if frac, err = strconv.ParseFloat(f, 64); err != nil || !(frac >= 0 && frac < 1) { // NaN too
		return 0, 0, 0, bad("the fraction must be a number in [0, 1)")
	}
	d, a, hasAt := strings.Cut(rest, "@")
	if dur, err = time.ParseDuration(d); err != nil || dur < 0 {
		return 0, 0, 0, bad("the duration must be like 10m")
	}
	if hasAt {
		if at, err = time.ParseDuration(a); err != nil || at < 0 {
			return 0, 0, 0, bad("the start must be like 2h")
		}
	}
	return frac, dur, at, nil
}

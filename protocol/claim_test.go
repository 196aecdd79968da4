package protocol

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/evalmesh/evalmesh/attest"
)

// TestClaimMachine runs the datadriven scripts in testdata/claims: several claim machines,
// a shared virtual clock, and per-link message queues the script delivers or drops. Rewrite
// the expected output with `go test ./protocol -run TestClaimMachine -rewrite`.
//
// Commands:
//
//	node name=a [capacity=1] [lease=10m] [heartbeat=3m] [settle=300ms] [max-attempts=3]
//	     [head-start=10m] [lab=lab-a] [labs=0] [dead-after=2m] (default: off)
//	     [cert-until=2h] (the certificate expires that long from now; default: never)
//	    a new machine (a restart, when the name exists; queued messages stay in flight)
//	campaign id=c [slots=N] [deadline=1h] [hard=30m] [nodes=(a,b)] [awaiting-key=(c/s0[@2])]
//	     [task=t] [no-key=(c/s0)]
//	    awaiting-key: slots the targets already ran, whose runs wait for a key (a restart),
//	    each with the attempt that run signed when known
//	    task: every slot's task CID; no-key: slots whose sealed bundle the targets cannot open
//	key-arrived node=a task=t
//	advance d     the clock moves on by d; every node is ticked, in name order
//	deliver [from=a] [to=b] [kind=renew]   deliver queued messages, FIFO
//	drop [from=a] [to=b] [kind=renew]      lose them
//	started|ended|finished node=a slot=s [outcome=valid|agent|infra|awaiting-key]
//	inject node=a from=x kind=renew campaign=c slot=s lamport=1 attempt=1 [reason=infra] [lease=10m]
//	cert node=a until=5h   a renewed certificate, expiring that long from now
//	seen node=a peer=b   node a hears from b by other means (PeerSeen: the daemon's heads)
//	shutdown node=a; capacity node=a n=2; status node=a campaign=c; queued
func TestClaimMachine(t *testing.T) {
	datadriven.Walk(t, "testdata/claims", func(t *testing.T, path string) {
		h := newClaimHarness()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type queued struct {
	from, to string
	msg      ClaimMessage
}

type claimHarness struct {
	t0, now time.Time
	nodes   map[string]*ClaimMachine
	wake    map[string]time.Time
	queue   []queued
	out     strings.Builder
}

func newClaimHarness() *claimHarness {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &claimHarness{t0: t0, now: t0, nodes: map[string]*ClaimMachine{}, wake: map[string]time.Time{}}
}

func (h *claimHarness) names() []string {
	var n []string
	for k := range h.nodes {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

func (h *claimHarness) node(t *testing.T, d *datadriven.TestData) (string, *ClaimMachine) {
	var name string
	d.ScanArgs(t, "node", &name)
	m, ok := h.nodes[name]
	if !ok {
		t.Fatalf("%s: no node %q", d.Pos, name)
	}
	return name, m
}

func (h *claimHarness) rel(at time.Time) string { return "+" + at.Sub(h.t0).String() }

// show prints a node's actions and queues its messages for every other node.
func (h *claimHarness) show(name string, a Actions) {
	for _, p := range a.Publish {
		fmt.Fprintf(&h.out, "%s: publish %s %s lamport=%d attempt=%d", name, p.Kind, p.Slot, p.Lamport, p.Attempt)
		if p.Reason != "" {
			fmt.Fprintf(&h.out, " reason=%s", p.Reason)
		}
		h.out.WriteString("\n")
		for _, other := range h.names() {
			if other != name {
				h.queue = append(h.queue, queued{from: name, to: other, msg: p})
			}
		}
	}
	for _, ab := range a.Abort {
		fmt.Fprintf(&h.out, "%s: abort %s attempt=%d reason=%s\n", name, ab.SlotID, ab.Attempt, ab.Reason)
	}
	for _, s := range a.Start {
		fmt.Fprintf(&h.out, "%s: start %s attempt=%d\n", name, s.Slot.ID, s.Attempt)
	}
	for _, ig := range a.Ignored {
		fmt.Fprintf(&h.out, "%s: ignored %s from %s: %s\n", name, ig.Slot, ig.Peer, ig.Why)
	}
	if !a.Wake.Equal(h.wake[name]) {
		h.wake[name] = a.Wake
		if a.Wake.IsZero() {
			fmt.Fprintf(&h.out, "%s: wake never\n", name)
		} else {
			fmt.Fprintf(&h.out, "%s: wake %s\n", name, h.rel(a.Wake))
		}
	}
}

func (h *claimHarness) run(t *testing.T, d *datadriven.TestData) string {
	h.out.Reset()
	switch d.Cmd {
	case "node":
		var name string
		d.ScanArgs(t, "name", &name)
		cfg := ClaimConfig{Self: name, Lab: "lab-" + name, Cert: []byte(`{}`), Capacity: 1}
		d.MaybeScanArgs(t, "capacity", &cfg.Capacity)
		d.MaybeScanArgs(t, "max-attempts", &cfg.MaxInfraAttempts)
		// Dead-holder detection is off unless a script asks (dead-after=2m): the other scripts
		// test leases, and its periodic wake would only add lines to them.
		cfg.DeadAfter = -1
		var certUntil string
		if d.MaybeScanArgs(t, "cert-until", &certUntil) {
			cfg.CertNotAfter = h.now.Add(mustDuration(t, certUntil))
		}
		d.MaybeScanArgs(t, "lab", &cfg.Lab)
		d.MaybeScanArgs(t, "labs", &cfg.Labs)
		for _, f := range []struct {
			key string
			dst *time.Duration
		}{{"lease", &cfg.Lease}, {"heartbeat", &cfg.Heartbeat}, {"settle", &cfg.Settle}, {"head-start", &cfg.KeyHolderHeadStart}, {"dead-after", &cfg.DeadAfter}} {
			var s string
			if d.MaybeScanArgs(t, f.key, &s) {
				*f.dst = mustDuration(t, s)
			}
		}
		_, restart := h.nodes[name]
		h.nodes[name] = NewClaimMachine(cfg)
		delete(h.wake, name)
		if restart {
			return "restarted " + name + "\n"
		}
		return "ok\n"
	case "campaign":
		var id string
		d.ScanArgs(t, "id", &id)
		n, deadline, hard := 1, "1h", "30m"
		d.MaybeScanArgs(t, "slots", &n)
		d.MaybeScanArgs(t, "deadline", &deadline)
		d.MaybeScanArgs(t, "hard", &hard)
		spec := CampaignSpec{ID: id, Created: h.now, Deadline: h.now.Add(mustDuration(t, deadline))}
		var noKey []string
		awaiting := map[string]int{} // slot ID → the waiting run's attempt (0: not known)
		if arg, ok := d.Arg("awaiting-key"); ok {
			for _, v := range arg.Vals {
				sid, attempt, _ := strings.Cut(v, "@")
				awaiting[sid] = 0
				if attempt != "" {
					n, err := strconv.Atoi(attempt)
					if err != nil {
						d.Fatalf(t, "awaiting-key %q: attempt %q is not a number", v, attempt)
					}
					awaiting[sid] = n
				}
			}
		}
		if arg, ok := d.Arg("no-key"); ok {
			noKey = arg.Vals
		}
		var task string
		d.MaybeScanArgs(t, "task", &task)
		for i := range n {
			sid := fmt.Sprintf("%s/s%d", id, i)
			spec.Slots = append(spec.Slots, SlotSpec{ID: sid, Slot: attest.Slot{Campaign: id, Task: task}, HardLimit: mustDuration(t, hard),
				NoKey: slices.Contains(noKey, sid)})
			if attempt, ok := awaiting[sid]; ok {
				spec.Slots[i].AwaitingKey, spec.Slots[i].AwaitingKeyAttempt = true, attempt
			}
		}
		targets := h.names()
		if arg, ok := d.Arg("nodes"); ok {
			targets = arg.Vals
		}
		for _, name := range targets {
			h.show(name, h.nodes[name].AddCampaign(spec, h.now))
		}
	case "advance":
		h.now = h.now.Add(mustDuration(t, d.CmdArgs[0].Key))
		fmt.Fprintf(&h.out, "now %s\n", h.rel(h.now))
		for _, name := range h.names() {
			h.show(name, h.nodes[name].Tick(h.now))
		}
	case "deliver", "drop":
		var from, to, kind string
		d.MaybeScanArgs(t, "from", &from)
		d.MaybeScanArgs(t, "to", &to)
		d.MaybeScanArgs(t, "kind", &kind)
		var keep, take []queued
		for _, q := range h.queue {
			if (from == "" || q.from == from) && (to == "" || q.to == to) && (kind == "" || q.msg.Kind == kind) {
				take = append(take, q)
			} else {
				keep = append(keep, q)
			}
		}
		h.queue = keep
		for _, q := range take {
			if d.Cmd == "drop" {
				fmt.Fprintf(&h.out, "dropped %s->%s %s %s\n", q.from, q.to, q.msg.Kind, q.msg.Slot)
				continue
			}
			m, ok := h.nodes[q.to]
			if !ok {
				continue
			}
			msg := q.msg
			h.show(q.to, m.Receive(&msg, h.now))
		}
		if len(take) == 0 {
			h.out.WriteString("nothing queued\n")
		}
	case "started", "ended", "finished":
		name, m := h.node(t, d)
		var slot string
		d.ScanArgs(t, "slot", &slot)
		switch d.Cmd {
		case "started":
			h.show(name, m.RunStarted(slot, h.now))
		case "finished":
			var by string // the run's signer; "" as a restarted daemon replaying its store
			d.MaybeScanArgs(t, "by", &by)
			h.show(name, m.SlotFinished(slot, by, h.now))
		default:
			var o string
			d.ScanArgs(t, "outcome", &o)
			kinds := map[string]RunOutcomeKind{"valid": RunValid, "agent": RunAgentFailed, "infra": RunInfraFailed, "awaiting-key": RunAwaitingKey}
			if _, ok := kinds[o]; !ok {
				t.Fatalf("%s: outcome %q", d.Pos, o)
			}
			h.show(name, m.RunEnded(slot, RunOutcome{Kind: kinds[o]}, h.now))
		}
	case "inject":
		// A message as if published by from (any name, known or not), delivered to node.
		name, m := h.node(t, d)
		msg := ClaimMessage{V: Version, Cert: []byte(`{}`), LeaseMS: (10 * time.Minute).Milliseconds()}
		d.ScanArgs(t, "from", &msg.PeerID)
		msg.Lab = "lab-" + msg.PeerID
		d.ScanArgs(t, "kind", &msg.Kind)
		d.ScanArgs(t, "campaign", &msg.Campaign)
		d.ScanArgs(t, "slot", &msg.Slot)
		d.ScanArgs(t, "lamport", &msg.Lamport)
		d.ScanArgs(t, "attempt", &msg.Attempt)
		d.MaybeScanArgs(t, "reason", &msg.Reason)
		if d.HasArg("lease") {
			var lease string
			d.ScanArgs(t, "lease", &lease)
			dur, err := time.ParseDuration(lease)
			if err != nil {
				t.Fatal(err)
			}
			msg.LeaseMS = dur.Milliseconds()
		}
		if msg.Kind == ClaimKindRelease {
			msg.LeaseMS = 0
		}
		h.show(name, m.Receive(&msg, h.now))
	case "key-arrived":
		name, m := h.node(t, d)
		var task string
		d.ScanArgs(t, "task", &task)
		h.show(name, m.KeyArrived(task, h.now))
	case "cert":
		name, m := h.node(t, d)
		var until string
		d.ScanArgs(t, "until", &until)
		h.show(name, m.SetCertificate([]byte(`{}`), h.now.Add(mustDuration(t, until)), h.now))
	case "seen":
		_, m := h.node(t, d)
		var peer string
		d.ScanArgs(t, "peer", &peer)
		m.PeerSeen(peer, h.now)
		return "ok\n"
	case "shutdown":
		name, m := h.node(t, d)
		h.show(name, m.Shutdown(h.now))
	case "capacity":
		name, m := h.node(t, d)
		var n int
		d.ScanArgs(t, "n", &n)
		h.show(name, m.SetCapacity(n, h.now))
	case "status":
		_, m := h.node(t, d)
		var c string
		d.ScanArgs(t, "campaign", &c)
		st, ok := m.Status(c, h.now)
		if !ok {
			return "unknown campaign\n"
		}
		fmt.Fprintf(&h.out, "slots=%d unclaimed=%d claimed=%d running=%d done=%d failed=%d", st.Slots, st.Unclaimed, st.Claimed, st.Running, st.Done, st.Failed)
		if st.AwaitingKey > 0 {
			fmt.Fprintf(&h.out, " awaiting-key=%d", st.AwaitingKey)
		}
		fmt.Fprintf(&h.out, " closed=%v held=%v\n", st.Closed, m.Held())
	case "queued":
		for _, q := range h.queue {
			fmt.Fprintf(&h.out, "%s->%s %s %s\n", q.from, q.to, q.msg.Kind, q.msg.Slot)
		}
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if h.out.Len() == 0 {
		return "(nothing)\n"
	}
	return h.out.String()
}

func mustDuration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

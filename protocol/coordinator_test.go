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

// TestCoordinator runs the datadriven scripts in testdata/coordinator: one node's
// coordinator ("a" of lab "L1" unless said otherwise) on a virtual clock, fed verified
// values as its daemon would, printing every action. Rewrite the expected output with
// `go test ./protocol -run TestCoordinator -rewrite`.
//
// Commands:
//
//	coord [self=a] [lab=L1] [labs=(L1,L2,L3)] [rescore-timeout=2m] [require-witness]
//	      [lease=10m] [settle=300ms] [awaiting-key=(c/s0@1)] [scorers=(L1,L3)] [cap-agents=0] [cap-campaigns=0]
//	      [draws=(c/s0:0.1,…) [draw-replication=1]]
//	    (scorers: the labs that score task t, ledger.scorers; draws: the drawn re-scorer rule,
//	    with this node's draw per slot)
//	    a new coordinator (a restart when one exists)
//	heard campaign=c          CampaignHeard: prints whether to prepare it
//	campaign id=c [lab=L2] [slots=1] [agents=1] [agent-prefix=g] [refused=(g1)] [unauditable=(g0)] [replication=0]
//	      [task=t] [no-key=(c/s0)] [deadline=1h] [hard=30m] [created=-1m]
//	    AddCampaign, created now (or created from now); slot i of c is c/si, of agent g(i mod agents)
//	claim from=x [lab=L2] [kind=claim] campaign=c slot=c/s0 [lamport=1] [attempt=1] [reason=r]
//	run id=r1 node=x lab=L2 slot=c/s0 [attempt=1] [valid=true] [score=0.5] [witness=w1]
//	      [task=t] [agent=g0] [seed=0]   (the slot's value; empty unless given)
//	audits [rate=0.05] [parallel=1] [retry=1m] [held-epoch=1m] | draw run=r1 u=0.3
//	held runs=(r1,…)          AuditHeld: the runs the node's ledger holds as movers
//	audit id=a1 run=r1 lab=L3 verdict=match|mismatch|inconclusive
//	audit-ended run=r1 [failed] | audits-signed | audits-pending   (coordinator_audit_test.go)
//	rescore id=x run=r1 node=y lab=L3 [valid=true] [score=0.5] [draw=0.3|bad]
//	witness id=w1 campaign=c lab=L2 node=y   (signed now)
//	peer name=p lab=L1        PeerHeard (a head)
//	advance d                 the clock moves on by d, then Tick
//	open n=1 | free n=2 | doc mismatch=true|false
//	started slot=s | ended slot=s outcome=valid|agent|infra|awaiting-key [attempt=1]
//	key-arrived task=t | rescore-ended run=r1 | shutdown
//	witness-for campaign=c | status campaign=c | claim-to-start | awaiting slot=s
//	    (awaiting: the attempt of this node's run of s that waits for a key, 0 none)
func TestCoordinator(t *testing.T) {
	datadriven.Walk(t, "testdata/coordinator", func(t *testing.T, path string) {
		h := &coordHarness{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		h.now = h.t0
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type coordHarness struct {
	t0, now time.Time
	// draws: this node's re-scorer draw by slot ID (coord draws=…); non-nil turns the drawn
	// re-scorer rule on and gives runs their full slot (scriptSlot).
	draws map[string]float64
	c     *Coordinator
	wake  time.Time
	out   strings.Builder
}

func (h *coordHarness) show(a CoordActions) {
	for _, ab := range a.Abort {
		fmt.Fprintf(&h.out, "abort %s attempt=%d reason=%s\n", ab.SlotID, ab.Attempt, ab.Reason)
	}
	for _, p := range a.Publish {
		fmt.Fprintf(&h.out, "publish %s %s lamport=%d attempt=%d", p.Kind, p.Slot, p.Lamport, p.Attempt)
		if p.Reason != "" {
			fmt.Fprintf(&h.out, " reason=%s", p.Reason)
		}
		h.out.WriteString("\n")
	}
	for _, s := range a.Reannounce {
		fmt.Fprintf(&h.out, "reannounce %s\n", s)
	}
	for _, s := range a.Start {
		fmt.Fprintf(&h.out, "start %s attempt=%d\n", s.Slot.ID, s.Attempt)
	}
	for _, ig := range a.Ignored {
		fmt.Fprintf(&h.out, "ignored %s from %s: %s\n", ig.Slot, ig.Peer, ig.Why)
	}
	for _, r := range a.Rescore {
		fmt.Fprintf(&h.out, "rescore %s\n", r)
	}
	for _, w := range a.Witness {
		fmt.Fprintf(&h.out, "witness %s\n", w)
	}
	for _, g := range a.GiveUp {
		fmt.Fprintf(&h.out, "give up %s attempt=%d: %s\n", g.SlotID, g.Attempt, g.Why)
	}
	h.showAudits(a) // coordinator_audit_test.go
	for _, r := range a.SignRelease {
		fmt.Fprintf(&h.out, "sign release %s attempt=%d reason=%s\n", r.SlotID, r.Attempt, r.Reason)
	}
	for _, id := range a.Handed {
		fmt.Fprintf(&h.out, "handed %s to the claim machine\n", id)
	}
	if a.StoppedClaiming != "" {
		fmt.Fprintf(&h.out, "stopped claiming: %s\n", a.StoppedClaiming)
	}
	for _, sid := range a.Reopened {
		fmt.Fprintf(&h.out, "reopened %s\n", sid)
	}
	if a.RecomputeLedger {
		h.out.WriteString("recompute ledger\n")
	}
	for _, dc := range a.Declined {
		fmt.Fprintf(&h.out, "declined %s %s: %s\n", dc.Input, dc.ID, dc.Why)
	}
	if !a.Wake.IsZero() && !a.Wake.Equal(h.wake) {
		h.wake = a.Wake
		fmt.Fprintf(&h.out, "wake +%s\n", a.Wake.Sub(h.t0))
	}
}

func (h *coordHarness) run(t *testing.T, d *datadriven.TestData) string {
	h.out.Reset()
	str := func(key, def string) string {
		v := def
		d.MaybeScanArgs(t, key, &v)
		return v
	}
	num := func(key string, def int) int {
		v := def
		d.MaybeScanArgs(t, key, &v)
		return v
	}
	score := func() *float64 {
		s, ok := d.Arg("score")
		if !ok {
			return nil
		}
		f, err := strconv.ParseFloat(s.SingleVal(t), 64)
		if err != nil {
			d.Fatalf(t, "score %q: %v", s.SingleVal(t), err)
		}
		return &f
	}
	list := func(key string, def []string) []string {
		if arg, ok := d.Arg(key); ok {
			return arg.Vals
		}
		return def
	}
	if d.Cmd != "coord" && h.c == nil {
		d.Fatalf(t, "no coordinator: start with `coord`")
	}
	switch d.Cmd {
	case "coord":
		cfg := CoordinatorConfig{
			Claims: ClaimConfig{Self: str("self", "a"), Lab: str("lab", "L1"), Cert: []byte(`{}`),
				Lease: mustDuration(t, str("lease", "10m")), Settle: mustDuration(t, str("settle", "300ms"))},
			Labs: list("labs", []string{"L1", "L2", "L3"}), RescoreTimeout: mustDuration(t, str("rescore-timeout", "2m")),
			RequireWitness: d.HasArg("require-witness"), RequireClaimRecords: d.HasArg("require-claim-records"), AwaitingKey: map[string]int{},
			MaxAgentsPerLab: num("cap-agents", 0), MaxCampaignsPerLab: num("cap-campaigns", 0),
			MaxInfraStreak: num("max-infra-streak", 0),
		}
		if sc := list("scorers", nil); sc != nil {
			cfg.Scorers = map[string][]string{"t": sc}
		}
		for _, v := range list("awaiting-key", nil) {
			sid, att, _ := strings.Cut(v, "@")
			n, err := strconv.Atoi(att)
			if err != nil {
				d.Fatalf(t, "awaiting-key %q: want slot@attempt", v)
			}
			cfg.AwaitingKey[sid] = n
		}
		h.draws = nil
		if arg, ok := d.Arg("draws"); ok {
			// The drawn re-scorer rule with this node's draw per slot; a heard re-score's
			// draw is its proof written as the fraction ("bad": a proof that does not verify).
			h.draws = map[string]float64{}
			for _, v := range arg.Vals {
				sid, u, _ := strings.Cut(v, ":")
				f, err := strconv.ParseFloat(u, 64)
				if err != nil {
					d.Fatalf(t, "draws %q: want slot:fraction", v)
				}
				h.draws[sid] = f
			}
			draws := h.draws
			cfg.RescorerDraw = &attest.RescorerDraw{Labs: cfg.Labs, Replication: num("draw-replication", 1)}
			cfg.OwnDraw = func(run *attest.RunPredicate) (float64, error) {
				u, ok := draws[fmt.Sprintf("%s/s%d", run.Slot.Campaign, run.Slot.Seed)]
				if !ok {
					return 0, fmt.Errorf("no draw")
				}
				return u, nil
			}
			cfg.VerifyDraw = func(lab, node, proof string, run *attest.RunPredicate) (float64, error) {
				return strconv.ParseFloat(proof, 64)
			}
		}
		restart := h.c != nil
		h.c, h.wake = NewCoordinator(cfg), time.Time{}
		if restart {
			return "restarted\n"
		}
		return "ok\n"
	case "heard":
		fmt.Fprintf(&h.out, "prepare=%v\n", h.c.CampaignHeard(str("campaign", "")))
	case "campaign":
		id := str("id", "c")
		in := CoordinatorCampaign{Lab: str("lab", "L2"), Replication: num("replication", 0), Refused: map[string]bool{}}
		for _, g := range list("refused", nil) {
			in.Refused[g] = true
		}
		for _, g := range list("unauditable", nil) {
			if in.Unauditable == nil {
				in.Unauditable = map[string]bool{}
			}
			in.Unauditable[g] = true
		}
		created := h.now.Add(mustDuration(t, str("created", "0s")))
		in.Spec = CampaignSpec{ID: id, Created: created, Deadline: h.now.Add(mustDuration(t, str("deadline", "1h")))}
		noKey := list("no-key", nil)
		agents := num("agents", 1)
		for i := range num("slots", 1) {
			sid := fmt.Sprintf("%s/s%d", id, i)
			in.Spec.Slots = append(in.Spec.Slots, SlotSpec{ID: sid, HardLimit: mustDuration(t, str("hard", "30m")),
				Slot: attest.Slot{Campaign: id, Task: str("task", "t"), Agent: fmt.Sprintf("%s%d", str("agent-prefix", "g"), i%agents), Seed: i}, NoKey: contains(noKey, sid)})
		}
		h.show(h.c.AddCampaign(in, h.now))
	case "claim":
		m := &ClaimMessage{V: Version, Cert: []byte(`{}`), LeaseMS: (10 * time.Minute).Milliseconds(),
			PeerID: str("from", "x"), Lab: str("lab", "L2"), Kind: str("kind", ClaimKindClaim), Campaign: str("campaign", "c"),
			Slot: str("slot", "c/s0"), Attempt: num("attempt", 1), Reason: str("reason", "")}
		m.Lamport = uint64(num("lamport", 1))
		if m.Kind == ClaimKindRelease {
			m.LeaseMS = 0
		}
		h.show(h.c.Claim(m, h.now))
	case "run":
		sid := str("slot", "c/s0")
		campaign, _, _ := strings.Cut(sid, "/")
		valid, _ := strconv.ParseBool(str("valid", "true"))
		slot := attest.Slot{Campaign: campaign, Task: str("task", ""), Agent: str("agent", ""), Seed: num("seed", 0)}
		if h.draws != nil {
			slot = scriptSlot(t, d, sid)
		}
		h.show(h.c.Run(RunHeard{ID: str("id", "r1"), Node: str("node", "x"), Lab: str("lab", "L2"), SlotID: sid,
			Slot: slot, Attempt: num("attempt", 1), Metric: "accuracy", Valid: valid, Score: score(),
			Witness: str("witness", "")}, h.now))
	case "voided":
		h.show(h.c.Voided(list("ids", nil), h.now))
	case "rescore":
		valid, _ := strconv.ParseBool(str("valid", "true"))
		h.show(h.c.Rescore(RescoreHeard{ID: str("id", "rs1"), Run: str("run", "r1"), Node: str("node", "y"), Lab: str("lab", "L3"),
			Metric: "accuracy", Valid: valid, Score: score(), Draw: str("draw", "")}, h.now))
	case "witness":
		h.show(h.c.Witness(WitnessHeard{ID: str("id", "w1"), Campaign: str("campaign", "c"), Lab: str("lab", "L2"), Node: str("node", "y"), Time: h.now}, h.now))
	case "claim-record":
		sid := str("slot", "c/s0")
		slot := scriptSlot(t, d, sid)
		att, lab, node := num("attempt", 1), str("lab", "L2"), str("node", "x")
		h.show(h.c.ClaimRecord(ClaimRecordHeard{ID: str("id", "cr1"), SlotID: sid, Campaign: slot.Campaign, Attempt: att,
			Node: node, Lab: lab, Witness: str("witness", ""), Rank: attest.RankOf(slot, att, lab, node)}, h.now))
	case "holder":
		fmt.Fprintf(&h.out, "holder=%q\n", h.c.AttemptHolder(str("slot", "c/s0"), num("attempt", 1)))
	case "rank":
		// The labs in claim-rank order for one attempt (least first): which lab's record
		// holds it, so a script can pick an outranking lab.
		sid := str("slot", "c/s0")
		slot, att := scriptSlot(t, d, sid), num("attempt", 1)
		labs := list("labs", []string{"L1", "L2", "L3"})
		slices.SortFunc(labs, func(a, b string) int {
			ra, rb := attest.RankOf(slot, att, a, "n"), attest.RankOf(slot, att, b, "n")
			switch {
			case ra.Less(rb):
				return -1
			case rb.Less(ra):
				return 1
			}
			return 0
		})
		fmt.Fprintf(&h.out, "%v\n", labs)
	case "peer":
		h.c.PeerHeard(str("name", ""), str("lab", "L1"), h.now)
	case "advance":
		h.now = h.now.Add(mustDuration(t, d.CmdArgs[0].Key))
		fmt.Fprintf(&h.out, "now +%s\n", h.now.Sub(h.t0))
		h.show(h.c.Tick(h.now))
	case "open":
		h.show(h.c.OpenCapacity(num("n", 1), h.now))
	case "free":
		h.show(h.c.FreeCapacity(num("n", 0), h.now))
		fmt.Fprintf(&h.out, "capacity=%d\n", h.c.Capacity())
	case "doc":
		mismatch, _ := strconv.ParseBool(str("mismatch", "true"))
		a, changed := h.c.DocumentMismatch(mismatch, h.now)
		h.show(a)
		fmt.Fprintf(&h.out, "changed=%v\n", changed)
	case "started":
		h.show(h.c.RunStarted(str("slot", "c/s0"), h.now))
	case "ended":
		kinds := map[string]RunOutcomeKind{"valid": RunValid, "agent": RunAgentFailed, "infra": RunInfraFailed, "awaiting-key": RunAwaitingKey}
		o := str("outcome", "valid")
		if _, ok := kinds[o]; !ok {
			d.Fatalf(t, "outcome %q", o)
		}
		h.show(h.c.RunEnded(str("slot", "c/s0"), num("attempt", 1), RunOutcome{Kind: kinds[o]}, h.now))
	case "key-arrived":
		h.show(h.c.KeyArrived(str("task", "t"), h.now))
	case "rescore-ended":
		h.c.RescoreEnded(str("run", "r1"))
	case "shutdown":
		h.show(h.c.Shutdown(h.now))
	case "awaiting":
		sid := str("slot", "c/s0")
		fmt.Fprintf(&h.out, "%s awaiting-key attempt=%d\n", sid, h.c.AwaitingKey(sid))
	case "witness-for":
		fmt.Fprintf(&h.out, "witness=%q\n", h.c.WitnessFor(str("campaign", "c")))
	case "status":
		c := str("campaign", "c")
		st, ok := h.c.Status(c, h.now)
		if !ok {
			return "unknown campaign\n"
		}
		fmt.Fprintf(&h.out, "ready=%v slots=%d unclaimed=%d claimed=%d running=%d done=%d failed=%d awaiting-key=%d held=%v",
			h.c.Ready(c), st.Slots, st.Unclaimed, st.Claimed, st.Running, st.Done, st.Failed, st.AwaitingKey, h.c.Held())
		if st.Withdrawn {
			h.out.WriteString(" withdrawn")
		}
		h.out.WriteString("\n")
	case "claim-to-start":
		fmt.Fprintf(&h.out, "%v\n", h.c.ClaimToStart())
	default:
		if !h.runAudit(t, d, str, num) { // coordinator_audit_test.go
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
	}
	if h.out.Len() == 0 {
		return "(nothing)\n"
	}
	return h.out.String()
}

// scriptSlot is the slot value of a script's slot ID "campaign/sN", as the campaign
// command makes it with one agent and task t.
func scriptSlot(t *testing.T, d *datadriven.TestData, sid string) attest.Slot {
	campaign, rest, _ := strings.Cut(sid, "/")
	seed, err := strconv.Atoi(strings.TrimPrefix(rest, "s"))
	if err != nil {
		d.Fatalf(t, "slot %q: want campaign/sN", sid)
	}
	return attest.Slot{Campaign: campaign, Task: "t", Agent: "g0", Seed: seed}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

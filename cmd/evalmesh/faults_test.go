package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/evalmesh/evalmesh/examples/demo"
	exampletasks "github.com/evalmesh/evalmesh/examples/tasks"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/protocol"
)

// Fault tests with real daemon processes (this test binary re-executed as `evalmesh
// daemon`), driven only through their HTTP API, the way Prysm's end-to-end tests drive real
// clients. Partitions are made inside evalmesh (the daemon's --test-controls: connection
// gater + closing connections), never with firewall rules. After each fault every node must
// report the same attestation set and the same ledger root, with every slot counted once.

// daemonProc is one running `evalmesh daemon` process.
type daemonProc struct {
	t      *testing.T
	lab    demo.LabNode
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
	client *node.Client
	peerID string
	addr   string
}

type cluster struct {
	t     *testing.T
	labs  *demo.Labs
	nodes []*daemonProc
	args  map[int][]string // daemon flags of lab i besides faultDaemonArgs
	// exe is the daemons' executable: "" means this test binary (os.Args[0]); a copy
	// elsewhere can have files beside it (the model proxy, found next to the executable).
	exe string
}

// Short leases so a killed or stopped node's slots pass to others within seconds; known
// peers re-dialled at least every 2 s, so a healed partition reconnects within seconds.
var faultDaemonArgs = []string{"--lease", "3s", "--heartbeat", "1s", "--rescore-timeout", "3s", "--redial-max", "2s", "--test-controls"}

// in makes t, a subtest of the test that built c, the one c's helpers report to until t
// ends: a helper failing the parent's t from a subtest ends the parent's goroutine instead
// ("subtest may have called FailNow on a parent test") and hides which subtest failed.
func (c *cluster) in(t *testing.T) {
	parent := c.t
	c.t = t
	t.Cleanup(func() { c.t = parent })
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	labs, err := demo.NewLabs(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, labs: labs}
}

// start launches the daemon of lab i (again, after a kill) and waits for its API.
func (c *cluster) start(i int) *daemonProc {
	t := c.t
	t.Helper()
	l := c.labs.Nodes[i]
	os.Remove(l.Home.APIPath())
	args := append(append([]string{"daemon", "--home", l.Home.Dir}, faultDaemonArgs...), c.args[i]...)
	cmd := exec.Command(cmp.Or(c.exe, os.Args[0]), args...)
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_CLI=1")
	logPath := filepath.Join(c.labs.Dir, fmt.Sprintf("%s-%d.log", l.Name, time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{t: t, lab: l, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); f.Close(); close(d.exited) }()
	t.Cleanup(func() { d.kill() })
	testutil.WaitFor(t, 60*time.Second, l.Name+"'s daemon API", func() bool {
		select {
		case <-d.exited:
			t.Fatalf("daemon of %s exited:\n%s", l.Name, readLog(logPath))
		default:
		}
		cl, err := node.NewClient(l.Home)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		id, err := cl.ID(ctx)
		if err != nil || len(id.Addrs) == 0 {
			return false
		}
		d.client, d.peerID, d.addr = cl, id.PeerID, id.Addrs[0]
		return true
	})
	if i < len(c.nodes) {
		c.nodes[i] = d
	} else {
		c.nodes = append(c.nodes, d)
	}
	return d
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// logHas reports whether the daemon's whole log contains sub.
func (d *daemonProc) logHas(sub string) bool {
	b, _ := os.ReadFile(d.log)
	return strings.Contains(string(b), sub)
}

// waitWarned waits until the daemon has logged a warning whose message starts with msg.
func (d *daemonProc) waitWarned(msg string) {
	d.t.Helper()
	testutil.WaitFor(d.t, 20*time.Second, d.lab.Name+" logging WARN "+msg, func() bool {
		return d.logHas(`level=WARN msg="` + msg)
	})
}

// waitConnected waits until d is connected to each of peers, with no `evalmesh connect`.
func (d *daemonProc) waitConnected(peers ...*daemonProc) {
	d.t.Helper()
	ids := make([]string, len(peers))
	for i, p := range peers {
		ids[i] = p.peerID
	}
	testutil.WaitFor(d.t, 30*time.Second, d.lab.Name+" connected again by itself", func() bool { return connectedTo(d.client, ids...) })
}

// connectedTo reports whether the daemon behind c lists each of ids among its peers (false
// while it does not answer).
func connectedTo(c *node.Client, ids ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got, err := c.Peers(ctx)
	if err != nil {
		return false
	}
	for _, id := range ids {
		if !slices.ContainsFunc(got, func(i node.PeerInfo) bool { return i.ID == id }) {
			return false
		}
	}
	return true
}

func (d *daemonProc) kill() {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGCONT)
	d.cmd.Process.Kill()
	<-d.exited
}

func (d *daemonProc) signal(s syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(s); err != nil {
		d.t.Fatal(err)
	}
}

// connectAll connects every running node to every other one.
func (c *cluster) connectAll() {
	c.t.Helper()
	for i, d := range c.nodes {
		for _, o := range c.nodes[:i] {
			c.connect(d, o)
		}
	}
}

func (c *cluster) connect(a, b *daemonProc) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.client.Connect(ctx, b.addr); err != nil {
		c.t.Fatalf("connect %s to %s: %v", a.lab.Name, b.lab.Name, err)
	}
}

// addTasks adds example tasks on node 0 only; the others fetch them over the network.
func (c *cluster) addTasks(names ...string) []string {
	c.t.Helper()
	dir := filepath.Join(c.labs.Dir, "examples", "tasks")
	if _, err := exampletasks.Generate(dir); err != nil {
		c.t.Fatal(err)
	}
	var cids []string
	for _, n := range names {
		ci, err := c.nodes[0].client.Add(context.Background(), filepath.Join(dir, n), false, nil)
		if err != nil {
			c.t.Fatalf("add %s: %v", n, err)
		}
		cids = append(cids, ci.String())
	}
	return cids
}

// publish signs a campaign by lab 1 (the second lab) and publishes it on node via.
func (c *cluster) publish(via *daemonProc, tasks, agents []string, seeds int) (id string, slots int) {
	c.t.Helper()
	id, slots = c.publishOn([]*daemonProc{via}, tasks, agents, seeds)
	return id, slots
}

// publishOn signs one campaign and publishes that same envelope through each of vias (the
// two sides of a partition): signing it again would stamp another creation time, which
// falls in another second now and then, and so another campaign ID.
func (c *cluster) publishOn(vias []*daemonProc, tasks, agents []string, seeds int) (id string, slots int) {
	c.t.Helper()
	env, id, err := c.labs.Campaign(1, "fault test", tasks, agents, seeds)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, via := range vias {
		got, err := via.client.PublishCampaign(context.Background(), env)
		if err != nil || got != id {
			c.t.Fatalf("publish on %s: %q %v (want %s)", via.lab.Name, got, err, id)
		}
	}
	return id, len(tasks) * len(agents) * seeds
}

// view is what one node reports.
type view struct {
	root         string
	counted      int
	attestations int
	done         int
	excluded     map[string]int
}

func (d *daemonProc) view(campaign string) (view, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v := view{excluded: map[string]int{}}
	l, err := d.client.MeshLedger(ctx)
	if err != nil {
		return v, err
	}
	v.root, v.counted, v.attestations = l.Root, l.Report.Counted, l.Attestations
	for _, e := range l.Report.Excluded {
		v.excluded[string(e.Reason)]++
	}
	if campaign != "" {
		st, err := d.client.CampaignStatus(ctx, campaign)
		if err != nil {
			return v, err
		}
		v.done = st.Status.Done
	}
	return v, nil
}

// converged waits until every running node reports the same root over the same number of
// attestations with all slots counted, and returns that view.
func (c *cluster) converged(campaign string, slots int, within time.Duration) view {
	c.t.Helper()
	var last []view
	var lastErr error
	err := testutil.Poll(within, func() bool {
		last, lastErr = nil, nil
		for _, d := range c.nodes {
			v, err := d.view(campaign)
			if err != nil {
				lastErr = fmt.Errorf("%s: %w", d.lab.Name, err)
				return false
			}
			last = append(last, v)
		}
		for _, v := range last {
			if v.root != last[0].root || v.attestations != last[0].attestations || v.counted != slots || v.done != slots {
				return false
			}
		}
		return true
	})
	if err != nil {
		var b strings.Builder
		for i, v := range last {
			fmt.Fprintf(&b, "%s: root %.12s attestations %d counted %d/%d done %d excluded %v\n", c.nodes[i].lab.Name, v.root, v.attestations, v.counted, slots, v.done, v.excluded)
		}
		for _, d := range c.nodes {
			fmt.Fprintf(&b, "--- %s log tail:\n%s\n", d.lab.Name, readLog(d.log))
		}
		c.t.Fatalf("nodes did not converge within %s (last error %v):\n%s", within, lastErr, b.String())
	}
	for i, v := range last {
		if v.excluded["equivocation"] > 0 {
			c.t.Errorf("%s: %d runs excluded as equivocation: a retry or duplicate was read as a lab signing two results", c.nodes[i].lab.Name, v.excluded["equivocation"])
		}
	}
	return last[0]
}

// waitDone waits until node d sees at least n slots of campaign done.
func (c *cluster) waitDone(d *daemonProc, campaign string, n int) {
	c.t.Helper()
	testutil.WaitFor(c.t, 120*time.Second, fmt.Sprintf("%d slots done on %s", n, d.lab.Name), func() bool {
		v, err := d.view(campaign)
		return err == nil && v.done >= n
	})
}

// waitAllDone waits until each of nodes sees every slot of campaign done.
func (c *cluster) waitAllDone(nodes []*daemonProc, campaign string, slots int) {
	c.t.Helper()
	testutil.WaitFor(c.t, 120*time.Second, "every slot done on the running nodes", func() bool {
		for _, d := range nodes {
			v, err := d.view(campaign)
			if err != nil || v.done != slots {
				return false
			}
		}
		return true
	})
}

// runningCluster starts three connected daemons and adds tasks on the first.
func runningCluster(t *testing.T, tasks ...string) (*cluster, []string) {
	t.Helper()
	c := newCluster(t, 3)
	for i := 0; i < 3; i++ {
		c.start(i)
	}
	c.connectAll()
	return c, c.addTasks(tasks...)
}

var faultAgents = []string{"constant", "heuristic", "solver"}

func skipShortFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("fault tests start real daemon processes; skipped with -short")
	}
}

// A node killed with SIGKILL in the middle of a campaign: its slots pass to the others when
// their leases lapse; restarted, it re-attaches or fails its runs, attests each at most
// once, and converges on the same set and root.
func TestFaultKillNodeMidCampaign(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic", "sentiment")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 3)
	c.waitDone(c.nodes[0], id, 3)
	victim := c.nodes[2]
	victim.signal(syscall.SIGKILL)
	<-victim.exited
	// The survivors finish every slot, the victim's claimed ones once their leases lapse.
	c.waitAllDone(c.nodes[:2], id, slots)
	d := c.start(2)
	c.connect(d, c.nodes[0])
	c.connect(d, c.nodes[1])
	v := c.converged(id, slots, 120*time.Second)
	t.Logf("converged after kill -9 and restart: root %s, %d attestations, %d slots counted once each", v.root, v.attestations, v.counted)
}

// A node stopped with SIGSTOP past its leases, then continued: the slots others finished in
// the meantime are not counted twice, and every node converges.
func TestFaultStoppedNodeResumes(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic", "regression")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 3)
	c.waitDone(c.nodes[0], id, 2)
	stopped := c.nodes[2]
	stopped.signal(syscall.SIGSTOP)
	c.waitAllDone(c.nodes[:2], id, slots)
	stopped.signal(syscall.SIGCONT)
	v := c.converged(id, slots, 120*time.Second)
	t.Logf("converged after SIGSTOP/SIGCONT: root %s, %d attestations, excluded %v", v.root, v.attestations, v.excluded)
}

// One lab partitioned from the others (inside evalmesh) while both sides make new results,
// then healed with no `evalmesh connect`: the nodes dial each other again by themselves,
// say so in their logs, and every node ends with the union and the same root.
func TestFaultPartitionHeals(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic", "sentiment")
	// The isolated lab needs the bundles before the partition to make results of its own.
	for _, d := range c.nodes[1:] {
		for _, tc := range tasks {
			ci, err := cid.Decode(tc)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.client.Pin(context.Background(), ci, "", nil); err != nil {
				t.Fatalf("pin %s on %s: %v", tc, d.lab.Name, err)
			}
		}
	}
	cut := c.nodes[2]
	ctx := context.Background()
	if err := cut.client.Partition(ctx, []string{c.nodes[0].peerID, c.nodes[1].peerID}); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.nodes[:2] {
		if err := d.client.Partition(ctx, []string{cut.peerID}); err != nil {
			t.Fatal(err)
		}
	}
	cut.waitWarned("peer disconnected " + c.nodes[0].peerID)
	cut.waitWarned("running alone: no peers connected")
	// The campaign reaches both sides: published on each (same envelope, same ID).
	id, slots := c.publishOn([]*daemonProc{c.nodes[1], cut}, tasks, faultAgents, 3)
	c.waitDone(cut, id, 2)
	c.waitDone(c.nodes[0], id, 2)
	for _, d := range c.nodes {
		if err := d.client.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	healed := time.Now()
	cut.waitConnected(c.nodes[0], c.nodes[1])
	t.Logf("the cut node reconnected by itself %.1fs after the heal", time.Since(healed).Seconds())
	cut.waitWarned("peer connected " + c.nodes[0].peerID)
	v := c.converged(id, slots, 120*time.Second)
	t.Logf("converged after a healed partition: root %s, %d attestations, excluded %v", v.root, v.attestations, v.excluded)
}

// A node killed with SIGKILL and started again dials the peers it knew (HOME/peers.json, no
// bootstrap, no `evalmesh connect`), and its heads, numbered again after the restart, are
// taken as newer: the others report it agreeing, not stale, once the roots are equal.
func TestFaultRestartRedialsAndHeadsAgree(t *testing.T) {
	skipShortFaults(t)
	// One slot: roots are computed only over attestations.
	c, tasks := runningCluster(t, "arithmetic")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents[:1], 1)
	c.converged(id, slots, 60*time.Second)
	c.waitAgreeing(c.nodes[2], time.Time{}, 60*time.Second)
	victim := c.nodes[2]
	// Two more periodic heads before the kill: a restart that numbered its heads from 0
	// again would have them dropped as old for two more intervals.
	heard := map[time.Time]bool{}
	testutil.WaitFor(t, 30*time.Second, "two more heads of "+victim.lab.Name, func() bool {
		st, err := c.nodes[0].client.LedgerStatus(context.Background())
		if err != nil {
			return false
		}
		for _, p := range st.Peers {
			if p.PeerID == victim.peerID {
				heard[p.LastHeard] = true
			}
		}
		return len(heard) >= 3
	})
	victim.signal(syscall.SIGKILL)
	<-victim.exited
	restarted := time.Now()
	d := c.start(2)
	d.waitConnected(c.nodes[0], c.nodes[1])
	t.Logf("the restarted node reconnected by itself %.1fs after its start", time.Since(restarted).Seconds())
	// Within two head intervals: heads dropped as old would take one interval for each head
	// announced before the kill (here four or more).
	c.waitAgreeing(d, restarted, 10*time.Second)
	t.Logf("its heads were taken as agreeing %.1fs after its start", time.Since(restarted).Seconds())
}

// waitAgreeing waits until every other node's ledger status shows d's head, heard after
// since, agreeing with theirs (and so not stale).
func (c *cluster) waitAgreeing(d *daemonProc, since time.Time, within time.Duration) {
	c.t.Helper()
	var last []string
	err := testutil.Poll(within, func() bool {
		last = nil
		for _, o := range c.nodes {
			if o == d {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := o.client.LedgerStatus(ctx)
			cancel()
			if err != nil {
				last = append(last, fmt.Sprintf("%s: %v", o.lab.Name, err))
				continue
			}
			i := slices.IndexFunc(st.Peers, func(p protocol.PeerHead) bool { return p.PeerID == d.peerID })
			if i < 0 {
				last = append(last, o.lab.Name+": no head of "+d.lab.Name)
				continue
			}
			if p := st.Peers[i]; !p.Agrees || p.Stale || p.LastHeard.Before(since) {
				last = append(last, fmt.Sprintf("%s: %s's head %s, heard %s", o.lab.Name, d.lab.Name, p.Status, p.LastHeard.Format(time.RFC3339Nano)))
			}
		}
		return len(last) == 0
	})
	if err != nil {
		c.t.Fatalf("%s's head not agreeing everywhere within %s: %v", d.lab.Name, within, last)
	}
}

// A node that joins after the campaign ended everywhere else gets every attestation and the
// same root (sync on connect, campaigns included).
func TestFaultLateJoiner(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	c.start(0)
	c.start(1)
	c.connectAll()
	tasks := c.addTasks("arithmetic")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 2)
	early := &cluster{t: t, labs: c.labs, nodes: c.nodes[:2]}
	early.converged(id, slots, 120*time.Second)
	late := c.start(2)
	c.connect(late, c.nodes[0])
	v := c.converged(id, slots, 120*time.Second)
	t.Logf("late joiner converged: root %s, %d attestations", v.root, v.attestations)
}

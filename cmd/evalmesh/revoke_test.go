package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/testutil"
	"github.com/evalmesh/evalmesh/protocol"
)

// Issue 45 (docs/operating.md §3 "Revocation"; design.md §9 "A revoked node's work"):
// trust comes from the network document here (the demo homes have network.json). lab3's
// node ran slots of a campaign; then lab3 revokes it (a stolen key). The revocation reaches
// the honest daemons without a restart, by both paths: lab1's operator adds it to the node's
// trust file (`evalmesh trust add --revocation`), and lab2's node gets the network document
// with the revocation in it, signed by every lab, as HOME/network.json. Neither daemon is
// restarted. The revoked node, still running, goes on claiming and running slots: none of
// its runs counts on lab1's and lab2's daemons any more — the earlier ones too (a stolen key
// can backdate what it signs, so the ledger voids everything signed under a revoked
// certificate: attest.TrustStore.certStanding), each listed as refused for the revocation —
// the cells its runs filled are filled again by lab1 and lab2 (protocol.Coordinator.Voided
// reopens them), both end on the same root, and lab1 and lab2 run every slot of a new
// campaign themselves.
func TestRevocationUnderNetworkDocument(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic", "sentiment")
	// The two campaigns run different agents: the ledger counts each (task, agent, seed)
	// cell once, so the second campaign's runs all count.
	before, slots := c.publish(c.nodes[1], tasks, faultAgents[:1], 4)
	c.waitAllDone(c.nodes, before, slots)
	stolen, stolenLab := c.nodes[2], c.labs.Nodes[2].Lab.ID
	views := c.settle("every node counting the first campaign", 90*time.Second, func(v ledgerView) bool { return len(v.counted) == slots })
	var earlier []string // the revoked node's counted runs from before the revocation
	for id, r := range views[0].counted {
		if r.node == stolen.peerID {
			earlier = append(earlier, id)
		}
	}
	if len(earlier) == 0 {
		t.Fatalf("lab3's node ran none of the first campaign's %d slots: nothing for the revocation to void", slots)
	}

	rev, err := c.labs.Nodes[2].Lab.Revoke([]string{stolen.peerID}, nil, time.Now(), "node key stolen")
	if err != nil {
		t.Fatal(err)
	}
	revFile := filepath.Join(t.TempDir(), "rev.json")
	if err := os.WriteFile(revFile, rev.Raw(), 0o644); err != nil {
		t.Fatal(err)
	}
	pids := []int{c.nodes[0].cmd.Process.Pid, c.nodes[1].cmd.Process.Pid}
	// lab1: the node's trust file, as docs/operating.md §3 says for a lab's own revocation.
	h := c.labs.Nodes[0].Home
	cli(t, h.Dir, "trust", "add", "--trust", h.TrustPath(), "--revocation", revFile)
	// lab2: the network-wide path, a new document carrying the revocation, signed by a
	// majority (here every lab), copied over the node's HOME/network.json.
	doc, err := protocol.ParseNetworkDoc(c.labs.Doc.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.AddRevocation(rev.Raw()); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.labs.Nodes {
		if err := doc.Sign(n.Name, n.Lab); err != nil {
			t.Fatal(err)
		}
	}
	if err := home.WriteFileAtomic(c.labs.Nodes[1].Home.NetworkDocPath(), doc.File(), 0o644); err != nil {
		t.Fatal(err)
	}
	honest := c.nodes[:2]
	for _, d := range honest {
		// Files are polled every 10 s; the daemon says the revocation at WARN.
		warned := `level=WARN msg="revocation ` + rev.ID
		if err := testutil.Poll(60*time.Second, func() bool { return d.logHas(warned) }); err != nil {
			t.Fatalf("%s did not read the revocation without a restart:\n%s", d.lab.Name, readLog(d.log))
		}
	}
	slotsOf := map[string]int{before: slots}
	honestCells := func(campaign string) func(ledgerView) bool {
		return func(v ledgerView) bool {
			n := 0
			for _, r := range v.counted {
				if r.campaign == campaign && r.node != stolen.peerID {
					n++
				}
			}
			return n == slotsOf[campaign]
		}
	}
	c.settleOn(honest, "lab1 and lab2 filling the revoked node's cells again with honest runs, on one root", 180*time.Second, honestCells(before))
	for i, d := range honest {
		if d.cmd.Process.Pid != pids[i] {
			t.Fatalf("%s's daemon was restarted", d.lab.Name)
		}
		if !d.logHas("slot(s) no counted run finishes any more are open again") {
			t.Errorf("%s did not say which slots the revocation reopened:\n%s", d.lab.Name, readLog(d.log))
		}
	}
	t.Logf("without a restart, lab1 (trust file) and lab2 (network document) void the %d runs of the revoked node and fill its cells again", len(earlier))

	after, slots2 := c.publish(c.nodes[1], tasks, faultAgents[1:], 2)
	c.waitAllDone(honest, after, slots2)
	slotsOf[after] = slots2
	c.settleOn(honest, "lab1 and lab2 agreeing on every slot of the second campaign", 120*time.Second, honestCells(after))
	revoked := 0
	for _, d := range honest {
		if v, err := d.ledgerView(); err == nil {
			k := 0
			for _, r := range v.counted {
				if r.campaign == before {
					k++
				}
			}
			why := map[string]int{}
			for id, r := range v.all {
				if _, ok := v.counted[id]; !ok && r.campaign == before {
					why[string(v.excluded[id])]++
				}
			}
			t.Logf("%s counts %d of the first campaign's %d cells; its other honest runs are excluded as %v", d.lab.Name, k, slots, why)
		}
		v, err := d.ledgerView()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range v.counted {
			if r.node == stolen.peerID {
				t.Errorf("%s counts run %s (seed %d) signed by the revoked node", d.lab.Name, r.id, r.seed)
			}
		}
		for _, id := range earlier {
			if _, ok := v.refusedRuns[id]; !ok {
				t.Errorf("%s does not list run %s, signed by the revoked node before its revocation, as refused", d.lab.Name, id)
			}
		}
		// The evidence: the revoked node's later runs that reached this store are listed as
		// refused, saying why.
		for id, why := range v.refusedRuns {
			if !strings.Contains(why, "revoked") {
				t.Errorf("%s refuses run %s for %q, want a revocation", d.lab.Name, id, why)
			}
			revoked++
		}
	}
	t.Logf("revoked node %s of lab %s: none of its runs counts on lab1 and lab2 (%d refused as revoked in their two ledgers, of them %d from before the revocation on each); every one of the %d slots of the later campaign counted, run by lab1 and lab2",
		stolen.peerID, stolenLab, revoked, len(earlier), slots2)
}

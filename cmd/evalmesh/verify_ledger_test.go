package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/verify"
	"github.com/evalmesh/evalmesh/node/vstore"
)

// verifyLedgerRun runs `evalmesh verify-ledger` (with extra flags) as a separate process
// from a fresh home (a reviewer's: no lab, no certificate, no trust file, no key grant)
// against every running node of nodes, and returns its stdout, stderr and exit status.
func (c *cluster) verifyLedgerRun(extra []string, nodes ...*daemonProc) (stdout, stderr string, code int) {
	c.t.Helper()
	fresh := filepath.Join(c.t.TempDir(), "reviewer")
	args := append([]string{"verify-ledger", "--home", fresh, "--executor", "process",
		"--network-doc", c.labs.Nodes[0].Home.NetworkDocPath(), "--heads-wait", "20s"}, extra...)
	for _, d := range nodes {
		args = append(args, "--peer", d.addr+"/p2p/"+d.peerID)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "EVALMESH_TEST_CLI=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// verifyLedgerCLI is verifyLedgerRun with --json: its report and exit status.
func (c *cluster) verifyLedgerCLI(nodes ...*daemonProc) (*verify.Report, int) {
	c.t.Helper()
	stdout, stderr, code := c.verifyLedgerRun([]string{"--json"}, nodes...)
	var rep verify.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		c.t.Fatalf("verify-ledger (exit %d): %v\nstdout:\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	return &rep, code
}

// A reviewer with no lab re-verifies a small campaign of three daemons from the network
// alone: same root as every lab announces, every counted run of the open task re-scored and
// confirmed. The campaign's other task is sealed, its key granted to lab1 and lab2 only (who
// run its slots): the reviewer, granted nothing, cannot re-score those runs and must name
// each one, with why, in --json and in the text output, not skip it; they do not change the
// exit status (0), as the command's help says.
func TestVerifyLedgerFromAFreshHome(t *testing.T) {
	skipShortFaults(t)
	c := newCluster(t, 3)
	sealed := c.startSealed(c.labs.SealGrantedTo, []int{0, 1})
	tasks := append(c.addTasks("arithmetic"), sealed)
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 1)
	v := c.converged(id, slots, 120*time.Second)
	lv := c.settle("every slot counted on every node", 60*time.Second, func(lv ledgerView) bool { return len(lv.counted) == slots })[0]
	sealedRuns := map[string]runInfo{}
	for rid, r := range lv.counted {
		if r.task == sealed {
			sealedRuns[rid] = r
		}
	}
	if len(sealedRuns) != slots/2 {
		t.Fatalf("%d counted runs of the sealed task, want %d (one per agent)", len(sealedRuns), slots/2)
	}
	open := slots - len(sealedRuns)
	sealedWhy := func(reason string) bool {
		return strings.HasPrefix(reason, "sealed task: ") && strings.Contains(reason, "no key grant for bundle "+sealed)
	}

	rep, code := c.verifyLedgerCLI(c.nodes...)
	if code != 0 || !rep.OK {
		t.Fatalf("verify-ledger exit %d, ok %v: %+v", code, rep.OK, rep)
	}
	if rep.LedgerRoot != v.root {
		t.Errorf("recomputed root %s, the daemons' %s", rep.LedgerRoot, v.root)
	}
	if len(rep.Announced) != len(c.nodes) {
		t.Errorf("%d announced roots heard, want one per daemon (%d): %+v", len(rep.Announced), len(c.nodes), rep.Announced)
	}
	for _, a := range rep.Announced {
		if !a.Agrees || a.LedgerRoot != v.root {
			t.Errorf("announced root of %s: %s agrees=%v, want %s", a.PeerID, a.LedgerRoot, a.Agrees, v.root)
		}
	}
	if rep.Counted != slots || rep.Rescored != open || rep.Confirmed != open || len(rep.Disagreements) != 0 {
		t.Errorf("counted %d of %d slots, re-scored %d, confirmed %d: want the %d runs of the open task; disagreements %+v",
			rep.Counted, slots, rep.Rescored, rep.Confirmed, open, rep.Disagreements)
	}
	named := map[string]bool{}
	for _, n := range rep.NotRescored {
		r, ok := sealedRuns[n.Attestation]
		switch {
		case !ok:
			t.Errorf("not re-scored %+v: not a counted run of the sealed task", n)
		case named[n.Attestation]:
			t.Errorf("run %s named twice as not re-scored", n.Attestation)
		case n.Lab != r.lab || !sealedWhy(n.Reason):
			t.Errorf("not re-scored %+v: want lab %s, the reason that this node holds no key grant for %s", n, r.lab, sealed)
		}
		named[n.Attestation] = true
	}
	if len(named) != len(sealedRuns) {
		t.Errorf("%d runs named as not re-scored, want each of the %d counted runs of the sealed task: %+v", len(named), len(sealedRuns), rep.NotRescored)
	}

	text, stderr, code := c.verifyLedgerRun(nil, c.nodes...)
	if code != 0 || !strings.Contains(text, "\nverified ") {
		t.Errorf("verify-ledger (text): exit %d, want 0 and verified:\n%s%s", code, text, stderr)
	}
	for rid, r := range sealedRuns {
		line := fmt.Sprintf("NOT RE-SCORED  %s  lab %s  ", rid, r.lab)
		reason := ""
		if i := strings.Index(text, line); i >= 0 {
			rest, _, _ := strings.Cut(text[i+len(line):], "\n")
			_, reason, _ = strings.Cut(rest, ": ") // the task's name comes first
		}
		if !sealedWhy(reason) {
			t.Errorf("verify-ledger (text) has no line %q…: sealed task: … no key grant for bundle %s:\n%s", line, sealed, text)
		}
	}
	t.Logf("verify-ledger: root %.12s over %d attestations, %d runs re-scored, %d sealed ones named, %.1f s", rep.LedgerRoot, rep.Attestations, rep.Rescored, len(rep.NotRescored), rep.Seconds)
}

// Two trusted labs collude (not defended by the network: docs/design.md §9): lab3 signs
// another run of a cell with the submission an honest lab made and a better score, and
// lab2 signs a re-score confirming it, so every honest daemon counts it. A reviewer's
// verify-ledger gets the same root as the labs announce (the attestations do give it) but
// re-scores the submission itself, names the tampered run and its lab, and exits 2.
func TestVerifyLedgerNamesATamperedResult(t *testing.T) {
	skipShortFaults(t)
	c, tasks := runningCluster(t, "arithmetic")
	id, slots := c.publish(c.nodes[1], tasks, faultAgents, 3)
	c.waitAllDone(c.nodes, id, slots)
	before := c.settle("the honest campaign counted everywhere", 120*time.Second, func(v ledgerView) bool {
		return len(v.counted) == slots
	})[0]
	// A cell another lab ran whose draw the liar wins (attest's fill order: same campaign
	// and attempt, then sha256(slot ‖ attempt ‖ lab)), so its run fills the cell instead.
	// The liar is lab3 or lab2, the colluder the other one.
	draw := func(r runInfo, lab string) [32]byte {
		return sha256.Sum256(fmt.Appendf(nil, "evalmesh/fill/v1\x00%s\x00%s\x00%s\x00%d\x00%d\x00%s", r.campaign, r.task, r.agent, r.seed, 1, lab))
	}
	var target *runInfo
	liar, colluder := 0, 0
	for _, r := range before.counted {
		if r.attempt != 1 || !r.valid || r.score == nil {
			continue
		}
		for _, l := range []int{2, 1} {
			lab := c.labs.Nodes[l].Lab.ID
			if d, h := draw(r, lab), draw(r, r.lab); lab != r.lab && bytes.Compare(d[:], h[:]) < 0 {
				target, liar, colluder = &r, l, 3-l
				break
			}
		}
		if target != nil {
			break
		}
	}
	if target == nil {
		t.Skip("no cell of another lab whose draw lab2 or lab3 wins in this run")
	}
	liarLab, colluderLab := c.labs.Nodes[liar].Lab.ID, c.labs.Nodes[colluder].Lab.ID
	t.Logf("%s fakes the cell %s ran (seed %d), %s confirms it", c.labs.Nodes[liar].Name, target.lab, target.seed, c.labs.Nodes[colluder].Name)
	envs, err := c.nodes[0].client.StoredEnvelopes(context.Background(), vstore.SetAttestations)
	if err != nil {
		t.Fatal(err)
	}
	var honest []byte
	for _, env := range envs {
		if attest.EnvelopeID(env) == target.id {
			honest = env
		}
	}
	e, err := attest.DecodeEnvelope(honest)
	if err != nil {
		t.Fatal(err)
	}
	st, run, _, err := attest.DecodeStatement(e.Payload)
	if err != nil || run == nil {
		t.Fatalf("honest run %s: %v", target.id, err)
	}
	// The tampered run: the honest submission (so anyone can fetch it), lab3's node, a
	// score the submission does not earn.
	key, cert := c.nodeKey(liar)
	liarNode, _ := peer.IDFromPrivateKey(key)
	tampered := *run
	tampered.Node, tampered.Lab = liarNode.String(), liarLab
	better := *run.Score + 0.25
	if *run.Score >= 0.5 {
		better = *run.Score - 0.25
	}
	tampered.Score = &better
	tst, err := attest.NewStatement(st.Subject, attest.PredicateRunV1, tampered)
	if err != nil {
		t.Fatal(err)
	}
	runEnv, tamperedID, err := attest.Sign(key, cert, tst)
	if err != nil {
		t.Fatal(err)
	}
	// lab2's confirming re-score goes out first, so no honest daemon (nor lab2's own) is
	// due to re-score the run when it arrives: the cell's one re-score is in.
	ckey, ccert := c.nodeKey(colluder)
	cnode, _ := peer.IDFromPrivateKey(ckey)
	var sub []attest.Subject
	for _, s := range st.Subject {
		if role, _ := s.Annotations[attest.AnnotationRole].(string); role == attest.RoleSubmission {
			sub = append(sub, s)
		}
	}
	rst, err := attest.NewStatement(sub, attest.PredicateRescoreV1, attest.RescorePredicate{Run: tamperedID, Score: &better, Valid: true,
		Metric: run.Metric, Evaluator: run.Evaluator, Node: cnode.String(), Lab: colluderLab, Time: time.Now().Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	rsEnv, _, err := attest.Sign(ckey, ccert, rst)
	if err != nil {
		t.Fatal(err)
	}
	rsDir, runDir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(rsDir, "rescore.json"), rsEnv, 0o644)
	os.WriteFile(filepath.Join(runDir, "run.json"), runEnv, 0o644)
	c.importInto(c.nodes[liar], rsDir)
	c.settle("the colluding re-score stored everywhere", 60*time.Second, func(v ledgerView) bool { return v.envelopes == before.envelopes+1 })
	c.importInto(c.nodes[liar], runDir)
	views := c.settle("the tampered run counted by every daemon", 120*time.Second, func(v ledgerView) bool {
		_, ok := v.counted[tamperedID]
		return ok
	})
	if _, still := views[0].counted[target.id]; still {
		t.Fatalf("the honest run %s still counts beside the tampered one", target.id)
	}

	rep, code := c.verifyLedgerCLI(c.nodes...)
	if code != 2 || rep.OK {
		t.Errorf("verify-ledger exit %d, ok %v: want exit 2 for a counted run it does not reproduce", code, rep.OK)
	}
	// The guarantee is that the recomputed root is the one every lab node announces over the
	// same attestations (RootsAgree). It equals the root of the settled views unless an
	// envelope arrived after them (under load a re-scorer lab that stays silent past
	// --rescore-timeout is joined by the next one, whose late re-score moves every root):
	// then the daemons' root must have moved to it.
	if !rep.RootsAgree {
		t.Errorf("recomputed root %s, announced %+v: the attestations must give the labs' root", rep.LedgerRoot, rep.Announced)
	}
	if rep.LedgerRoot != views[0].root {
		now := c.settle("the daemons' root after verify-ledger", 60*time.Second, func(ledgerView) bool { return true })[0]
		if now.root != rep.LedgerRoot || now.envelopes == views[0].envelopes {
			t.Errorf("recomputed root %s over %d attestations; the daemons' %s over %d, now %s over %d", rep.LedgerRoot, rep.Attestations,
				views[0].root, views[0].envelopes, now.root, now.envelopes)
		}
		t.Logf("an envelope arrived after the settled views (%d → %d attestations): verify-ledger recomputed the daemons' new root", views[0].envelopes, now.envelopes)
	}
	if len(rep.Disagreements) != 1 {
		t.Fatalf("disagreements %+v: want exactly the tampered run %s", rep.Disagreements, tamperedID)
	}
	d := rep.Disagreements[0]
	if d.Attestation != tamperedID || d.Lab != liarLab || d.Attested == nil || *d.Attested != better || d.Rescored == nil || *d.Rescored != *run.Score {
		t.Errorf("disagreement %+v: want run %s of %s, attested %v, re-scored %v", d, tamperedID, liarLab, better, *run.Score)
	}
	if rep.Confirmed != rep.Counted-1 {
		t.Errorf("%d of %d counted runs confirmed: every honest one should be", rep.Confirmed, rep.Counted)
	}
}

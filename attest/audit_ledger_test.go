package attest

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// audit signs lab's audit of the run named run, with result submission (and the run's GPU
// model unless gpu says otherwise).
func (w *acceptWorld) audit(name string, lab int, run string, submission, gpu string) {
	w.t.Helper()
	f := w.labs[lab]
	w.auditBy(name, f.node, nil, f.cert, run, submission, gpu)
}

// auditResult signs lab's audit of the run named run with the given result.
func (w *acceptWorld) auditResult(name string, lab int, run string, res AuditResult) {
	w.t.Helper()
	f := w.labs[lab]
	w.signAudit(name, f.node, nil, f.cert, run, res)
}

// auditBy signs an audit of the run named run by the node of node and cert, drawn with
// drawKey (nil: the node's key).
func (w *acceptWorld) auditBy(name string, node, drawKey crypto.PrivKey, cert *NodeCert, run string, submission, gpu string) {
	w.t.Helper()
	w.signAudit(name, node, drawKey, cert, run, AuditResult{Submission: sha(submission), Valid: true, Score: ptr(0.5), GPUModel: gpu})
}

// signAudit signs an audit of the run named run with result res by node and cert, drawn
// with drawKey (nil: the node's key).
func (w *acceptWorld) signAudit(name string, node, drawKey crypto.PrivKey, cert *NodeCert, run string, res AuditResult) {
	w.t.Helper()
	id, ok := w.ids[run]
	if !ok {
		w.t.Fatalf("audit of unknown run %q", run)
	}
	runner := w.labs[0]
	for _, f := range w.labs {
		if v, err := Verify(w.envs[run], w.trust, t0); err == nil && v.Lab == f.lab.ID {
			runner = f
		}
	}
	a := AuditPredicate{Run: id, Slot: Slot{Campaign: "bafycampaign", Task: "bafytask", Agent: "bafyagent", Seed: 0}, Attempt: 1,
		RunLab: runner.lab.ID, Result: res, Verdict: VerdictMatch}
	env, _, err := NewAudit(node, drawKey, cert, a, t0.Add(-time.Minute))
	if err != nil {
		w.t.Fatal(err)
	}
	w.put(name, env)
}

const h200 = "NVIDIA H200"

func auditPolicy(deterministic bool) AcceptPolicy {
	w := CampaignWindow{Created: t0.Add(-24 * time.Hour), Deadline: t0.Add(24 * time.Hour), Agents: []string{"bafyagent"}}
	if deterministic {
		w.Deterministic = []string{"bafyagent"}
	}
	return AcceptPolicy{SetAsideOffenders: true, AllowProcessRuns: true, Audits: &AuditRules{},
		Campaigns: map[string]CampaignWindow{"bafycampaign": w}}
}

// The ledger's audit rule, as a dishonest runner (lab 0) meets it: a deterministic run
// that two other labs re-ran to another submission is proof (misconduct of its lab, whose
// results are set aside); one such lab alone holds the run; a match clears it; a
// dishonest auditor's lone mismatch against two matches frames nobody; another GPU model or
// a stochastic agent decides nothing; and without ledger.audits nothing changes. The
// ledger judges the result itself: the auditor's own verdict field is not read.
func TestAcceptAppliesAudits(t *testing.T) {
	w := newAcceptWorld(t, 4)
	w.run("fab", 0, "bafytask", "bafyagent", 0, "from-labels", 1, 1)
	w.run("other", 0, "bafytask", "bafyagent2", 0, "s", 0.4, 1)
	w.run("honest", 1, "bafytask", "bafyagent", 1, "t", 0.3, 1)

	count := func(vs []*Verified, p AcceptPolicy) (map[string]bool, map[string]ExcludeReason, []Misconduct) {
		o := Reconcile(vs, Agree)
		results, excluded := Accept(o, p)
		in := map[string]bool{}
		for _, r := range results {
			in[w.nameOf(r.AttestationID)] = true
		}
		ex := map[string]ExcludeReason{}
		for _, e := range excluded {
			ex[w.nameOf(e.ID)] = e.Reason
		}
		return in, ex, AuditMisconduct(o, p)
	}

	// One honest auditor finds the agent's own submission: held, not proof.
	w.audit("a1", 1, "fab", "agent-output", h200)
	in, ex, mis := count(w.verified(), auditPolicy(true))
	if ex["fab"] != ExcludeAuditHeld || len(mis) != 0 || !in["other"] || !in["honest"] {
		t.Fatalf("one mismatch: counted %v excluded %v misconduct %v; want fab held, nothing proven", in, ex, mis)
	}
	// The escalated auditor agrees: proof; the runner's lab is set aside.
	w.audit("a2", 2, "fab", "agent-output", h200)
	in, ex, mis = count(w.verified(), auditPolicy(true))
	if len(mis) != 1 || mis[0].Kind != MisconductFabricated || w.nameOf(mis[0].Evidence) != "fab" || mis[0].Principal != w.labs[0].lab.ID {
		t.Fatalf("two mismatches: misconduct %+v, want fab's lab proven", mis)
	}
	if in["fab"] || in["other"] || ex["other"] != ExcludeOffender || !in["honest"] {
		t.Fatalf("two mismatches: counted %v excluded %v; want lab 0 set aside, lab 1 counted", in, ex)
	}
	// The rule removed (no ledger.audits): the same set counts the fabricated run.
	off := auditPolicy(true)
	off.Audits = nil
	if in, _, mis := count(w.verified(), off); !in["fab"] || len(mis) != 0 {
		t.Fatalf("audits off: counted %v misconduct %v; want fab counted as before", in, mis)
	}
	// Another GPU model, or an agent not declared deterministic: inconclusive, counted.
	if in, _, mis := count(w.verified(), auditPolicy(false)); !in["fab"] || len(mis) != 0 {
		t.Fatalf("stochastic agent: counted %v misconduct %v", in, mis)
	}

	// A dishonest auditor (lab 3) against a run two honest labs reproduced frames nobody.
	w2 := newAcceptWorld(t, 4)
	w2.run("r", 0, "bafytask", "bafyagent", 0, "out", 0.5, 1)
	w2.audit("m1", 1, "r", "out", h200)
	w2.audit("m2", 2, "r", "out", h200)
	w2.audit("liar", 3, "r", "framed", h200)
	w2.audit("gpu", 1, "r", "elsewhere", "NVIDIA A100") // inconclusive: another GPU model
	o := Reconcile(w2.verified(), Agree)
	results, _ := Accept(o, auditPolicy(true))
	if len(results) != 1 || len(AuditMisconduct(o, auditPolicy(true))) != 0 {
		t.Fatalf("framing by one lab: results %+v misconduct %+v", results, AuditMisconduct(o, auditPolicy(true)))
	}
	recs := AuditRecords(o, auditPolicy(true))
	if len(recs) != 4 || recs[0].Outcome != "cleared" {
		t.Fatalf("audit records %+v: want 4, the run cleared", recs)
	}
}

package mesh

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/agentspec"
	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/dashboard"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
)

// Audits by re-execution, carried out (the decisions are protocol.Coordinator's,
// coordinator_audit.go): the node computes its VRF draw for each verified run of another
// lab with its lab's draw key, or its node key where the lab has none (the coordinator
// takes it as a value), re-executes the runs the
// coordinator asks for with the ordinary run path (runner.Request.Audit: the same agent
// image by ID, bundle and seed, nothing signed as a run), and signs and stores an audit
// (attest.NewAudit), which the store gossips like any attestation. Runs on the loop except
// the re-execution itself, which has a goroutine of its own.

// auditDraw gives the coordinator this node's draw for run id of another lab (on the loop).
func (m *Mesh) auditDraw(id string, run *attest.RunPredicate) {
	if !m.coord.AuditsOn() || run.Lab == "" || run.Lab == m.lab {
		return
	}
	_, beta, err := attest.AuditDraw(m.opts.Runner.Drawer(), run.Slot, max(run.Attempt, 1), run.Lab)
	if err != nil {
		m.opts.Logf("mesh: audit draw for %s: %v", id, err)
		return
	}
	m.apply(m.coord.AuditCandidate(protocol.AuditCandidate{Run: id, Beta: beta}, m.opts.Now()))
}

// AuditsPending is how many audits this node still owes (protocol.Coordinator.AuditsPending).
func (m *Mesh) AuditsPending(ctx context.Context) (int, error) {
	var n int
	err := m.query(ctx, func() { n = m.coord.AuditsPending() })
	return n, err
}

// startAudit re-executes and audits a run, as the coordinator asked, on its own goroutine.
func (m *Mesh) startAudit(ar protocol.AuditRun) {
	var spec *agentspec.Spec
	if mc := m.campaigns[ar.Slot.Campaign]; mc != nil {
		spec = mc.agents[ar.Slot.Agent]
	}
	rec, ok := m.runs[ar.Run]
	if spec == nil || !ok {
		m.opts.Logf("mesh: audit of %s: its run or agent spec is not here", ar.Run)
		m.apply(m.coord.AuditEnded(ar.Run, false, m.opts.Now()))
		return
	}
	r := *rec
	m.opts.Logf("mesh: auditing run %s of %s (slot %s attempt %d, %s)", ar.Run, ar.RunLab, ar.SlotID, ar.Attempt, auditWhy(ar))
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.audits.waitGate()
		id, verdict, err := m.audits.reexecute(m.ctx, ar, &r, spec)
		if err != nil && m.ctx.Err() == nil {
			m.opts.Logf("mesh: audit of %s: %v (retried later)", ar.Run, err)
		} else if err == nil {
			m.opts.Logf("mesh: audit %s of run %s: %s", id, ar.Run, verdict)
		}
		m.do(func() { m.apply(m.coord.AuditEnded(ar.Run, err == nil, m.opts.Now())) })
	}()
}

func auditWhy(ar protocol.AuditRun) string {
	if ar.Escalated {
		return "escalated: a lone mismatch"
	}
	if ar.Held {
		return fmt.Sprintf("held by the ledger as a mover, drawn at λ %.3g", ar.Lambda)
	}
	return fmt.Sprintf("drawn at λ %.3g", ar.Lambda)
}

// auditEvidence is the ledger's judged audits for the dashboard's evidence page, by
// audited lab, and how many runs each lab audited.
func auditEvidence(recs []attest.AuditRecord, labName func(string) string) []dashboard.AuditEvidence {
	out := make([]dashboard.AuditEvidence, 0, len(recs))
	for _, r := range recs {
		out = append(out, dashboard.AuditEvidence{ID: r.ID, Run: r.Run, RunLab: r.RunLab, RunLabName: labName(r.RunLab),
			Auditor: r.Lab, AuditorName: labName(r.Lab), Verdict: r.Verdict, Reason: r.Reason, Outcome: r.Outcome})
	}
	slices.SortStableFunc(out, func(a, b dashboard.AuditEvidence) int { return cmp.Compare(a.RunLab, b.RunLab) })
	return out
}

// auditHeld passes the runs the node's ledger holds as movers (the report's held groups) to
// the coordinator, which draws their audits (on the loop; the ledger decided them).
func (m *Mesh) auditHeld(rep *attest.LedgerReport) {
	if !m.coord.AuditsOn() {
		return
	}
	var runs []string
	for _, g := range rep.Held {
		runs = append(runs, g.Runs...)
	}
	m.apply(m.coord.AuditHeld(runs, m.opts.Now()))
}

// heldEvidence is the ledger's held movers for the dashboard's evidence page, by lab (the
// report's order: lab, then agent).
func heldEvidence(hs []attest.HeldGroup, labName func(string) string) []dashboard.HeldEvidence {
	out := make([]dashboard.HeldEvidence, 0, len(hs))
	for _, h := range hs {
		out = append(out, dashboard.HeldEvidence{Lab: h.Lab, LabName: labName(h.Lab), Agent: h.Agent, Runs: h.Runs, MovesRank: h.MovesRank, Shift: h.Shift})
	}
	return out
}

// auditor re-executes the runs the coordinator draws for audit and signs their audits, on
// each audit's goroutine (startAudit); it has no state of its own besides shared's and the
// test-only gate (Options.TestAuditGate), which it polls.
type auditor struct {
	*shared
	objects *objects
}

// reexecute re-executes run r as ar says and signs and stores the audit; it returns the
// audit's ID and verdict.
func (a *auditor) reexecute(ctx context.Context, ar protocol.AuditRun, r *runRecord, spec *agentspec.Spec) (string, string, error) {
	e, err := attest.DecodeEnvelope(r.Envelope)
	if err != nil {
		return "", "", err
	}
	runSt, run, _, err := attest.DecodeStatement(e.Payload)
	if err != nil || run == nil {
		return "", "", fmt.Errorf("%s is not a run attestation", r.ID)
	}
	dir, err := a.objects.bundleDir(ctx, ar.Slot.Task)
	if err != nil {
		return "", "", err
	}
	if err := a.node.EnsureAgentImage(ctx, spec); err != nil {
		return "", "", err
	}
	o, err := a.opts.Runner.Run(ctx, runner.Request{TaskDir: dir, TaskCID: ar.Slot.Task, Agent: spec, Seed: ar.Slot.Seed,
		Campaign: ar.Slot.Campaign, Attempt: ar.Attempt, Audit: true})
	if err != nil {
		return "", "", fmt.Errorf("re-execution: %w", err)
	}
	st, err := attest.ParseStatement(o.Statement)
	if err != nil {
		return "", "", err
	}
	res := attest.AuditResult{Submission: st.SubmissionDigest(), Valid: o.Valid, Score: o.Score, Exit: o.Predicate.Exit,
		GPUModel: o.Predicate.Hardware.GPUModel, Transcript: attest.AuditTranscriptShape(st)}
	if !res.Valid {
		res.Score = nil
	}
	// The verdict the ledger will judge, so the signed one (which drives escalation)
	// agrees with it.
	verdict, reason := attest.JudgeAudit(runSt, run.Hardware.GPUModel, spec.Deterministic, res)
	env, id, err := attest.NewAudit(a.opts.Runner.Key, a.opts.Runner.DrawKey, a.opts.Runner.CurrentCert(), attest.AuditPredicate{Run: r.ID, Slot: ar.Slot,
		Attempt: ar.Attempt, RunLab: ar.RunLab, Result: res, Verdict: verdict, Reason: reason}, a.opts.Now())
	if err != nil {
		return "", "", err
	}
	added, err := a.store.Attestations().Add([][]byte{env}, vstore.SourceLocal, "")
	if err != nil {
		return "", "", err
	}
	if len(added) == 1 && added[0].Status == vstore.StatusRefused {
		return "", "", fmt.Errorf("own audit refused by the store: %s %s", added[0].Reason, added[0].Detail)
	}
	return id, verdict, nil
}

// waitGate waits while the test-only gate file exists (Options.TestAuditGate), or
// until the mesh stops. Off the loop.
func (a *auditor) waitGate() {
	g := a.opts.TestAuditGate
	if g == "" {
		return
	}
	t := a.opts.Clock.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(g); err != nil {
			return
		}
		select {
		case <-a.ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

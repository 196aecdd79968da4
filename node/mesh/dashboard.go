package mesh

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/node/api"
	"github.com/evalmesh/evalmesh/node/dashboard"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// runDetail is what the dashboard shows of a run beyond what the claim machine needs,
// taken from its attestation once, when it arrives.
type runDetail struct {
	Campaign      string
	InvalidReason string
	ExitCode      int
	ExitReason    string
	Wall, GPU     float64
	Energy        float64
	End           time.Time
	LogCID        string
	// Objects are the CID subjects (submission, logs, verdicts): the dashboard shows who
	// holds them (node/dashboard.go).
	Objects []dashboard.Pin
	// TranscriptCID and Transcript are the run's transcript subject and its attested shape.
	TranscriptCID string
	Transcript    attest.TranscriptShape
	// ScoreAbsent: the runner signed no score; its task's scoring labs judge it.
	ScoreAbsent bool
}

func runDetailOf(st *attest.Statement, run *attest.RunPredicate) runDetail {
	d := runDetail{Campaign: run.Slot.Campaign, InvalidReason: run.InvalidReason, ExitCode: run.Exit.Code,
		ExitReason: exitReason(run.Exit), Wall: run.WallSeconds, GPU: run.GPUSeconds, Energy: run.EnergyJoules, End: run.End,
		ScoreAbsent: run.ScoreAbsent}
	for _, s := range st.Subject {
		role, _ := s.Annotations[attest.AnnotationRole].(string)
		c, _ := s.Annotations[attest.AnnotationCID].(string)
		if role == attest.RoleLogs {
			d.LogCID = c
		}
		if c != "" {
			d.Objects = append(d.Objects, dashboard.Pin{CID: c, What: role})
		}
	}
	if shape, c, ok := attest.TranscriptShapeOf(st); ok {
		d.TranscriptCID, d.Transcript = c, shape
	}
	return d
}

func exitReason(e attest.ExitStatus) string {
	switch {
	case e.Reason != "":
		return e.Reason
	case e.TimedOut:
		return "timed out"
	case e.OOMKilled:
		return "out of memory"
	case e.Signal != 0:
		return fmt.Sprintf("signal %d", e.Signal)
	}
	return ""
}

// DashboardState fills the mesh's part of a dashboard snapshot, copied on the loop (a
// read-only hook: it changes nothing). Runs are newest first; names come from the campaigns.
func (m *Mesh) DashboardState(ctx context.Context, s *dashboard.Snapshot) error {
	labName := func(id string) string {
		name, _ := m.opts.Trust.LabName(id)
		return name
	}
	if err := m.query(ctx, func() { m.dashboardTables(s, labName) }); err != nil {
		return err
	}
	sortSnapshot(s)
	if ml := m.Ledger(); ml != nil {
		addLedger(s, ml, labName)
	}
	return nil
}

// dashboardTables copies the campaigns, their tasks and the runs into s. On the loop.
func (m *Mesh) dashboardTables(s *dashboard.Snapshot, labName func(string) string) {
	// The ledger's names: one per bundle and per agent spec, qualified where names collide.
	names := protocol.NamesOf(m.ledgerCampaigns())
	taskName, agentName := names.TaskNames, names.AgentNames
	seenTask := map[string]bool{}
	for _, mc := range m.campaigns {
		st, _ := m.coord.Status(mc.v.ID, m.opts.Now())
		info := mc.info(m.coord.Ready(mc.v.ID))
		s.Campaigns = append(s.Campaigns, dashboard.Campaign{ID: info.ID, Title: info.Title, Lab: info.Lab, LabName: info.LabName,
			Tasks: info.Tasks, Agents: info.Agents, Seeds: info.Seeds, Replication: info.Replication, Created: info.Created,
			Deadline: info.Deadline, Ready: info.Ready, Status: st})
		for c, meta := range mc.tasks {
			if name := taskName[c]; !seenTask[name] {
				seenTask[name] = true
				s.Tasks = append(s.Tasks, dashboard.Task{Name: name, CID: c, Metric: meta.Metric.Name,
					LowerIsBetter: meta.Metric.LowerIsBetter, SOTA: meta.SOTA.Score, Optimum: meta.Metric.OptimalScore})
			}
		}
	}
	s.Runs = make([]dashboard.Run, 0, len(m.runs))
	for _, r := range m.runs {
		d := r.Detail
		s.Runs = append(s.Runs, dashboard.Run{ID: r.ID, Campaign: d.Campaign, Task: taskName[r.Slot.Task], Agent: agentName[r.Slot.Agent],
			Seed: r.Slot.Seed, PeerID: r.Node, Lab: r.Lab, LabName: labName(r.Lab), Attempt: r.Attempt, Valid: r.Valid, Score: r.Score,
			InvalidReason: d.InvalidReason, ExitCode: d.ExitCode, ExitReason: d.ExitReason, WallSeconds: d.Wall, GPUSeconds: d.GPU,
			EnergyJoules: d.Energy, End: d.End, LogCID: d.LogCID, Pins: slices.Clone(d.Objects), Rescores: len(m.rescores[r.ID]),
			TranscriptCID: d.TranscriptCID, ModelCalls: d.Transcript.Calls, PromptTokens: d.Transcript.PromptTokens,
			CompletionTokens: d.Transcript.CompletionTokens, Unscored: d.ScoreAbsent})
	}
}

// sortSnapshot orders s's campaigns and runs newest first, its tasks by name.
func sortSnapshot(s *dashboard.Snapshot) {
	slices.SortFunc(s.Campaigns, func(a, b dashboard.Campaign) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	slices.SortFunc(s.Tasks, func(a, b dashboard.Task) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Runs, func(a, b dashboard.Run) int {
		if c := b.End.Compare(a.End); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// addLedger fills s's ledger part from ml: the ledger, each run as it judged it, and the
// evidence.
func addLedger(s *dashboard.Snapshot, ml *api.MeshLedger, labName func(string) string) {
	s.Ledger, s.LedgerRoot, s.LedgerAt, s.Attestations = ml.Ledger, ml.Root, ml.At, ml.Attestations
	excluded := map[string]attest.Excluded{}
	var verdicts map[string]scoring.Result
	if ml.Report != nil {
		for _, e := range ml.Report.Excluded {
			excluded[e.ID] = e
		}
		verdicts = ml.Report.Verdicts
	}
	byID := judgeRuns(s.Runs, verdicts, excluded)
	if ml.Report != nil {
		for _, mi := range ml.Report.Misconduct {
			s.Evidence.Misconduct = append(s.Evidence.Misconduct, dashboard.Misconduct{Principal: mi.Principal, LabName: labName(mi.Principal),
				Kind: string(mi.Kind), Evidence: mi.Evidence, Run: mi.Run, Detail: mi.Detail, SetAside: mi.SetAside})
		}
		s.Evidence.Audits = auditEvidence(ml.Report.Audits, labName) // audit.go
		s.Evidence.Held = heldEvidence(ml.Report.Held, labName)
	}
	for _, e := range sortedExcluded(excluded) {
		x := dashboard.Exclusion{ID: e.ID, Seed: e.Slot.Seed, Principal: e.Principal, Reason: string(e.Reason), Detail: e.Detail}
		if r := byID[e.ID]; r != nil {
			x.Task, x.Agent = r.Task, r.Agent
		}
		switch e.Reason {
		case attest.ExcludeEquivocation:
			s.Evidence.Equivocations = append(s.Evidence.Equivocations, x)
		case attest.ExcludeDisputed:
			s.Evidence.Disputed = append(s.Evidence.Disputed, x)
		}
	}
}

// judgeRuns marks each run as the ledger judged it (its scoring labs' verdict on an
// unscored run, its exclusion, or counted); it returns the runs by ID.
func judgeRuns(runs []dashboard.Run, verdicts map[string]scoring.Result, excluded map[string]attest.Excluded) map[string]*dashboard.Run {
	byID := map[string]*dashboard.Run{}
	for i := range runs {
		r := &runs[i]
		byID[r.ID] = r
		if v, ok := verdicts[r.ID]; ok {
			// Signed without a score: the run is what its scoring labs found.
			r.Valid, r.Score = v.Status == scoring.StatusSuccess && v.Score != nil, v.Score
			if !r.Valid {
				r.InvalidReason = v.Status
			}
		}
		if e, ok := excluded[r.ID]; ok {
			r.Excluded = string(e.Reason)
		} else {
			// Accept lists every run attestation that does not count; the rest count, if
			// the ledger knows their task and agent.
			r.Counted = r.Task != "" && r.Agent != ""
		}
	}
	return byID
}

func sortedExcluded(m map[string]attest.Excluded) []attest.Excluded {
	out := make([]attest.Excluded, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b attest.Excluded) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

package dashboard

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

// Snapshot is what the dashboard shows, as one node sees it at one moment. It holds only
// what the network already shares (signed attestations, campaigns, heads): no private
// label, key, or path of the node's machine (docs/api.md, "what an exposed dashboard
// reveals"). Peer IDs and lab IDs are public identities on the network.
type Snapshot struct {
	Network string `json:"network"`
	// NetworkDoc is the hash of the network document the node runs (what `evalmesh network
	// hash` prints and heads announce); "" when the node runs without one.
	NetworkDoc string    `json:"network_doc"`
	PeerID     string    `json:"peer_id"` // the node serving the dashboard
	Lab        string    `json:"lab"`
	LabName    string    `json:"lab_name"`
	At         time.Time `json:"at"`
	// Ledger is the last ledger the node computed (nil before the first); LedgerRoot its
	// root and LedgerAt when it was computed, Attestations the set it was computed over.
	Ledger       *scoring.Ledger `json:"-"`
	LedgerRoot   string          `json:"ledger_root"`
	LedgerAt     time.Time       `json:"ledger_at"`
	Attestations int             `json:"attestations"`
	// Tasks are the campaigns' tasks, by name (the ledger's key).
	Tasks     []Task     `json:"tasks"`
	Campaigns []Campaign `json:"campaigns"`
	// Runs are every run attestation the node holds, newest first.
	Runs     []Run    `json:"runs"`
	Peers    []Peer   `json:"peers"`
	Evidence Evidence `json:"evidence"`
}

// Task is one task as its campaign names it.
type Task struct {
	Name          string  `json:"name"`
	CID           string  `json:"cid"`
	Metric        string  `json:"metric"`
	LowerIsBetter bool    `json:"lower_is_better"`
	SOTA          float64 `json:"sota"`
	Optimum       float64 `json:"optimum"`
	// Pin is who holds the task's bundle (nil before the node's first repair round).
	Pin *Pin `json:"pin,omitempty"`
}

// Pin is who holds one object a counted result depends on, as the node's last repair round
// decided it: the decision `evalmesh pin status CID` shows (protocol.PinStatus, over the
// labs whose holding counts; docs/protocol-sync.md §8).
type Pin struct {
	CID  string `json:"cid"`
	What string `json:"what"` // bundle, submission, logs, verdicts
	// Factor is how many labs must hold it; 0 when no repair round has covered it yet
	// (the round runs every 5 s; an object that just arrived waits for the next).
	Factor int `json:"factor"`
	// Holding are the names of the labs that hold it and count (for a sealed bundle, the
	// labs granted its key), in the order that decides who must hold it.
	Holding []string `json:"holding"`
	Met     bool     `json:"met"`
}

// Campaign is one campaign and its slot progress.
type Campaign struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	Lab         string    `json:"lab"`
	LabName     string    `json:"lab_name"`
	Tasks       int       `json:"tasks"`
	Agents      int       `json:"agents"`
	Seeds       int       `json:"seeds"`
	Replication int       `json:"replication"`
	Created     time.Time `json:"created"`
	Deadline    time.Time `json:"deadline"`
	Ready       bool      `json:"ready"`
	// Status counts the slots (done, running, claimed, unclaimed, failed, awaiting a key).
	Status protocol.CampaignStatus `json:"status"`
}

// Run is one run attestation.
type Run struct {
	ID       string `json:"attestation_id"`
	Campaign string `json:"campaign"`
	Task     string `json:"task"`  // task name ("" when its campaign's bundle is not held)
	Agent    string `json:"agent"` // agent name
	Seed     int    `json:"seed"`
	PeerID   string `json:"peer_id"`
	Lab      string `json:"lab"`
	LabName  string `json:"lab_name"`
	Attempt  int    `json:"attempt"`
	Valid    bool   `json:"valid"`
	// Unscored: the runner signed no score (it holds no labels); Valid, Score and
	// InvalidReason are then its scoring labs' verdict once the ledger counts it, and the
	// run is neither valid nor a failure until then.
	Unscored bool `json:"unscored,omitempty"`
	// Score is the raw metric value (nil when invalid); InvalidReason says why.
	Score         *float64  `json:"score"`
	InvalidReason string    `json:"invalid_reason,omitempty"`
	ExitReason    string    `json:"exit_reason,omitempty"`
	ExitCode      int       `json:"exit_code"`
	WallSeconds   float64   `json:"wall_seconds"`
	GPUSeconds    float64   `json:"gpu_seconds"`
	EnergyJoules  float64   `json:"energy_joules"`
	End           time.Time `json:"end"`
	// LogCID is the log archive's CID ("" when the run has none); LogsHere says whether
	// this node holds it (the run's own node does; others fetch it only to re-score).
	LogCID   string `json:"log_cid,omitempty"`
	LogsHere bool   `json:"logs_here"`
	// TranscriptCID is the run's transcript (the agent's traffic with its model; "" for a
	// run without one) and its attested totals; TranscriptHere whether this node holds it.
	TranscriptCID    string `json:"transcript_cid,omitempty"`
	TranscriptHere   bool   `json:"transcript_here,omitempty"`
	ModelCalls       int    `json:"model_calls,omitempty"`
	PromptTokens     int64  `json:"prompt_tokens,omitempty"`
	CompletionTokens int64  `json:"completion_tokens,omitempty"`
	Rescores         int    `json:"rescores"`
	// Pins are who holds each object the run's attestation names (submission, logs,
	// verdicts), as Task.Pin.
	Pins []Pin `json:"pins,omitempty"`
	// Counted is whether the ledger counts this run; Excluded says why not.
	Counted  bool   `json:"counted"`
	Excluded string `json:"excluded,omitempty"`
}

// Peer is one peer's last head and whether it agrees with ours.
type Peer struct {
	PeerID       string    `json:"peer_id"`
	Lab          string    `json:"lab"`
	LabName      string    `json:"lab_name"`
	LedgerRoot   string    `json:"ledger_root"`
	Attestations int       `json:"attestations"`
	Agrees       bool      `json:"agrees"`
	Status       string    `json:"status"`
	LastHeard    time.Time `json:"last_heard"`
}

// Evidence is what the node holds against someone: runs excluded for equivocation or a
// disagreeing re-score, and envelopes its store refused.
type Evidence struct {
	Equivocations []Exclusion `json:"equivocations"`
	Disputed      []Exclusion `json:"disputed"`
	Refused       []Refusal   `json:"refused"`
	// Misconduct is proof against a lab (attest.ProvenMisconduct), per piece of evidence,
	// and whether the network document's consequence (its results set aside) applies.
	Misconduct []Misconduct `json:"misconduct"`
	// Audits are the audits by re-execution of counted runs, as the ledger judged them,
	// grouped by audited lab (where the network audits; attest.AuditRecord).
	Audits []AuditEvidence `json:"audits,omitempty"`
	// Held are the (lab, agent) groups whose unaudited results would move their agent's rank
	// and do not count until audits clear them (suspicion, not proof; attest.HeldGroup), by lab.
	Held []HeldEvidence `json:"held,omitempty"`
}

// HeldEvidence is one lab's results of one agent held as movers until audited.
type HeldEvidence struct {
	Lab       string   `json:"lab"`
	LabName   string   `json:"lab_name"`
	Agent     string   `json:"agent"`
	Runs      []string `json:"runs"`
	MovesRank bool     `json:"moves_rank"` // else a pivotal group's outliers
	Shift     float64  `json:"shift"`      // on the agent's mean normalized score
}

// AuditEvidence is one audit of a run: who re-ran whose run, and what the ledger found.
type AuditEvidence struct {
	ID          string `json:"id"`
	Run         string `json:"run"`
	RunLab      string `json:"run_lab"`
	RunLabName  string `json:"run_lab_name"`
	Auditor     string `json:"auditor"`
	AuditorName string `json:"auditor_name"`
	Verdict     string `json:"verdict"`
	Reason      string `json:"reason,omitempty"`
	Outcome     string `json:"outcome"` // the run's audits together: open, cleared or proven
}

// Misconduct is one piece of proof that a lab misbehaved.
type Misconduct struct {
	Principal string `json:"principal"`
	LabName   string `json:"lab_name"`
	Kind      string `json:"kind"`
	Evidence  string `json:"evidence"` // the offending envelope's ID
	Run       string `json:"run,omitempty"`
	Detail    string `json:"detail"`
	SetAside  bool   `json:"set_aside"` // the lab's results are set aside for it
}

// Exclusion is one run the ledger does not count, and why.
type Exclusion struct {
	ID        string `json:"attestation_id"`
	Task      string `json:"task"`
	Agent     string `json:"agent"`
	Seed      int    `json:"seed"`
	Principal string `json:"principal"`
	Reason    string `json:"reason"`
	Detail    string `json:"detail,omitempty"`
}

// Refusal is one envelope the store refused (its origin is not shown: for an import it is
// a file of the node's machine).
type Refusal struct {
	ID     string    `json:"id"`
	Set    string    `json:"set"`
	Reason string    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
	Source string    `json:"source"`
	Time   time.Time `json:"time"`
}

// LeaderRow is one leaderboard row.
type LeaderRow struct {
	Rank                int         `json:"rank"`
	Agent               string      `json:"agent"`
	Elo                 float64     `json:"elo"`
	EloCI               [2]float64  `json:"elo_ci"`
	NormalizedScore     *float64    `json:"normalized_score"`
	NormalizedScoreCI   *[2]float64 `json:"normalized_score_ci"`
	ValidSubmissionRate *float64    `json:"valid_submission_rate"`
	Runs                int         `json:"runs"`
	// Reference marks the SOTA player (Elo only).
	Reference bool `json:"reference"`
}

// Leaderboard is /api/v1/leaderboard.
type Leaderboard struct {
	Network      string      `json:"network"`
	NetworkDoc   string      `json:"network_doc"`
	LedgerRoot   string      `json:"ledger_root"`
	LedgerAt     time.Time   `json:"ledger_at"`
	Attestations int         `json:"attestations"`
	EloFit       string      `json:"elo_fit"`
	Rows         []LeaderRow `json:"rows"`
	// Heureka is the ledger's HeurekaBench table (per agent OEQ correctness 1–5, MCQ
	// accuracy, recall, precision, Elo over OEQ), absent when no HeurekaBench run counts.
	Heureka *scoring.HeurekaTable `json:"heureka,omitempty"`
}

// sotaPlayer is the ledger's name for the reference player.
const sotaPlayer = "sota"

// Leaderboard returns the rows in the ledger's order (best Elo first; rank by Chatbot
// Arena's rule, computed by package scoring).
func (s *Snapshot) Leaderboard() Leaderboard {
	lb := Leaderboard{Network: s.Network, NetworkDoc: s.NetworkDoc, LedgerRoot: s.LedgerRoot, LedgerAt: s.LedgerAt, Attestations: s.Attestations, Rows: []LeaderRow{}}
	if s.Ledger == nil {
		return lb
	}
	lb.EloFit = s.Ledger.EloFit
	lb.Heureka = s.Ledger.Heureka
	for _, a := range s.Ledger.Agents {
		lb.Rows = append(lb.Rows, LeaderRow{Rank: a.Rank, Agent: a.Agent, Elo: a.Elo, EloCI: a.EloCI,
			NormalizedScore: a.NormalizedScore, NormalizedScoreCI: a.NormalizedScoreCI,
			ValidSubmissionRate: a.ValidSubmissionRate, Runs: a.Runs, Reference: a.Agent == sotaPlayer && a.NormalizedScore == nil})
	}
	return lb
}

// Heatmap is /api/v1/heatmap: the mean normalized score of each (agent, task) over the
// counted seeds, as AIRS-Bench's summary figure. Agents in leaderboard order, tasks by name.
type Heatmap struct {
	LedgerRoot string        `json:"ledger_root"`
	Agents     []string      `json:"agents"`
	Tasks      []string      `json:"tasks"`
	Cells      []HeatmapCell `json:"cells"` // one per (agent, task), row-major
}

// HeatmapCell is one (agent, task). Score is nil when no counted run exists.
type HeatmapCell struct {
	Agent string   `json:"agent"`
	Task  string   `json:"task"`
	Score *float64 `json:"normalized_score"`
	Runs  int      `json:"runs"`
	Valid int      `json:"valid"`
}

// taskRow returns the ledger's row for a task (its anchors).
func (s *Snapshot) taskRow(name string) *scoring.TaskRow {
	if s.Ledger == nil {
		return nil
	}
	for i := range s.Ledger.Tasks {
		if s.Ledger.Tasks[i].Task == name {
			return &s.Ledger.Tasks[i]
		}
	}
	return nil
}

// normalized is a counted run's normalized score under the ledger's anchors for its task
// (scoring.NormalizedScore: invalid runs score 0); false when the task has no worst anchor.
func normalized(r *Run, row *scoring.TaskRow) (float64, bool) {
	if row == nil || row.Worst == nil {
		return 0, false
	}
	score := 0.0
	if r.Score != nil {
		score = *r.Score
	}
	ns := scoring.NormalizedScore(score, row.SOTA, *row.Worst, row.LowerIsBetter, r.Valid && r.Score != nil)
	if math.IsNaN(ns) || math.IsInf(ns, 0) {
		return 0, false
	}
	return ns, true
}

// agents returns the ledger's agents (not the reference player), leaderboard order.
func (s *Snapshot) agents() []string {
	var out []string
	if s.Ledger == nil {
		return out
	}
	for _, a := range s.Ledger.Agents {
		if a.NormalizedScore != nil || a.Agent != sotaPlayer {
			out = append(out, a.Agent)
		}
	}
	return out
}

// Heatmap computes the heatmap from the counted runs.
func (s *Snapshot) Heatmap() Heatmap {
	hm := Heatmap{LedgerRoot: s.LedgerRoot, Agents: s.agents(), Tasks: []string{}, Cells: []HeatmapCell{}}
	if hm.Agents == nil {
		hm.Agents = []string{}
	}
	if s.Ledger != nil {
		for _, t := range s.Ledger.Tasks {
			hm.Tasks = append(hm.Tasks, t.Task)
		}
	}
	type key struct{ agent, task string }
	sum := map[key]float64{}
	cells := map[key]*HeatmapCell{}
	for _, a := range hm.Agents {
		for _, t := range hm.Tasks {
			cells[key{a, t}] = &HeatmapCell{Agent: a, Task: t}
		}
	}
	rows := map[string]*scoring.TaskRow{}
	for _, t := range hm.Tasks {
		rows[t] = s.taskRow(t)
	}
	for i := range s.Runs {
		r := &s.Runs[i]
		c := cells[key{r.Agent, r.Task}]
		if !r.Counted || c == nil {
			continue
		}
		ns, ok := normalized(r, rows[r.Task])
		if !ok {
			continue
		}
		c.Runs++
		if r.Valid {
			c.Valid++
		}
		sum[key{r.Agent, r.Task}] += ns
	}
	for _, a := range hm.Agents {
		for _, t := range hm.Tasks {
			c := cells[key{a, t}]
			if c.Runs > 0 {
				v := sum[key{a, t}] / float64(c.Runs)
				c.Score = &v
			}
			hm.Cells = append(hm.Cells, *c)
		}
	}
	return hm
}

// AgentView is /api/v1/agents/{name}: its leaderboard row, per-task scores over seeds, and
// its failed and excluded runs with their reasons.
type AgentView struct {
	Agent string     `json:"agent"`
	Row   *LeaderRow `json:"leaderboard"`
	// Heureka is the agent's row of the HeurekaBench table, when it ran HeurekaBench tasks.
	Heureka  *scoring.HeurekaAgent `json:"heureka,omitempty"`
	Tasks    []AgentTask           `json:"tasks"`
	Failures []Run                 `json:"failures"`
	Excluded []Exclusion           `json:"excluded"`
	Heat     []HeatmapCell         `json:"-"`
}

// AgentTask is one task's counted runs of an agent, by seed.
type AgentTask struct {
	Task  string     `json:"task"`
	Mean  *float64   `json:"mean_normalized_score"`
	Seeds []SeedView `json:"seeds"`
}

// SeedView is one counted run.
type SeedView struct {
	Seed            int      `json:"seed"`
	Score           *float64 `json:"score"`
	NormalizedScore *float64 `json:"normalized_score"`
	Valid           bool     `json:"valid"`
	AttestationID   string   `json:"attestation_id"`
}

// Agent returns the agent's view; false when the ledger has no such agent.
func (s *Snapshot) Agent(name string) (AgentView, bool) {
	lb := s.Leaderboard()
	v := AgentView{Agent: name, Tasks: []AgentTask{}, Failures: []Run{}, Excluded: []Exclusion{}}
	for i := range lb.Rows {
		if lb.Rows[i].Agent == name && !lb.Rows[i].Reference {
			v.Row = &lb.Rows[i]
		}
	}
	if lb.Heureka != nil {
		for i := range lb.Heureka.Agents {
			if a := &lb.Heureka.Agents[i]; a.Agent == name && a.Runs > 0 {
				v.Heureka = a
			}
		}
	}
	if v.Row == nil && v.Heureka == nil {
		return v, false
	}
	hm := s.Heatmap()
	byTask := map[string]*AgentTask{}
	for _, t := range hm.Tasks {
		byTask[t] = &AgentTask{Task: t, Seeds: []SeedView{}}
	}
	for _, c := range hm.Cells {
		if c.Agent == name {
			byTask[c.Task].Mean = c.Score
		}
	}
	for i := range s.Runs {
		r := &s.Runs[i]
		if r.Agent != name {
			continue
		}
		if !r.Valid && (!r.Unscored || r.InvalidReason != "") {
			v.Failures = append(v.Failures, *r)
		}
		at := byTask[r.Task]
		if !r.Counted || at == nil {
			continue
		}
		sv := SeedView{Seed: r.Seed, Score: r.Score, Valid: r.Valid, AttestationID: r.ID}
		if ns, ok := normalized(r, s.taskRow(r.Task)); ok {
			sv.NormalizedScore = &ns
		}
		at.Seeds = append(at.Seeds, sv)
	}
	for _, t := range hm.Tasks {
		at := byTask[t]
		slices.SortFunc(at.Seeds, func(a, b SeedView) int { return cmp.Compare(a.Seed, b.Seed) })
		v.Tasks = append(v.Tasks, *at)
	}
	for _, e := range append(slices.Clone(s.Evidence.Equivocations), s.Evidence.Disputed...) {
		if e.Agent == name {
			v.Excluded = append(v.Excluded, e)
		}
	}
	for i := range s.Runs {
		if r := &s.Runs[i]; r.Agent == name && !r.Counted && r.Excluded != "" && !isEvidence(r.Excluded) {
			v.Excluded = append(v.Excluded, Exclusion{ID: r.ID, Task: r.Task, Agent: r.Agent, Seed: r.Seed, Principal: r.PeerID, Reason: r.Excluded})
		}
	}
	return v, true
}

// isEvidence says whether an exclusion reason is one the evidence page lists.
func isEvidence(reason string) bool {
	return reason == string(attest.ExcludeEquivocation) || reason == string(attest.ExcludeDisputed)
}

// TaskView is /api/v1/tasks/{name}: the task's metric, anchors, and every run's score.
type TaskView struct {
	Task
	Worst       *float64 `json:"worst"`
	WorstSource string   `json:"worst_source"`
	Runs        []Run    `json:"runs"`
	// Truncated is set when more runs exist than the page holds (MaxListed).
	Truncated bool `json:"truncated"`
}

// MaxListed bounds the runs a task page lists.
const MaxListed = 1000

// TaskPage returns the task's view; false when no campaign names it.
func (s *Snapshot) TaskPage(name string) (TaskView, bool) {
	var v TaskView
	found := false
	for _, t := range s.Tasks {
		if t.Name == name {
			v.Task, found = t, true
		}
	}
	if row := s.taskRow(name); row != nil {
		if !found {
			v.Task = Task{Name: name, LowerIsBetter: row.LowerIsBetter, SOTA: row.SOTA, Optimum: row.Optimum}
			found = true
		}
		v.Worst, v.WorstSource = row.Worst, row.WorstSource
	}
	v.Runs = []Run{}
	for i := range s.Runs {
		if s.Runs[i].Task != name {
			continue
		}
		if len(v.Runs) == MaxListed {
			v.Truncated = true
			break
		}
		v.Runs = append(v.Runs, s.Runs[i])
	}
	return v, found
}

// RunsPage is /api/v1/runs: one page of the runs, newest first.
type RunsPage struct {
	Total   int   `json:"total"`
	Page    int   `json:"page"`
	PerPage int   `json:"per_page"`
	Pages   int   `json:"pages"`
	Runs    []Run `json:"runs"`
}

// Page bounds for /runs.
const (
	DefaultPerPage = 100
	MaxPerPage     = 500
)

// RunsPage returns page (from 1) of perPage runs (clamped to 1..MaxPerPage).
func (s *Snapshot) RunsPage(page, perPage int) RunsPage {
	perPage = min(max(perPage, 1), MaxPerPage)
	pages := max((len(s.Runs)+perPage-1)/perPage, 1)
	page = min(max(page, 1), pages)
	lo := min((page-1)*perPage, len(s.Runs))
	hi := min(lo+perPage, len(s.Runs))
	return RunsPage{Total: len(s.Runs), Page: page, PerPage: perPage, Pages: pages, Runs: append([]Run{}, s.Runs[lo:hi]...)}
}

// run finds a run by attestation ID.
func (s *Snapshot) run(id string) *Run {
	for i := range s.Runs {
		if s.Runs[i].ID == id {
			return &s.Runs[i]
		}
	}
	return nil
}

// HeldBy sums up a run's Pins for one table cell: the labs that hold every one of its
// objects, whether each object is held by its factor, and one line per object for the
// cell's title. Known is false while no repair round has covered them all.
func (r Run) HeldBy() PinSummary {
	var sum PinSummary
	if len(r.Pins) == 0 {
		return sum
	}
	sum.Known, sum.Met = true, true
	var lines []string
	for i, p := range r.Pins {
		if p.Factor == 0 {
			return PinSummary{}
		}
		sum.Met = sum.Met && p.Met
		if i == 0 {
			sum.Labs = slices.Clone(p.Holding)
		} else {
			sum.Labs = slices.DeleteFunc(sum.Labs, func(l string) bool { return !slices.Contains(p.Holding, l) })
		}
		state := "met"
		if !p.Met {
			state = "UNDER FACTOR"
		}
		lines = append(lines, fmt.Sprintf("%s %s: held by %s (factor %d, %s)", p.What, p.CID, strings.Join(p.Holding, ", "), p.Factor, state))
	}
	sum.Detail = strings.Join(lines, "\n")
	return sum
}

// PinSummary is Run.HeldBy.
type PinSummary struct {
	Known  bool
	Labs   []string
	Met    bool
	Detail string
}

package scoring

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
)

// SOTAPlayer is the Elo player that stands for the human state of the art: on every task
// it has SOTARuns runs, all scoring the task's SOTA.
const (
	SOTAPlayer = "sota"
	SOTARuns   = 10
)

// StatusSuccess is the status of a run that finished and was scored.
const StatusSuccess = "SUCCESS"

// Result is one run's outcome as the ledger sees it. A run is valid when Status is
// "SUCCESS" and Score is a finite number.
type Result struct {
	Task          string
	Agent         string
	Seed          int
	Status        string
	Score         *float64
	AttestationID string
	// Heureka is set on HeurekaBench runs, which go to the ledger's Heureka table
	// (heureka_ledger.go) instead of the AIRS-Bench rows.
	Heureka *HeurekaRun
}

func (r *Result) valid() bool {
	return r.Status == StatusSuccess && r.Score != nil && !math.IsNaN(*r.Score) && !math.IsInf(*r.Score, 0)
}

// TaskInfo is what the ledger needs from a task's metadata.
type TaskInfo struct {
	Name           string
	LowerIsBetter  bool
	Optimum        float64
	SOTA           float64
	EstimatedWorst *float64
}

// Options is the scoring policy.
type Options struct {
	// Worst picks the normalized score's worst anchor: "population" (default, AIRS-Bench's
	// reference: the worst valid score on the task in these results) or "estimated" (the
	// task's estimated_worst_score, so newcomers cannot move everyone's scores).
	Worst string
	// BootstrapRounds for the Elo and normalized-score CIs; 0 means 100.
	BootstrapRounds int
	// EloBootstrap is how the Elo intervals are bootstrapped: EloBootstrapGames (default,
	// "" too: resample the games, refit each round) or EloBootstrapTasksLinearised
	// (resample the tasks, one linear step from the MLE per round: variation across tasks,
	// not games; elo_tasks.go).
	EloBootstrap string
}

// Ledger is the leaderboard computed from a set of results. Its canonical JSON (without
// the root) is what every node hashes; the root is the hex sha256 of those bytes.
type Ledger struct {
	InputsDigest string `json:"inputs_digest"`
	Policy       Policy `json:"policy"`
	// EloFit is how the ratings were fitted: EloFitMLE, the pure maximum-likelihood fit
	// (AIRS-Bench's reference), or EloFitRegularised when the maximum-likelihood ratings
	// do not exist (some group of players never won or tied against the rest, e.g. an
	// agent that beats every run) and PseudoTie was added to every pair to keep them
	// finite. Gaps between such groups then reflect the regularisation, not just data.
	EloFit string `json:"elo_fit"`
	// EloBootstrapRegularised is how many of the bootstrap rounds needed the same
	// regularisation (a resample can be separated when the full data is not).
	EloBootstrapRegularised int       `json:"elo_bootstrap_regularised"`
	Agents                  []Agent   `json:"agents"`
	Tasks                   []TaskRow `json:"tasks"`
	// Heureka is the HeurekaBench table; nil (and absent from the JSON) without such runs.
	Heureka *HeurekaTable `json:"heureka,omitempty"`

	canonical []byte
	root      string
	// provisional lists, in leaderboard order, the agents that ran fewer than all the
	// ledger's tasks. It is a reading aid, outside the canonical bytes (the root does not
	// depend on it).
	provisional []string
}

// Policy records the options the ledger was computed with.
type Policy struct {
	Worst           string `json:"worst"`
	BootstrapRounds int    `json:"bootstrap_rounds"`
	Tie             string `json:"tie"`
	// EloBootstrap is the Elo bootstrap policy, absent for the default (EloBootstrapGames)
	// so that ledgers computed with it keep their bytes.
	EloBootstrap string `json:"elo_bootstrap,omitempty"`
}

// Agent is one leaderboard row. The sota player has the Elo fields only.
type Agent struct {
	Agent               string      `json:"agent"`
	Elo                 float64     `json:"elo"`
	EloMLE              float64     `json:"elo_mle"`
	EloCI               [2]float64  `json:"elo_ci"`
	Rank                int         `json:"rank"`
	NormalizedScore     *float64    `json:"normalized_score,omitempty"`
	NormalizedScoreCI   *[2]float64 `json:"normalized_score_ci,omitempty"`
	LinearScore         *float64    `json:"linear_score,omitempty"`
	ValidSubmissionRate *float64    `json:"valid_submission_rate,omitempty"`
	Runs                int         `json:"runs,omitempty"`
}

// TaskRow says how one task was scored.
type TaskRow struct {
	Task          string   `json:"task"`
	LowerIsBetter bool     `json:"lower_is_better"`
	Optimum       float64  `json:"optimum"`
	SOTA          float64  `json:"sota"`
	Worst         *float64 `json:"worst"`
	WorstSource   string   `json:"worst_source"`
	Runs          int      `json:"runs"`
	ValidRuns     int      `json:"valid_runs"`
	Agents        int      `json:"agents"`
}

// Canonical returns the ledger's canonical JSON: fixed field order, compact, floats
// rounded to 9 significant digits. Same inputs in any order give the same bytes.
func (l *Ledger) Canonical() []byte { return slices.Clone(l.canonical) }

// Root is the hex sha256 of Canonical().
func (l *Ledger) Root() string { return l.root }

// Provisional lists, in leaderboard order, the agents that ran only some of the ledger's
// tasks: their Elo and normalized score rest on fewer tasks than the others', so a reader
// should not take their place above an agent that ran everything at face value. Never nil.
func (l *Ledger) Provisional() []string {
	return append([]string{}, l.provisional...)
}

// MarshalJSON prints {"ledger_root": …, "provisional": […]} followed by the canonical
// fields; neither of the first two is part of the canonical bytes.
func (l *Ledger) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"ledger_root":`)
	rb, _ := json.Marshal(l.root)
	b.Write(rb)
	b.WriteString(`,"provisional":`)
	pb, _ := json.Marshal(l.Provisional())
	b.Write(pb)
	b.WriteByte(',')
	b.Write(l.canonical[1:])
	return b.Bytes(), nil
}

// ComputeLedger computes the leaderboard from results: per-task normalized scores and the
// valid-submission rate per agent, and a Bradley–Terry Elo over all seed-vs-seed games per
// task with the sota player, with bootstrap CIs. It is a pure function of the set of
// results (their order does not matter), the metadata of the tasks they name, and opts.
//
// It never fails on account of the games: when the maximum-likelihood Elo does not exist
// (an agent that never wins or never loses) the fit is regularised and EloFit says so.
//
// Errors: a result naming a task missing from tasks, two results for one (task, agent,
// seed), an agent called "sota", an unknown opts.Worst, or "estimated" for a task without
// an estimated worst score.
func ComputeLedger(results []Result, tasks []TaskInfo, opts Options) (*Ledger, error) {
	worstMode, rounds, err := resolvePolicy(opts)
	if err != nil {
		return nil, err
	}
	eloBoot, err := ResolveEloBootstrap(opts.EloBootstrap)
	if err != nil {
		return nil, err
	}
	results, heureka := splitHeureka(results)
	in, err := sortInputs(results, tasks, worstMode)
	if err != nil {
		return nil, err
	}
	// The two digests are sequential hashes of every result, made in one pass beside the
	// task scores, on their own goroutine.
	// The bootstrap is seeded from the inputs without the worst-anchor choice: the games
	// do not depend on it, so switching --worst must not move the Elo intervals or ranks.
	var digest, gameDigest [32]byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		d := inputsDigests(in, rounds, worstMode, "")
		digest, gameDigest = d[0], d[1]
	}()
	tasksRows, scores := scoreTasks(in, worstMode)
	wg.Wait()
	// The Elo bootstrap policy is bound into the inputs digest (so into the root), not the
	// bootstrap seed: the tasks bootstrap draws on its own purpose ("elo-tasks"), and the
	// normalized-score intervals stay those of the default.
	digest = withEloBootstrap(digest, eloBoot)
	l := &Ledger{
		InputsDigest: hex.EncodeToString(digest[:]),
		Policy:       Policy{Worst: worstMode, BootstrapRounds: rounds, Tie: "symmetric isclose: atol 1e-6, rtol 1e-5 of max(|a|,|b|)"},
		Tasks:        tasksRows,
	}
	if eloBoot != EloBootstrapGames {
		l.Policy.EloBootstrap = eloBoot
	}
	seed := sha256.Sum256(append([]byte("evalmesh ledger bootstrap v2\x00"), gameDigest[:]...))
	l.Agents, l.EloFit, l.EloBootstrapRegularised = fitElo(in, rounds, seed, eloBoot)
	scores.fill(l.Agents, rounds, seed)
	rankAndSort(l.Agents)
	l.provisional = scores.provisional(l.Agents, in, len(in.tasks))
	if l.Heureka, err = computeHeureka(heureka, tasks, rounds); err != nil {
		return nil, err
	}
	if err := l.seal(); err != nil {
		return nil, err
	}
	return l, nil
}

// resolvePolicy applies the defaults of opts and checks them.
func resolvePolicy(opts Options) (worstMode string, rounds int, err error) {
	worstMode = opts.Worst
	if worstMode == "" {
		worstMode = "population"
	}
	if worstMode != "population" && worstMode != "estimated" {
		return "", 0, fmt.Errorf("unknown worst anchor %q: use \"population\" or \"estimated\"", opts.Worst)
	}
	rounds = opts.BootstrapRounds
	if rounds == 0 {
		rounds = 100
	}
	if rounds < 0 || rounds > 100000 {
		return "", 0, fmt.Errorf("bootstrap rounds %d out of range 1..100000", opts.BootstrapRounds)
	}
	return worstMode, rounds, nil
}

// ledgerInputs are the results in the order every later phase (and the inputs digest)
// relies on, whatever order they came in: sorted by (task, agent, seed). The results
// themselves are not copied into that order (a million 88-byte, pointer-holding records
// were the largest allocation of the 1M-result ledger, and their copy its largest cost
// beyond parse and sort): runs holds, in sorted order, where each result sits in src and
// the facts the inputs digest reads, and the hot loops read score and agentOf, flat and
// pointer-free, in sorted order.
type ledgerInputs struct {
	src         []Result    // the results as given
	runs        []sortedRun // runs[i] is the i-th result in sorted order (src[runs[i].src], at(i))
	statusNames []string    // runs[i].status() names one of these; 0 is StatusSuccess
	score       []float64   // score[i] is at(i)'s score when the run is valid, NaN when not
	agentOf     []int32     // agentOf[i] is at(i)'s player
	tasks       []TaskInfo  // the tasks the results name, sorted by name
	agentNames  []string    // sorted; player p < len(agentNames) is agentNames[p], the last player is sota
	agentIdx    map[string]int
	agentRuns   []int  // agentRuns[p]: how many results agent p has
	spans       []span // spans[t]: sorted results lo..hi-1 are task t's
}

type span struct{ lo, hi int }

// sortedRun is one result as the inputs digest reads it, gathered once in sorted order so
// the digest walks memory in order instead of visiting a million results at random (that
// walk was most of the digests' cost). Task and agent come from the spans and agentOf.
type sortedRun struct {
	seed      int
	scoreBits uint64 // math.Float64bits(*Score) when hasScore
	src       int32  // index in ledgerInputs.src
	// The status's index in ledgerInputs.statusNames below statusFlags, and the flags
	// hasScore, hasAttestation and isValid above it: 24 bytes a run, not 32 (this array
	// is written at a million scattered places).
	meta uint32
}

const (
	statusFlags    = 29
	hasScore       = 1 << statusFlags
	hasAttestation = 2 << statusFlags
	isValid        = 4 << statusFlags // Result.valid()
)

func (sr *sortedRun) status() uint32 { return sr.meta &^ (7 << statusFlags) }

// at is the i-th result in sorted order.
func (in *ledgerInputs) at(i int) *Result { return &in.src[in.runs[i].src] }

// players is the number of Elo players: every agent, then sota.
func (in *ledgerInputs) players() int { return len(in.agentNames) + 1 }

// validScore is r's score when r is valid, else NaN (valid scores are finite).
func validScore(r *Result) float64 {
	if r.valid() {
		return *r.Score
	}
	return math.NaN()
}

// sortInputs checks the results against the task metadata, interns names and sorts on
// integer keys.
func sortInputs(results []Result, tasks []TaskInfo, worstMode string) (*ledgerInputs, error) {
	if len(results) > math.MaxInt32 {
		return nil, fmt.Errorf("%d results: at most %d fit one ledger", len(results), math.MaxInt32)
	}
	taskByName := make(map[string]*TaskInfo, len(tasks))
	for i := range tasks {
		t := &tasks[i]
		if _, dup := taskByName[t.Name]; dup {
			return nil, fmt.Errorf("task %q listed twice in the task metadata", t.Name)
		}
		taskByName[t.Name] = t
	}
	// One map look-up per name per result: ids are handed out in order of first
	// appearance, then remapped to the sorted order (the profile of a 1M-result ledger had
	// these look-ups, done twice, beside the sort itself).
	taskIdx := map[string]int{}
	agentIdx := map[string]int{}
	var taskNames, agentNames []string
	ids := make([]uint64, len(results)) // task id << 32 | agent id: first-seen ids, then (below) sorted ranks
	for i := range results {
		r := &results[i]
		ti, ok := taskIdx[r.Task]
		if !ok {
			if _, known := taskByName[r.Task]; !known {
				return nil, fmt.Errorf("result for agent %q seed %d names unknown task %q: add its metadata to the task folder", r.Agent, r.Seed, r.Task)
			}
			ti = len(taskNames)
			taskIdx[r.Task] = ti
			taskNames = append(taskNames, r.Task)
		}
		ai, ok := agentIdx[r.Agent]
		if !ok {
			if r.Agent == SOTAPlayer {
				return nil, fmt.Errorf("task %q: agent name %q is reserved for the human-SOTA player", r.Task, SOTAPlayer)
			}
			ai = len(agentNames)
			agentIdx[r.Agent] = ai
			agentNames = append(agentNames, r.Agent)
		}
		ids[i] = uint64(ti)<<32 | uint64(ai)
	}
	taskRank := sortedRanks(taskNames, taskIdx)
	agentRank := sortedRanks(agentNames, agentIdx)
	T, A := len(taskNames), len(agentNames)
	// Sorted by (task, agent) with counting passes instead of a comparison sort of a
	// million keys — one on the T×A groups where that table is small, else two stable
	// ones, by agent and then by task; both leave each group in input order — and each
	// (task, agent) group, one agent's seeds on one task, is then sorted by seed. The order
	// is the one (task, agent, seed) defines, whatever the input order.
	agentRuns := make([]int, A)
	taskStart := make([]int, T+1)
	for i, id := range ids {
		id = uint64(taskRank[id>>32])<<32 | uint64(agentRank[uint32(id)])
		ids[i] = id
		agentRuns[uint32(id)]++
		taskStart[id>>32+1]++
	}
	for t := 0; t < T; t++ {
		taskStart[t+1] += taskStart[t]
	}
	// One gather from the results, in (task, agent) order: the seed to sort each group
	// on, and what the digest and the scores read.
	st := statusInterner{idx: map[string]uint32{StatusSuccess: 0}, names: []string{StatusSuccess}}
	runs := make([]sortedRun, len(results))
	if T*A <= groupCountMax(len(results)) {
		// One counting pass on the (task, agent) group itself: each result goes straight
		// to its place, read in input order (the results and their scores, which the
		// parser laid out in that order, are read front to back instead of at a million
		// scattered places, which was most of this function's cost).
		next := make([]int, T*A)
		for _, id := range ids {
			next[int(id>>32)*A+int(uint32(id))]++
		}
		pos := 0
		for g, n := range next {
			next[g] = pos
			pos += n
		}
		for i, id := range ids {
			sr, err := st.run(&results[i], int32(i))
			if err != nil {
				return nil, err
			}
			g := int(id>>32)*A + int(uint32(id))
			runs[next[g]] = sr
			next[g]++
		}
	} else {
		// Two stable counting passes, by agent and then by task (no T×A table).
		next := make([]int, max(A, T))
		for a := 1; a < A; a++ {
			next[a] = next[a-1] + agentRuns[a-1]
		}
		byAgent := make([]int32, len(results))
		for i, id := range ids {
			a := uint32(id)
			byAgent[next[a]] = int32(i)
			next[a]++
		}
		copy(next, taskStart[:T])
		for _, i := range byAgent {
			t := ids[i] >> 32
			sr, err := st.run(&results[i], i)
			if err != nil {
				return nil, err
			}
			runs[next[t]] = sr
			next[t]++
		}
	}
	statusNames := st.names
	score := make([]float64, len(results))
	agentOf := make([]int32, len(results))
	bySeed := func(a, b sortedRun) int { return cmp.Compare(a.seed, b.seed) }
	var seedBuf []sortedRun
	for lo := 0; lo < len(runs); {
		id := ids[runs[lo].src]
		hi := lo + 1
		for hi < len(runs) && ids[runs[hi].src] == id {
			hi++
		}
		if g := runs[lo:hi]; !slices.IsSortedFunc(g, bySeed) && !placeBySeed(g, &seedBuf) {
			slices.SortFunc(g, bySeed)
		}
		for k := lo; k < hi; k++ {
			sr := &runs[k]
			if k > lo && runs[k-1].seed == sr.seed {
				r := &results[sr.src]
				return nil, fmt.Errorf("two results for task %q agent %q seed %d: keep one per slot", r.Task, r.Agent, r.Seed)
			}
			score[k] = math.NaN()
			if sr.meta&isValid != 0 {
				score[k] = math.Float64frombits(sr.scoreBits)
			}
			agentOf[k] = int32(uint32(id))
		}
		lo = hi
	}
	usedTasks := make([]TaskInfo, len(taskNames))
	for i, n := range taskNames {
		usedTasks[i] = *taskByName[n]
		if worstMode == "estimated" && usedTasks[i].EstimatedWorst == nil {
			return nil, fmt.Errorf("task %q has no estimated_worst_score; use the population worst or add it to the metadata", n)
		}
	}
	spans := make([]span, T)
	for t := range spans {
		spans[t] = span{taskStart[t], taskStart[t+1]}
	}
	return &ledgerInputs{src: results, runs: runs, statusNames: statusNames, score: score, agentOf: agentOf, tasks: usedTasks,
		agentNames: agentNames, agentIdx: agentIdx, agentRuns: agentRuns, spans: spans}, nil
}

// placeBySeed sorts g by seed when its seeds are distinct and consecutive (m seeds from
// some s to s+m−1: the usual group, every seed of one agent on one task), each run put
// straight at its place, and says whether it did; otherwise g is left for the comparison
// sort (which is then also what finds a repeated seed). A group has one order by distinct
// seeds, so either way gives the same. buf is scratch kept across calls.
func placeBySeed(g []sortedRun, buf *[]sortedRun) bool {
	lo, hi := g[0].seed, g[0].seed
	for i := range g {
		lo, hi = min(lo, g[i].seed), max(hi, g[i].seed)
	}
	if uint64(hi)-uint64(lo) != uint64(len(g)-1) {
		return false
	}
	b := slices.Grow((*buf)[:0], len(g))[:len(g)]
	*buf = b
	for i := range b {
		b[i].src = -1 // no run of g has a negative index in src
	}
	for i := range g {
		k := uint64(g[i].seed) - uint64(lo)
		if b[k].src >= 0 {
			return false // a repeated seed
		}
		b[k] = g[i]
	}
	copy(g, b)
	return true
}

// groupCountMax is the largest number of (task, agent) groups sortInputs counts in one
// table (8 bytes each) for n results; above, it takes two counting passes instead. Both
// give the same order (TestSortInputsMatchesComparisonSort runs both).
var groupCountMax = func(n int) int { return max(n, 1<<16) }

// statusInterner numbers the statuses of a ledger's results (0 is StatusSuccess) as
// sortInputs gathers them.
type statusInterner struct {
	idx   map[string]uint32
	names []string
}

// run is r's sortedRun, r being src[i].
func (st *statusInterner) run(r *Result, i int32) (sortedRun, error) {
	sr := sortedRun{seed: r.Seed, src: i}
	if r.Status != StatusSuccess {
		id, ok := st.idx[r.Status]
		if !ok {
			if len(st.names) == 1<<statusFlags {
				return sr, fmt.Errorf("more than %d distinct statuses", 1<<statusFlags)
			}
			id = uint32(len(st.names))
			st.idx[r.Status] = id
			st.names = append(st.names, r.Status)
		}
		sr.meta = id
	}
	if r.Score != nil {
		sr.meta |= hasScore
		sr.scoreBits = math.Float64bits(*r.Score)
	}
	if r.AttestationID != "" {
		sr.meta |= hasAttestation
	}
	if r.valid() {
		sr.meta |= isValid
	}
	return sr, nil
}

// agentScores accumulates, per agent, the normalized and linear scores of its runs and
// its valid-submission rate over the tasks it ran.
type agentScores struct {
	nsSum, linSum, vsrSum []float64
	runs, vsrTasks        []int
	nsByAgent             [][]float64
	// nsTasks[a] holds where each task's runs start in nsByAgent[a] (runs arrive grouped
	// by task), so the bootstrap can resample within tasks.
	nsTasks [][]int
}

// scoreTasks fixes each task's worst anchor and scores every run against it.
func scoreTasks(in *ledgerInputs, worstMode string) ([]TaskRow, agentScores) {
	A := len(in.agentNames)
	sc := agentScores{
		nsSum: make([]float64, A), linSum: make([]float64, A), vsrSum: make([]float64, A),
		runs: make([]int, A), vsrTasks: make([]int, A),
		nsByAgent: make([][]float64, A), nsTasks: make([][]int, A),
	}
	// Each agent's scores in one exact-size array (sortInputs counted them), not grown.
	backing := make([]float64, 0, len(in.score))
	for a, n := range in.agentRuns {
		sc.nsByAgent[a] = backing[len(backing) : len(backing) : len(backing)+n]
		backing = backing[:len(backing)+n]
	}
	var rows []TaskRow
	for ti, t := range in.tasks {
		sp := in.spans[ti]
		row := TaskRow{Task: t.Name, LowerIsBetter: t.LowerIsBetter, Optimum: t.Optimum, SOTA: t.SOTA, Runs: sp.hi - sp.lo}
		worst, haveWorst := taskWorst(in.score[sp.lo:sp.hi], &t, worstMode, &row)
		prevAgent := -1
		var seeds, valid int
		flush := func() {
			if prevAgent >= 0 && seeds > 0 {
				sc.vsrSum[prevAgent] += float64(valid) / float64(seeds)
				sc.vsrTasks[prevAgent]++
				row.Agents++
			}
		}
		for i := sp.lo; i < sp.hi; i++ {
			v := in.score[i]
			ai := int(in.agentOf[i])
			if ai != prevAgent {
				flush()
				prevAgent, seeds, valid = ai, 0, 0
				sc.nsTasks[ai] = append(sc.nsTasks[ai], len(sc.nsByAgent[ai]))
			}
			seeds++
			var ns, lin float64
			if !math.IsNaN(v) {
				valid++
				row.ValidRuns++
				if haveWorst {
					ns = NormalizedScore(v, t.SOTA, worst, t.LowerIsBetter, true)
					lin = LinearScore(v, t.SOTA, worst, true)
				}
			}
			sc.nsSum[ai] += ns
			sc.linSum[ai] += lin
			sc.runs[ai]++
			sc.nsByAgent[ai] = append(sc.nsByAgent[ai], ns)
		}
		flush()
		rows = append(rows, row)
	}
	return rows, sc
}

// taskWorst is the task's worst anchor (estimated, or the worst valid score of its runs:
// scores as ledgerInputs.score, NaN for an invalid run) and records it and its source in row.
func taskWorst(scores []float64, t *TaskInfo, worstMode string, row *TaskRow) (worst float64, ok bool) {
	if worstMode == "estimated" {
		worst, ok = *t.EstimatedWorst, true
		row.WorstSource = "estimated"
	} else {
		for _, s := range scores {
			if math.IsNaN(s) {
				continue
			}
			if !ok || (t.LowerIsBetter && s > worst) || (!t.LowerIsBetter && s < worst) {
				worst, ok = s, true
			}
		}
		row.WorstSource = "population"
		if !ok {
			row.WorstSource = "none"
		}
	}
	if ok {
		w := worst
		row.Worst = &w
	}
	return worst, ok
}

// fitElo aggregates the games (per task into win/tie counts; tasks in parallel, integer
// sums), fits the Bradley–Terry ratings and bootstraps their intervals: one Agent per
// player with its Elo fields, in player order.
func fitElo(in *ledgerInputs, rounds int, seed [32]byte, eloBoot string) (agents []Agent, fit string, bootRegularised int) {
	P := in.players()
	games := aggregateGames(in.score, in.agentOf, in.tasks, func(ti int) (int, int) { return in.spans[ti].lo, in.spans[ti].hi }, P)
	// The fit sees upstream's battle table — every game and its swapped copy, 2N rows — as
	// each bootstrap round does; the pure MLE does not depend on the doubling, and a
	// regularised fit then weighs its pseudo-ties against the same counts in both.
	c := make([]float64, P*P)
	weightsInto(c, games, 2)
	regularised := regulariseIfSeparated(c, P)
	theta := fitRobust(c, P, nil)
	c = nil
	fit = EloFitMLE
	if regularised {
		fit = EloFitRegularised
	}
	mle := ToElo(theta)
	var boot [][]float64
	if eloBoot == EloBootstrapTasksLinearised {
		boot = bootstrapEloTasks(games, regularised, theta, in.taskSums(P), rounds, seed)
	} else {
		boot, bootRegularised = bootstrapElo(games, theta, rounds, seed)
	}
	agents = make([]Agent, P)
	for p := 0; p < P; p++ {
		name := SOTAPlayer
		if p < len(in.agentNames) {
			name = in.agentNames[p]
		}
		col := make([]float64, rounds)
		for r := 0; r < rounds; r++ {
			col[r] = boot[r][p]
		}
		sort.Float64s(col)
		agents[p] = Agent{
			Agent:  name,
			Elo:    round9(quantile(col, 0.5)),
			EloMLE: round9(mle[p]),
			EloCI:  [2]float64{round9(quantile(col, 0.025)), round9(quantile(col, 0.975))},
		}
	}
	return agents, fit, bootRegularised
}

// fill sets each agent's normalized score (with its bootstrap interval), linear score,
// valid-submission rate and run count; agents are in player order, sota last.
func (sc *agentScores) fill(agents []Agent, rounds int, seed [32]byte) {
	nsCI := bootstrapMeans(sc.nsByAgent, sc.nsTasks, rounds, seed)
	for p := range sc.runs {
		ns := round9(sc.nsSum[p] / float64(sc.runs[p]))
		lin := round9(sc.linSum[p] / float64(sc.runs[p]))
		vsr := round9(sc.vsrSum[p] / float64(sc.vsrTasks[p]))
		ci := [2]float64{round9(nsCI[p][0]), round9(nsCI[p][1])}
		agents[p].NormalizedScore = &ns
		agents[p].NormalizedScoreCI = &ci
		agents[p].LinearScore = &lin
		agents[p].ValidSubmissionRate = &vsr
		agents[p].Runs = sc.runs[p]
	}
}

// provisional names the agents, in the order of agents, that ran fewer than tasks tasks.
func (sc *agentScores) provisional(agents []Agent, in *ledgerInputs, tasks int) []string {
	out := []string{}
	for _, a := range agents {
		if p, ok := in.agentIdx[a.Agent]; ok && a.Agent != SOTAPlayer && sc.vsrTasks[p] < tasks {
			out = append(out, a.Agent)
		}
	}
	return out
}

// rankAndSort ranks each player 1 + the players whose lower Elo bound is above its upper
// bound (Chatbot Arena's convention, so overlapping intervals tie), then orders the rows
// best Elo first.
func rankAndSort(agents []Agent) {
	for p := range agents {
		rank := 1
		for q := range agents {
			if q != p && agents[q].EloCI[0] > agents[p].EloCI[1] {
				rank++
			}
		}
		agents[p].Rank = rank
	}
	slices.SortStableFunc(agents, func(a, b Agent) int {
		if c := cmp.Compare(b.Elo, a.Elo); c != 0 {
			return c
		}
		if c := cmp.Compare(b.EloMLE, a.EloMLE); c != 0 {
			return c
		}
		return cmp.Compare(a.Agent, b.Agent)
	})
}

// seal rounds the task rows' floats and encodes the canonical JSON and its root.
func (l *Ledger) seal() error {
	for i := range l.Tasks {
		t := &l.Tasks[i]
		t.Optimum, t.SOTA = round9(t.Optimum), round9(t.SOTA)
		if t.Worst != nil {
			w := round9(*t.Worst)
			t.Worst = &w
		}
	}
	type body struct {
		InputsDigest            string    `json:"inputs_digest"`
		Policy                  Policy    `json:"policy"`
		EloFit                  string    `json:"elo_fit"`
		EloBootstrapRegularised int       `json:"elo_bootstrap_regularised"`
		Agents                  []Agent   `json:"agents"`
		Tasks                   []TaskRow `json:"tasks"`

		Heureka *HeurekaTable `json:"heureka,omitempty"`
	}
	b, err := json.Marshal(body{l.InputsDigest, l.Policy, l.EloFit, l.EloBootstrapRegularised, l.Agents, l.Tasks, l.Heureka})
	if err != nil {
		return fmt.Errorf("scoring: encoding the ledger: %v", err)
	}
	l.canonical = b
	sum := sha256.Sum256(b)
	l.root = hex.EncodeToString(sum[:])
	return nil
}

// sortedRanks sorts names in place, sets idx[name] to its place in that order and returns,
// for each name's old position (its first-seen id), its new place.
func sortedRanks(names []string, idx map[string]int) []int {
	rank := make([]int, len(names))
	sort.Strings(names)
	for i, n := range names {
		rank[idx[n]] = i
		idx[n] = i
	}
	return rank
}

// inputsDigests hashes the sorted results (every field, scores exactly), the metadata of
// the tasks they use and the policy: the ledger changes whenever any input does, and the
// bootstrap stream is seeded from it so every node draws the same resamples. It gives one
// digest per worst value, all from one pass over the results (the bytes of the results
// are the same in each; building them once halved the digests' cost).
func inputsDigests(in *ledgerInputs, rounds int, worsts ...string) [][32]byte {
	hs := make([]hash.Hash, len(worsts))
	var buf []byte
	field := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	// Scores go in as their exact IEEE-754 bits (0 and 1 flag null / present).
	score := func(v *float64) {
		if v == nil {
			buf = append(buf, 0)
			return
		}
		buf = append(buf, 1)
		buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(*v))
	}
	for k, worst := range worsts {
		hs[k] = sha256.New()
		buf = buf[:0]
		field("evalmesh ledger inputs v1")
		field(worst)
		field(strconv.Itoa(rounds))
		for _, t := range in.tasks {
			field(t.Name)
			field(strconv.FormatBool(t.LowerIsBetter))
			score(&t.Optimum)
			score(&t.SOTA)
			score(t.EstimatedWorst)
		}
		hs[k].Write(buf)
	}
	// The results' bytes go to the hashes in batches (sha256 streams: the same sums as
	// one Write per result).
	buf = buf[:0]
	flush := func() {
		for _, h := range hs {
			h.Write(buf)
		}
		buf = buf[:0]
	}
	for t, sp := range in.spans {
		task := in.tasks[t].Name
		for i := sp.lo; i < sp.hi; i++ {
			sr := &in.runs[i]
			field(task)
			field(in.agentNames[in.agentOf[i]])
			buf = binary.AppendVarint(buf, int64(sr.seed))
			field(in.statusNames[sr.status()])
			if sr.meta&hasScore == 0 {
				buf = append(buf, 0)
			} else {
				buf = append(buf, 1)
				buf = binary.BigEndian.AppendUint64(buf, sr.scoreBits)
			}
			if sr.meta&hasAttestation != 0 {
				field(in.src[sr.src].AttestationID)
			} else {
				field("")
			}
			if len(buf) >= 64<<10 {
				flush()
			}
		}
	}
	flush()
	out := make([][32]byte, len(hs))
	for k, h := range hs {
		h.Sum(out[k][:0])
	}
	return out
}

// aggregateGames counts the games of every task into one table; integer counts, so the
// result does not depend on scheduling.
func aggregateGames(score []float64, agentOf []int32, tasks []TaskInfo, span func(int) (int, int), P int) *Games {
	g := NewGames(P)
	workers := runtime.GOMAXPROCS(0)
	if P <= tableGamesMaxP {
		// Tasks across the cores, each counted with its R×R table (fastest while the
		// table is small) and added into g under mu.
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < min(workers, max(1, len(tasks))); w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for ti := w; ti < len(tasks); ti += workers {
					lo, hi := span(ti)
					addTaskGamesLocked(g, taskRunsOf(score[lo:hi], agentOf[lo:hi], &tasks[ti], P), &mu)
				}
			}(w)
		}
		wg.Wait()
		return g
	}
	// Tasks one after another, each task's pairs across the cores (addTaskGamesParallel,
	// no R×R table): one writer per cell.
	for ti := range tasks {
		lo, hi := span(ti)
		addTaskGamesParallel(g, taskRunsOf(score[lo:hi], agentOf[lo:hi], &tasks[ti], P), workers)
	}
	return g
}

// tableGamesMaxP is the most players whose task games are counted with the R×R table
// (32 MB a task at this size); both ways give the same integers.
const tableGamesMaxP = 2048

// taskRuns builds each player's goodness list for one task (rs sorted by agent),
// with the sota player's SOTARuns runs at the SOTA score.
func taskRuns(rs []Result, t *TaskInfo, agentIdx map[string]int, P int) []playerRuns {
	agentOf := make([]int32, len(rs))
	score := make([]float64, len(rs))
	for i := range rs {
		agentOf[i] = int32(agentIdx[rs[i].Agent])
		score[i] = validScore(&rs[i])
	}
	return taskRunsOf(score, agentOf, t, P)
}

// taskRunsOf is taskRuns from the runs' scores (as ledgerInputs.score: NaN for an invalid
// run) and players (agentOf[i] for score[i]). The goodness lists share one backing array.
func taskRunsOf(score []float64, agentOf []int32, t *TaskInfo, P int) []playerRuns {
	sign := 1.0
	if t.LowerIsBetter {
		sign = -1
	}
	good := make([]float64, 0, len(score)+SOTARuns)
	players := 1
	for i := 1; i < len(score); i++ {
		if agentOf[i] != agentOf[i-1] {
			players++
		}
	}
	out := make([]playerRuns, 0, players+1)
	for i := 0; i < len(score); {
		j := i
		start := len(good)
		pr := playerRuns{player: int(agentOf[i])}
		for j < len(score) && agentOf[j] == agentOf[i] {
			if v := score[j]; !math.IsNaN(v) {
				good = append(good, sign*v)
			} else {
				pr.invalid++
			}
			j++
		}
		pr.good = good[start:len(good):len(good)]
		out = append(out, pr)
		i = j
	}
	start := len(good)
	for k := 0; k < SOTARuns; k++ {
		good = append(good, sign*t.SOTA)
	}
	return append(out, playerRuns{player: P - 1, good: good[start:]})
}

// bootstrapElo refits the ratings on resampled games. Resampling N games with replacement
// and then counting them per (pair, outcome) cell gives cell counts that are
// Multinomial(N; count_cell/N): each draw lands in a cell with probability equal to that
// cell's share of the games, independently. So the counts can be drawn directly, cell by
// cell as binomials conditioned on what is left — O(cells) per round instead of O(N).
// Round r's random stream is ChaCha8 keyed by sha256(seed, r), so rounds may run in
// parallel and still give every node the same draws. Each round is fitted as the full data
// is (fitGames: pure MLE where it exists, regularised where the resample is separated);
// regularised counts those rounds.
//
// Upstream (AIRS-Bench's notebook, after Chatbot Arena) resamples its battle table, which
// holds every game twice — once as played and once with the players swapped — so a round
// draws 2N rows. A row and its swapped copy enter the likelihood the same way, so that is
// 2N draws from the same cells; the Bradley–Terry fit is invariant to scaling all counts,
// so drawing 2N here gives upstream's distribution (intervals about 1/√2 as wide as a
// resample of N games would).
func bootstrapElo(g *Games, start []float64, rounds int, seed [32]byte) (out [][]float64, regularised int) {
	P := g.P
	// A cell is one non-zero count of g: a win of i over j (weight 2 on c[i][j]) or a tie
	// of i and j (weight 1 on c[i][j] and on c[j][i]), taken in g's order, wins first. A
	// round's weights are written straight from its draws: integers, exact in float64, so
	// the same bits as counting into a Games and calling weights — and no list of cells
	// (900 MB at 5,000 players) nor P×P count tables per worker.
	total := g.Total()
	// Every round's first Newton iteration evaluates the same sigmoids (at start): once
	// here. Not above pairParallelMinP players, where the table would be one more P²/2
	// buffer beside each worker's (100 MB at 5,000) and the rounds' own are computed across
	// the cores.
	var startSig []float64
	if P < pairParallelMinP {
		startSig = startSigmoids(P, start)
	}
	out = make([][]float64, rounds)
	reg := make([]bool, rounds)
	workers := min(runtime.GOMAXPROCS(0), rounds)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := make([]float64, P*P)
			for r := w; r < rounds; r += workers {
				clear(c)
				rng := rand.NewChaCha8(roundSeed(seed, "elo", uint64(r)))
				left, mass := 2*total, total
				draw := func(n int64) int64 {
					var x int64
					if n >= mass {
						x = left
					} else {
						x = binomial(rng, left, float64(n)/float64(mass))
					}
					mass -= n
					left -= x
					return x
				}
				for idx, n := range g.Wins {
					if left == 0 {
						break
					}
					if n > 0 {
						if x := draw(n); x > 0 {
							c[idx] += float64(2 * x)
						}
					}
				}
				for idx, n := range g.Ties {
					if left == 0 {
						break
					}
					if n > 0 {
						if x := draw(n); x > 0 {
							i, j := idx/P, idx%P
							c[i*P+j] += float64(x)
							c[j*P+i] += float64(x)
						}
					}
				}
				rr := regulariseIfSeparated(c, P)
				out[r], reg[r] = ToElo(fitRobustSig(c, P, start, startSig)), rr
			}
		}(w)
	}
	wg.Wait()
	for _, rr := range reg {
		if rr {
			regularised++
		}
	}
	return out, regularised
}

// bootstrapMeans gives each agent's 2.5 % / 97.5 % bootstrap interval of the mean of its
// per-run normalized scores. The bootstrap is stratified by task, as upstream's (rliable's
// StratifiedBootstrap over the seeds × tasks score matrix): each round redraws every task's
// runs from that task's runs, with replacement, so the tasks an agent was scored on are
// fixed and only the seeds vary. strata[a] lists where each task's runs start in vals[a].
// One ChaCha8 stream per agent.
func bootstrapMeans(vals [][]float64, strata [][]int, rounds int, seed [32]byte) [][2]float64 {
	out := make([][2]float64, len(vals))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(vals)))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			means := make([]float64, rounds)
			for a := w; a < len(vals); a += workers {
				v := vals[a]
				starts := strata[a]
				rng := rand.NewChaCha8(roundSeed(seed, "ns", uint64(a)))
				for r := range means {
					var s float64
					for k, lo := range starts {
						hi := len(v)
						if k+1 < len(starts) {
							hi = starts[k+1]
						}
						task := v[lo:hi]
						n := len(task)
						if uint64(n) <= math.MaxUint32 {
							s = addStratumDraws(rng, task, s)
						} else {
							for range task {
								s += task[rand.New(rng).Uint64N(uint64(n))]
							}
						}
					}
					means[r] = s / float64(len(v))
				}
				sort.Float64s(means)
				out[a] = [2]float64{quantile(means, 0.025), quantile(means, 0.975)}
			}
		}(w)
	}
	wg.Wait()
	return out
}

// addStratumDraws returns s plus task[k] for len(task) indices k drawn in turn as a new
// indexDrawer{rng, n: len(task)} draws them (two per word, Lemire's multiply-and-reject;
// the stratum starts on a new word), added in the order drawn: the normalized-score
// bootstrap's inner loop (100M draws at 1M results). It is indexDrawer's arithmetic with
// the word and its count in locals instead of the drawer's fields, which lived in memory
// (the slow path takes the drawer's address) and put a store and a reload on every draw.
// The gain is small (docs/scoring.md §7): the generator's words are most of the loop's
// cost. TestAddStratumDrawsMatchesIndexDrawer holds the two to the same indices.
func addStratumDraws(rng *rand.ChaCha8, task []float64, s float64) float64 {
	n := uint32(len(task))
	var word uint64
	left := 0
	for range task {
		for {
			if left == 0 {
				word, left = rng.Uint64(), 2
			}
			m := uint64(uint32(word)) * uint64(n)
			word >>= 32
			left--
			if low := uint32(m); low < n && low < -n%n {
				continue // rejected: draw again
			}
			s += task[m>>32]
			break
		}
	}
	return s
}

// indexDrawer draws uniform indices in [0, n) two per 64-bit random word, by Lemire's
// multiply-and-reject (exactly uniform, as Uint32N, with half the generator calls).
type indexDrawer struct {
	rng  *rand.ChaCha8
	n    uint32
	word uint64
	left int
}

func (d *indexDrawer) next() uint32 {
	if k, ok := d.fast(); ok {
		return k
	}
	return d.nextSlow()
}

// fast is the common case of next — a half-word left that needs no rejection test —
// small enough to inline into the normalized-score bootstrap's loop (the call of next
// was a third of its 100M draws at 1M results). When it says no, nothing was consumed,
// and nextSlow draws as always.
func (d *indexDrawer) fast() (uint32, bool) {
	if d.left > 0 {
		if m := uint64(uint32(d.word)) * uint64(d.n); uint32(m) >= d.n {
			d.word >>= 32
			d.left--
			return uint32(m >> 32), true
		}
	}
	return 0, false
}

// nextSlow is the whole draw: refill, multiply, reject.
func (d *indexDrawer) nextSlow() uint32 {
	for {
		if d.left == 0 {
			d.word, d.left = d.rng.Uint64(), 2
		}
		x := uint32(d.word)
		d.word >>= 32
		d.left--
		m := uint64(x) * uint64(d.n)
		if low := uint32(m); low < d.n {
			if thresh := -d.n % d.n; low < thresh {
				continue
			}
		}
		return uint32(m >> 32)
	}
}

func roundSeed(seed [32]byte, purpose string, r uint64) [32]byte {
	var b []byte
	b = append(b, seed[:]...)
	b = append(b, purpose...)
	b = binary.BigEndian.AppendUint64(b, r)
	return sha256.Sum256(b)
}

// quantile is numpy's default (linear) quantile of sorted v.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	pos := float64(q * float64(len(v)-1)) // float64(): no fused multiply-add below
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return v[lo]
	}
	return v[lo] + float64((v[hi]-v[lo])*(pos-float64(lo)))
}

// round9 rounds to 9 significant digits (docs/design.md §7) and folds −0 and non-finite values
// so the JSON is always valid and stable.
func round9(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 9, 64), 64)
	if r == 0 {
		return 0
	}
	return r
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

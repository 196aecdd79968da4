package scoring

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// HeurekaRun is what a HeurekaBench run adds to its Result: the per-question outcome it
// attested. A Result with Heureka set belongs to the HeurekaBench table, not to the
// AIRS-Bench leaderboard; its Score is the run's OEQ score (the mean judge score).
type HeurekaRun struct {
	Questions []HeurekaQuestion
}

// HeurekaTable is the HeurekaBench leaderboard beside the AIRS-Bench one, in the layout of
// the paper's main table: per agent the OEQ correctness (1–5), MCQ accuracy, recall and
// precision, each with a 95 % bootstrap interval over questions (a resample draws the
// questions — (task, question id) pairs — with replacement and keeps every run's answer
// to a drawn question), and a Bradley–Terry Elo over the runs' OEQ scores per task
// exactly as the AIRS-Bench Elo (the sota player at the task's sota.score). Recall and
// precision are macro (the mean over answered questions, AIRS-BENCH.md); the micro
// values (pooled letter counts) and F1 are there too. Invalid runs count in Runs and,
// as AIRS-Bench's failed runs, lose their Elo games; they have no questions to pool.
type HeurekaTable struct {
	InputsDigest            string         `json:"inputs_digest"`
	Tasks                   []string       `json:"tasks"`
	EloFit                  string         `json:"elo_fit"`
	EloBootstrapRegularised int            `json:"elo_bootstrap_regularised"`
	Agents                  []HeurekaAgent `json:"agents"`
}

// HeurekaAgent is one row of the HeurekaBench table. The sota player has the Elo fields
// only.
type HeurekaAgent struct {
	Agent             string      `json:"agent"`
	Elo               float64     `json:"elo"`
	EloCI             [2]float64  `json:"elo_ci"`
	Rank              int         `json:"rank"`
	Runs              int         `json:"runs,omitempty"`
	ValidRuns         int         `json:"valid_runs,omitempty"`
	Questions         int         `json:"questions,omitempty"` // pooled (run, question) answers
	OEQ               *float64    `json:"oeq_correctness,omitempty"`
	OEQCI             *[2]float64 `json:"oeq_correctness_ci,omitempty"`
	MCQAccuracy       *float64    `json:"mcq_accuracy,omitempty"`
	MCQAccuracyCI     *[2]float64 `json:"mcq_accuracy_ci,omitempty"`
	MCQRecall         *float64    `json:"mcq_recall,omitempty"`
	MCQRecallCI       *[2]float64 `json:"mcq_recall_ci,omitempty"`
	MCQPrecision      *float64    `json:"mcq_precision,omitempty"`
	MCQPrecisionCI    *[2]float64 `json:"mcq_precision_ci,omitempty"`
	MCQF1             *float64    `json:"mcq_f1,omitempty"`
	MCQRecallMicro    *float64    `json:"mcq_recall_micro,omitempty"`
	MCQPrecisionMicro *float64    `json:"mcq_precision_micro,omitempty"`
	MCQF1Micro        *float64    `json:"mcq_f1_micro,omitempty"`
}

// splitHeureka separates the HeurekaBench results from the AIRS-Bench ones (order kept).
// Without HeurekaBench results (the usual ledger) results comes back as it is: the copy a
// growing append made of a million results was, with the GC work it caused, the largest
// single cost of the 1M-result ledger beyond parse and sort (issue 18's profile).
func splitHeureka(results []Result) (airs, heureka []Result) {
	n := 0
	for i := range results {
		if results[i].Heureka != nil {
			n++
		}
	}
	if n == 0 {
		return results, nil
	}
	airs = make([]Result, 0, len(results)-n)
	heureka = make([]Result, 0, n)
	for i := range results {
		if results[i].Heureka != nil {
			heureka = append(heureka, results[i])
		} else {
			airs = append(airs, results[i])
		}
	}
	return airs, heureka
}

// computeHeureka builds the HeurekaBench table; nil when there are no HeurekaBench results
// (so a ledger without them keeps its canonical bytes and root).
func computeHeureka(results []Result, tasks []TaskInfo, rounds int) (*HeurekaTable, error) {
	if len(results) == 0 {
		return nil, nil
	}
	for i := range results {
		if results[i].valid() {
			if err := CheckHeurekaQuestions(results[i].Heureka.Questions); err != nil {
				results[i].Status = "INVALID: attested questions: " + err.Error()
			}
		}
	}
	in, err := sortInputs(results, tasks, "population")
	if err != nil {
		return nil, err
	}
	digest := heurekaDigest(in, rounds)
	seed := sha256.Sum256(append([]byte("evalmesh heureka bootstrap v1\x00"), digest[:]...))
	elo, fit, bootReg := fitElo(in, rounds, seed, EloBootstrapGames)
	t := &HeurekaTable{InputsDigest: hex.EncodeToString(digest[:]), EloFit: fit, EloBootstrapRegularised: bootReg}
	for _, ti := range in.tasks {
		t.Tasks = append(t.Tasks, ti.Name)
	}
	agents := make([]Agent, len(elo))
	copy(agents, elo)
	rankAndSort(agents)
	for _, a := range agents {
		row := HeurekaAgent{Agent: a.Agent, Elo: a.Elo, EloCI: a.EloCI, Rank: a.Rank}
		if a.Agent != SOTAPlayer {
			fillHeurekaAgent(&row, in, rounds, seed)
		}
		t.Agents = append(t.Agents, row)
	}
	return t, nil
}

// heurekaKey names one question of one task.
type heurekaKey struct{ task, id string }

// fillHeurekaAgent pools the agent's valid runs per question and bootstraps over questions.
func fillHeurekaAgent(row *HeurekaAgent, in *ledgerInputs, rounds int, seed [32]byte) {
	byQ := map[heurekaKey][]HeurekaQuestion{}
	for i := range in.runs {
		r := in.at(i)
		if r.Agent != row.Agent {
			continue
		}
		row.Runs++
		if !r.valid() {
			continue
		}
		row.ValidRuns++
		for _, q := range r.Heureka.Questions {
			k := heurekaKey{r.Task, q.ID}
			byQ[k] = append(byQ[k], q)
		}
	}
	keys := make([]heurekaKey, 0, len(byQ))
	for k := range byQ {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b heurekaKey) int {
		if a.task != b.task {
			if a.task < b.task {
				return -1
			}
			return 1
		}
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
	if len(keys) == 0 {
		return
	}
	groups := make([][]HeurekaQuestion, len(keys))
	for i, k := range keys {
		groups[i] = byQ[k]
	}
	stats := func(pick func(i int) int) (oeq, acc, rec, prec float64, c MCQCounts) {
		sum, n := 0.0, 0
		for i := range groups {
			for _, q := range groups[pick(i)] {
				sum += q.OEQ
				n++
				c.add(q)
			}
		}
		return sum / float64(n), c.Value("mcqaccuracy"), c.Value("mcqrecallmacro"), c.Value("mcqprecisionmacro"), c
	}
	oeq, acc, rec, prec, c := stats(func(i int) int { return i })
	row.Questions = c.Questions
	set := func(v float64) *float64 { r := round9(v); return &r }
	row.OEQ, row.MCQAccuracy, row.MCQRecall, row.MCQPrecision = set(oeq), set(acc), set(rec), set(prec)
	row.MCQF1 = set(c.Value("mcqf1macro"))
	row.MCQRecallMicro, row.MCQPrecisionMicro, row.MCQF1Micro = set(c.Value("mcqrecallmicro")), set(c.Value("mcqprecisionmicro")), set(c.Value("mcqf1micro"))

	d := &indexDrawer{rng: rand.NewChaCha8(roundSeed(seed, "heureka questions "+row.Agent, 0)), n: uint32(len(groups))}
	cols := make([][]float64, 4)
	for r := 0; r < rounds; r++ {
		draw := make([]int, len(groups))
		for i := range draw {
			draw[i] = int(d.next())
		}
		o, a, re, p, _ := stats(func(i int) int { return draw[i] })
		for j, v := range []float64{o, a, re, p} {
			cols[j] = append(cols[j], v)
		}
	}
	ci := func(col []float64) *[2]float64 {
		sort.Float64s(col)
		v := [2]float64{round9(quantile(col, 0.025)), round9(quantile(col, 0.975))}
		return &v
	}
	row.OEQCI, row.MCQAccuracyCI, row.MCQRecallCI, row.MCQPrecisionCI = ci(cols[0]), ci(cols[1]), ci(cols[2]), ci(cols[3])
}

// heurekaDigest hashes the sorted HeurekaBench inputs, every per-question field included,
// so any change of an attested verdict changes the table (and the ledger root).
func heurekaDigest(in *ledgerInputs, rounds int) [32]byte {
	base := inputsDigests(in, rounds, "heureka")[0]
	h := sha256.New()
	h.Write([]byte("evalmesh heureka inputs v1\x00"))
	h.Write(base[:])
	var buf []byte
	for i := range in.runs {
		r := in.at(i)
		buf = binary.AppendUvarint(buf[:0], uint64(len(r.Heureka.Questions)))
		for _, q := range r.Heureka.Questions {
			buf = binary.AppendUvarint(buf, uint64(len(q.ID)))
			buf = append(buf, q.ID...)
			buf = binary.BigEndian.AppendUint64(buf, math.Float64bits(q.OEQ))
			buf = binary.AppendVarint(buf, int64(q.TP))
			buf = binary.AppendVarint(buf, int64(q.FP))
			buf = binary.AppendVarint(buf, int64(q.FN))
		}
		h.Write(buf)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ScoreFunc scores a CSV submission against a labels CSV with a built-in metric. The CLI
// passes scoring.ScoreCSV; tasks does not import scoring, so scoring stays free to use
// tasks' types later without a cycle.
// task is the task name: a few AIRS-Bench tasks compare answers their own way.
type ScoreFunc func(task, metric string, submission, labels []byte, header []string, rows int, scoringColumns []string) (float64, error)

// CheckOptions tunes Check.
type CheckOptions struct {
	// Score, if set, runs the gold-submission check.
	Score ScoreFunc
}

// CheckReport is the outcome of Check.
type CheckReport struct {
	Dir      string     `json:"dir"`
	Name     string     `json:"name,omitempty"`
	OK       bool       `json:"ok"`
	Problems []string   `json:"problems,omitempty"`
	Warnings []string   `json:"warnings,omitempty"`
	Gold     *GoldCheck `json:"gold,omitempty"`
}

// GoldCheck is the upstream task-folder check: the gold submission scores exactly the
// optimum, and a permuted gold scores strictly worse (else the metric or the labels do
// not depend on row order, and any submission could pass).
type GoldCheck struct {
	Submission string          `json:"submission"`
	Labels     string          `json:"labels"`
	Metric     string          `json:"metric"`
	Optimal    float64         `json:"optimal_score"`
	Score      *float64        `json:"score,omitempty"`
	OK         bool            `json:"ok"`
	Error      string          `json:"error,omitempty"`
	Permuted   []PermutedCheck `json:"permuted,omitempty"`
}

// PermutedCheck is one permuted gold submission and its score.
type PermutedCheck struct {
	Source string   `json:"source"`
	Score  *float64 `json:"score,omitempty"`
	OK     bool     `json:"ok"`
	Error  string   `json:"error,omitempty"`
}

// goldNames are where a bundle may keep a gold submission, in order of preference.
var goldNames = []string{"gold_submission.csv", "evaluate/gold_submission.csv", "source/gold_submission.csv"}

// Check validates the bundle at dir and, when it has a gold submission, labels and
// opts.Score, runs the gold check. Problems make OK false; warnings do not.
func Check(dir string, opts CheckOptions) *CheckReport {
	r := &CheckReport{Dir: dir}
	b, err := Open(dir)
	if err != nil {
		var ve *ValidationError
		var le *LayoutError
		switch {
		case errors.As(err, &ve):
			for _, f := range ve.Fields {
				r.Problems = append(r.Problems, "task.yaml: "+f.Error())
			}
		case errors.As(err, &le):
			r.Problems = append(r.Problems, le.Problems...)
		default:
			r.Problems = append(r.Problems, err.Error())
		}
		return r
	}
	m := b.Meta
	r.Name = m.Name
	warn, probs := scanTree(dir)
	r.Warnings = append(r.Warnings, warn...)
	r.Problems = append(r.Problems, probs...)
	r.Warnings = append(r.Warnings, unknownKeys(m)...)
	if p, err := ReadRegular(b.PromptPath()); err == nil && len(bytes.TrimSpace(p)) == 0 {
		r.Warnings = append(r.Warnings, "prompt.md is empty: the agent is told nothing")
	}
	if w := m.EstimatedWorstScore; w != nil {
		if m.Metric.LowerIsBetter && *w < m.SOTA.Score || !m.Metric.LowerIsBetter && *w > m.SOTA.Score {
			r.Warnings = append(r.Warnings, fmt.Sprintf("estimated_worst_score %v is better than sota.score %v", *w, m.SOTA.Score))
		}
	}
	if m.Evaluator.Labels == "" && m.Evaluator.Image == "" {
		r.Warnings = append(r.Warnings, "evaluator has a metric but no labels and no image: nothing can score this task yet (import with --data, or set evaluator.labels)")
	}

	if m.IsHeureka() {
		r.Problems = append(r.Problems, checkHeurekaBundle(b)...)
		r.OK = len(r.Problems) == 0
		return r
	}
	gold := ""
	for _, g := range goldNames {
		if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(g))); err == nil && fi.Mode().IsRegular() {
			gold = g
			break
		}
	}
	switch {
	case gold == "":
		r.Warnings = append(r.Warnings, "no gold submission (gold_submission.csv at the root or under evaluate/): gold check skipped")
	case m.Evaluator.Labels == "":
		r.Warnings = append(r.Warnings, "gold submission found but evaluator.labels is not set: gold check skipped")
	case opts.Score == nil:
		r.Warnings = append(r.Warnings, "no scorer given: gold check skipped")
	default:
		r.Gold = goldCheck(b, gold, opts.Score)
		if !r.Gold.OK {
			r.Problems = append(r.Problems, "gold check failed: "+r.Gold.summary())
		}
	}
	r.OK = len(r.Problems) == 0
	return r
}

func (g *GoldCheck) summary() string {
	if g.Error != "" {
		return g.Error
	}
	if g.Score != nil && *g.Score != g.Optimal {
		return fmt.Sprintf("gold %s scores %v, expected the optimum %v", g.Submission, *g.Score, g.Optimal)
	}
	for _, p := range g.Permuted {
		if !p.OK {
			if p.Error != "" {
				return fmt.Sprintf("permuted gold (%s): %s", p.Source, p.Error)
			}
			return fmt.Sprintf("permuted gold (%s) scores %v, not strictly worse than the gold's %v", p.Source, *p.Score, *g.Score)
		}
	}
	return "failed"
}

// PermuteSeed seeds the deterministic shuffle of the gold rows.
const PermuteSeed = 20240501

func goldCheck(b *Bundle, gold string, score ScoreFunc) *GoldCheck {
	m := b.Meta
	g := &GoldCheck{Submission: gold, Labels: m.Evaluator.Labels, Metric: m.Evaluator.Metric, Optimal: m.Metric.OptimalScore}
	if g.Metric == "" {
		g.Metric = m.Metric.Name
	}
	sub, err := ReadRegular(filepath.Join(b.Dir, filepath.FromSlash(gold)))
	if err != nil {
		g.Error = err.Error()
		return g
	}
	labels, err := ReadRegular(b.LabelsPath())
	if err != nil {
		g.Error = err.Error()
		return g
	}
	run := func(s []byte) (*float64, error) {
		v, err := score(m.Name, g.Metric, s, labels, m.Submission.Header, m.Submission.Rows, m.ScoringColumn)
		if err != nil {
			return nil, err
		}
		return &v, nil
	}
	g.Score, err = run(sub)
	if err != nil {
		g.Error = "gold submission: " + err.Error()
		return g
	}
	ok := *g.Score == g.Optimal
	// Strictly worse than the gold's own score: when the gold misses the optimum, a
	// permuted copy scoring the same as the gold must not read as "worse".
	goldScore := *g.Score
	worse := func(v float64) bool {
		if m.Metric.LowerIsBetter {
			return v > goldScore
		}
		return v < goldScore
	}
	perms := []struct {
		src  string
		data []byte
	}{}
	shuffled, err := PermuteCSV(sub, PermuteSeed)
	if err != nil {
		g.Error = "gold submission: " + err.Error()
		return g
	}
	perms = append(perms, struct {
		src  string
		data []byte
	}{fmt.Sprintf("rows shuffled, seed %d", PermuteSeed), shuffled})
	// Upstream ships permuted golds beside the gold (SVAMP): check those too.
	golddir := filepath.Dir(filepath.Join(b.Dir, filepath.FromSlash(gold)))
	matches, _ := filepath.Glob(filepath.Join(golddir, "gold_submission_permuted*.csv"))
	sort.Strings(matches)
	for _, p := range matches {
		data, err := ReadRegular(p)
		if err != nil {
			continue
		}
		rel, _ := filepath.Rel(b.Dir, p)
		perms = append(perms, struct {
			src  string
			data []byte
		}{filepath.ToSlash(rel), data})
	}
	for _, p := range perms {
		pc := PermutedCheck{Source: p.src}
		pc.Score, err = run(p.data)
		if err != nil {
			pc.Error = err.Error()
		} else {
			pc.OK = worse(*pc.Score) && !math.IsNaN(*pc.Score)
		}
		ok = ok && pc.OK
		g.Permuted = append(g.Permuted, pc)
	}
	g.OK = ok
	return g
}

// PermuteCSV shuffles the data rows of a CSV (header kept first) with a fixed seed, so the
// check is the same on every node. Rows are split on newlines: gold submissions with
// quoted multi-line cells are shuffled by physical line only if none exist.
func PermuteCSV(data []byte, seed uint64) ([]byte, error) {
	text := strings.TrimRight(string(data), "\r\n")
	lines := strings.Split(text, "\n")
	if len(lines) < 3 {
		return nil, fmt.Errorf("%d data rows: too few to permute", len(lines)-1)
	}
	if strings.Count(text, "\"")%2 != 0 {
		return nil, errors.New("unbalanced quotes; cannot permute by line")
	}
	for _, l := range lines {
		if strings.Count(l, "\"")%2 != 0 {
			return nil, errors.New("quoted multi-line cells; cannot permute by line")
		}
	}
	rows := append([]string(nil), lines[1:]...)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	// A shuffle may by chance keep every row in place: rotate then.
	same := true
	for i := range rows {
		if rows[i] != lines[i+1] {
			same = false
			break
		}
	}
	if same {
		rows = append(rows[1:], rows[0])
	}
	return []byte(lines[0] + "\n" + strings.Join(rows, "\n") + "\n"), nil
}

// scanTree finds what Pack will skip (warnings) or refuse (problems).
func scanTree(dir string) (w, probs []string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			probs = append(probs, err.Error())
			return nil
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(d.Name(), ".") {
			w = append(w, filepath.ToSlash(rel)+": hidden; pack skips it (as kubo does without --hidden)")
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			probs = append(probs, filepath.ToSlash(rel)+": "+describeMode(d.Type()))
		}
		return nil
	})
	return w, probs
}

// unknownKeys warns about task.yaml keys this version does not know. They are kept (a newer
// evalmesh may use them), but one is more often a typo — `sotta:` beside a missing sota.
// The `airs` block an import writes is known.
func unknownKeys(m *Meta) []string {
	var w []string
	add := func(prefix string, extra map[string]any) {
		for _, k := range sortedKeys(extra) {
			if prefix == "" && k == "airs" {
				continue
			}
			w = append(w, fmt.Sprintf("task.yaml: unknown key %s%s: kept, but this evalmesh does not use it (a typo?)", prefix, k))
		}
	}
	add("", m.Extra)
	add("dataset.", m.Dataset.Extra)
	add("dataset.splits.", m.Dataset.Splits.Extra)
	add("metric.", m.Metric.Extra)
	add("submission.", m.Submission.Extra)
	add("sota.", m.SOTA.Extra)
	add("limits.", m.Limits.Extra)
	add("evaluator.", m.Evaluator.Extra)
	return w
}

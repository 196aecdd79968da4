package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/taskset"
	"github.com/evalmesh/evalmesh/scoring"
)

func init() { register(newScoreCmd) }

func newScoreCmd(g *globals) *cobra.Command {
	var resultsPath, tasksDir, worst, eloBoot string
	var rounds int
	cmd := &cobra.Command{
		Use:   "score --results FILE.jsonl --tasks DIR",
		Short: "Compute a leaderboard offline from a results file",
		Long: `Compute the leaderboard — Elo (Bradley–Terry over all seed-vs-seed games per task, with
the human SOTA as an extra player "sota"), the normalized score (AIRS-Bench's march of
nines) and the valid-submission rate — from a results file, without a node.

The results file holds one JSON object a line:
  {"task": "MathQuestionAnsweringSVAMPAccuracy", "agent": "greedy-gpt-oss", "seed": 0,
   "status": "SUCCESS", "score": 0.87}
Any status other than SUCCESS, or "score": null, is an invalid run (normalized score 0,
loses every game against a valid run). DIR holds one folder per task with an AIRS-Bench
metadata.yaml or an evalmesh task.yaml; results are matched to them by task name.

A line is refused, naming its number, when it repeats a key or has two keys that differ
only in case ("score" and "Score": tools disagree on which counts), when its seed is
negative, or when its score lies outside what the task's metric can take (better than
metric.optimal_score, or past the metric's worst value, e.g. an accuracy below 0).

The output is deterministic: the same results in any order give the same ledger root,
the sha256 of the canonical ledger JSON that nodes announce to each other.

--worst picks the normalized score's worst anchor: "population" (AIRS-Bench's reference:
the worst valid score on the task in this results file) or "estimated" (each task's
estimated_worst_score, so that adding entrants does not move everyone's score).

--elo-bootstrap picks how the Elo intervals are bootstrapped: "games" (default,
AIRS-Bench's: the games resampled and the ratings refitted every round) or
"tasks-linearised" (the tasks resampled, one linear step from the maximum-likelihood
ratings per round: the intervals then mean variation across tasks, not across games, and
are wider; fast enough for thousands of agents). docs/scoring.md §4 has both.

Examples:
  evalmesh score --results runs.jsonl --tasks airs-bench/airsbench/tasks/rad
  evalmesh score --results runs.jsonl --tasks bundles/ --worst estimated --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if resultsPath == "" || tasksDir == "" {
				return fmt.Errorf("--results FILE.jsonl and --tasks DIR are both required (see evalmesh score --help)")
			}
			l, err := scoreFile(resultsPath, tasksDir, scoring.Options{Worst: worst, BootstrapRounds: rounds, EloBootstrap: eloBoot})
			if err != nil {
				return err
			}
			return printLedger(cmd.OutOrStdout(), l, g.jsonOut)
		},
	}
	cmd.Flags().StringVar(&resultsPath, "results", "", "results file, one JSON object a line")
	cmd.Flags().StringVar(&tasksDir, "tasks", "", "folder of task folders (metadata.yaml or task.yaml)")
	cmd.Flags().StringVar(&worst, "worst", "population", `worst anchor of the normalized score: "population" or "estimated"`)
	cmd.Flags().IntVar(&rounds, "bootstrap-rounds", 100, "bootstrap rounds for the confidence intervals")
	cmd.Flags().StringVar(&eloBoot, "elo-bootstrap", scoring.EloBootstrapGames, `Elo interval bootstrap: "games" (resample games, refit) or "tasks-linearised" (resample tasks, linear step)`)
	return cmd
}

func printLedger(w io.Writer, l *scoring.Ledger, asJSON bool) error {
	if asJSON {
		return printJSON(w, l)
	}
	return l.WriteTable(w)
}

// scoreFile reads a results file and the task folders, checks that every result names a
// known task (the error names the line), and computes the ledger.
func scoreFile(resultsPath, tasksDir string, opts scoring.Options) (*scoring.Ledger, error) {
	folders, err := taskset.Load(tasksDir)
	if err != nil {
		return nil, err
	}
	infos := make([]scoring.TaskInfo, len(folders))
	ranges := make(map[string][2]float64, len(folders))
	for i, f := range folders {
		infos[i] = f.Info
		lo, hi := scoring.ScoreRange(f.Info, f.Metric)
		ranges[f.Info.Name] = [2]float64{lo, hi}
	}
	data, err := os.ReadFile(resultsPath)
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	results, lines, err := scoring.ParseResultsJSONLLines(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", resultsPath, err)
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("%s: no results in the file; expected one JSON object a line", resultsPath)
	}
	known := make(map[string]bool, len(infos))
	for _, ti := range infos {
		known[ti.Name] = true
	}
	for i, r := range results {
		if !known[r.Task] {
			return nil, fmt.Errorf("%s: results line %d: unknown task %q: %s has no task folder with that name (%s)",
				resultsPath, lines[i], r.Task, tasksDir, knownList(infos))
		}
	}
	if i, err := scoring.CheckScoreRanges(results, ranges); err != nil {
		return nil, fmt.Errorf("%s: results line %d: %w", resultsPath, lines[i], err)
	}
	l, err := scoring.ComputeLedger(results, infos, opts)
	if err != nil {
		if a, b, ok := duplicateLines(results, lines); ok {
			r := results[a]
			return nil, fmt.Errorf("%s: results lines %d and %d are both task %q agent %q seed %d: keep one result per run",
				resultsPath, lines[a], lines[b], r.Task, r.Agent, r.Seed)
		}
		return nil, err
	}
	return l, nil
}

// duplicateLines finds two results for the same (task, agent, seed), so the error can name
// their lines; only called once the ledger has refused the file, so it costs nothing on
// the usual path.
func duplicateLines(results []scoring.Result, lines []int) (first, second int, ok bool) {
	type slot struct {
		task, agent string
		seed        int
	}
	seen := make(map[slot]int, len(results))
	for i, r := range results {
		k := slot{r.Task, r.Agent, r.Seed}
		if j, dup := seen[k]; dup {
			return j, i, true
		}
		seen[k] = i
	}
	return 0, 0, false
}

func knownList(infos []scoring.TaskInfo) string {
	var names []string
	for _, ti := range infos {
		names = append(names, ti.Name)
	}
	if len(names) > 5 {
		return fmt.Sprintf("it has %d tasks: %s, …", len(names), strings.Join(names[:5], ", "))
	}
	return "it has: " + strings.Join(names, ", ")
}

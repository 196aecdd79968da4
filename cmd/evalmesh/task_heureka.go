package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/tasks"
)

func newTaskImportHeurekaCmd(g *globals) *cobra.Command {
	var o tasks.HeurekaImportOptions
	var out, promptFile, judgePromptFile string
	cmd := &cobra.Command{
		Use:   "import-heureka ITEMS.jsonl --data DIR --out DIR",
		Short: "Make a HeurekaBench bundle from (dataset, question, answer) items",
		Long: `Build a HeurekaBench bundle (docs/bundle-format.md §8) from a JSON-lines file of items,
one a line:

  {"id": "q01",
   "oeq": {"question": "…", "answer": "the gold finding", "facts": [{"fact": "…"}]},
   "mcq": {"question": "…", "options": {"A": "…", "B": "…", "C": "…", "D": "…"}, "answer": "A,C"}}

and the dataset folder --data DIR (copied to public/data/). The questions (both forms) go to
public/questions.jsonl, the gold letters, answer text and facts to private/answers.jsonl, the
judge prompt to evaluate/judge_prompt.md. The task is scored by its judge, an evaluator image
pinned by digest (--judge-image, --judge-command) running a model pinned by digest
(--judge-model). Items are checked first: every question has both forms, options are
lettered A–D and distinct, gold letters are among the options.

Example:
  evalmesh task import-heureka sc-items.jsonl --data sc-data/ --out bundles/sc-heureka \
      --judge-image sha256:… --judge-command /judge --judge-model sha256:…`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out DIR is required: where to write the bundle")
			}
			for _, f := range []struct {
				path string
				dst  *string
			}{{promptFile, &o.Prompt}, {judgePromptFile, &o.JudgePrompt}} {
				if f.path == "" {
					continue
				}
				b, err := os.ReadFile(f.path)
				if err != nil {
					return err
				}
				*f.dst = string(b)
			}
			m, err := tasks.ImportHeureka(args[0], out, o)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]any{"dir": out, "name": m.Name, "benchmark": m.Benchmark, "metric": m.Metric, "judge": m.Heureka.Judge})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported HeurekaBench task %s into %s\n", m.Name, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "folder to create (must not exist, or be empty)")
	f.StringVar(&o.DataDir, "data", "", "the dataset folder (copied to public/data/)")
	f.StringVar(&o.Name, "name", "", "task name (default: the items file's name)")
	f.StringVar(&o.Version, "version", "1", "the bundle's version")
	f.StringVar(&o.Category, "category", "", "category (default: Single-cell Biology)")
	f.StringVar(&o.JudgeImage, "judge-image", "", "the judge's evaluator image digest sha256:<64 hex>")
	f.StringSliceVar(&o.JudgeCommand, "judge-command", nil, "the judge's argv (comma-separated or repeated)")
	f.StringVar(&o.JudgeModel, "judge-model", "", "the judge model's digest sha256:<64 hex>")
	f.StringVar(&judgePromptFile, "judge-prompt", "", "file with the judge prompt (default: the G-Eval atomic-fact rubric)")
	f.StringVar(&promptFile, "prompt", "", "file with the agent's prompt.md (default: generated)")
	f.Float64Var(&o.SOTA, "sota", 0, "the best published OEQ correctness (Elo's sota player; default 1)")
	f.Int64Var(&o.WallClockSeconds, "wall-clock", 0, "per-run limit in seconds (0: node default)")
	return cmd
}

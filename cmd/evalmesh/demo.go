package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/examples/demo"
)

func init() { register(newDemoCmd) }

func newDemoCmd(g *globals) *cobra.Command {
	var seeds int
	var agentNames, taskNames []string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the example agents on the example tasks and print the leaderboard (no downloads)",
		Long: `Run the whole pipeline on embedded defaults: create a node home (a temporary one unless
--home is given), generate the three example tasks (arithmetic word problems / Accuracy,
a regression / MAE, review sentiment / Accuracy), run every baseline agent on every task for
a few seeds with the process executor, sign each run attestation, verify them all as a peer
would, and print the leaderboard computed from what verified (Elo with the human SOTA as a
player, normalized score, valid-submission rate).

No Docker, GPU or network is needed. The home keeps the tasks (examples/tasks), the runs,
the submissions and logs (objects/) and the attestations for a closer look.

Examples:
  evalmesh demo
  evalmesh demo --home /tmp/lab --seeds 5 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts := demo.Options{Home: g.homeFlag, Seeds: seeds, Agents: agentNames, Tasks: taskNames}
			if !g.jsonOut {
				opts.Log = cmd.ErrOrStderr()
			}
			res, err := demo.Execute(ctx, opts)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			valid := 0
			for _, r := range res.Runs {
				if r.Valid {
					valid++
				}
			}
			fmt.Fprintf(w, "\n%d runs (%d valid), %d attestations signed and verified in %.1f s; home %s\n\n",
				len(res.Runs), valid, res.Verified, res.Seconds, res.Home)
			return res.Ledger.WriteTable(w)
		},
	}
	cmd.Flags().IntVar(&seeds, "seeds", 3, "seeds per (task, agent)")
	cmd.Flags().StringSliceVar(&agentNames, "agents", nil, "example agents to run (default: constant,heuristic,flaky,solver)")
	cmd.Flags().StringSliceVar(&taskNames, "tasks", nil, "example tasks to run (default: arithmetic,regression,sentiment)")
	return cmd
}

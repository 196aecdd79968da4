package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
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
a few seeds with the process executor, and print the leaderboard exactly as
"evalmesh ledger" computes it (Elo with the human SOTA as a player, normalized score,
valid-submission rate).

The trust chain is the real one: the demo creates a lab (HOME/demo-lab), the lab certifies
the demo node (HOME/node-cert.json), every run attestation is signed by the node with that
certificate inside, and HOME/trust.yaml lists only the lab's key. The leaderboard is
computed from the attestation files in HOME/attestations verified under that trust file,
with tasks named by bundle CID (HOME/examples/tasks) and agents by spec
(HOME/examples/agents). The last lines print the ledger root and the "evalmesh ledger"
command that recomputes it from those files; edit an attestation and that command
refuses it by name.

No Docker, GPU or network is needed. The home keeps the tasks, the runs, the submissions
and logs (objects/) and the attestations for a closer look. A home that already holds a
certificate from another lab is refused: run the demo in a fresh home.

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
			fmt.Fprintf(w, "\n%d runs (%d valid) signed by node %s under certificate %s of lab %s in %.1f s; home %s\n\n",
				len(res.Runs), valid, res.Node, res.CertID, res.LabName, res.Seconds, res.Home)
			if err := res.Ledger.WriteTable(w); err != nil {
				return err
			}
			return printDemoLedger(w, cmd.ErrOrStderr(), res)
		},
	}
	cmd.Flags().IntVar(&seeds, "seeds", 3, "seeds per (task, agent)")
	cmd.Flags().StringSliceVar(&agentNames, "agents", nil, "example agents to run (default: constant,heuristic,flaky,solver)")
	cmd.Flags().StringSliceVar(&taskNames, "tasks", nil, "example tasks to run (default: arithmetic,regression,sentiment)")
	return cmd
}

// printDemoLedger says how the table was reached: how many attestation files verified under
// the demo lab, what counted, the root, and the `evalmesh ledger` command that recomputes it
// (refused files and excluded runs are named on stderr, as `evalmesh ledger` names them).
func printDemoLedger(stdout, stderr io.Writer, res *demo.Result) error {
	rep := res.Report
	fmt.Fprintf(stdout, "\n%d attestations verified under lab %s (%s): %d counted, %d refused, %d excluded; ledger root %s\n",
		res.Verified, res.Lab, res.LabName, rep.Counted, len(rep.Refused), len(rep.Excluded), res.LedgerRoot)
	for _, r := range rep.Refused {
		fmt.Fprintf(stderr, "refused %s\n", r)
	}
	for _, e := range rep.Excluded {
		line := fmt.Sprintf("excluded %s (%s seed %d): %s", e.ID, e.Principal, e.Slot.Seed, e.Reason)
		if e.Detail != "" {
			line += " (" + e.Detail + ")"
		}
		fmt.Fprintln(stderr, line)
	}
	q := make([]string, len(res.LedgerCommand))
	for i, a := range res.LedgerCommand {
		q[i] = shellQuote(a)
	}
	_, err := fmt.Fprintf(stdout, "trust file %s lists only the lab's key; recompute the same root from the files left behind:\n  %s\n",
		res.TrustFile, strings.Join(q, " "))
	return err
}

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

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
	var seeds, nodes int
	var keep bool
	var dashboardListen string
	var agentNames, taskNames []string
	cmd := &cobra.Command{
		Use:   "demo [--nodes N] [--keep]",
		Short: "Run a network of labs on this machine: a campaign, runs, re-scores, one ledger root",
		Long: `Run the network on embedded defaults, with no downloads, Docker or GPUs: by default three
labs on this machine, each with its own lab key, node home and daemon on 127.0.0.1 (real
libp2p, real gossipsub, real bundle transfer), and a trust file listing the three labs.

The example tasks (arithmetic word problems / Accuracy, a regression / MAE, review
sentiment / Accuracy, and the HeurekaBench example heureka-sc / OEQCorrectness) are added on
the first lab's node only and reach the others over the network. Two campaigns with
replication 1, signed by the second lab, are published on its node: the baseline agents x
the AIRS-style tasks x 3 seeds, and the co-scientists x heureka-sc x 3 seeds. The slots
spread across every node (claims over gossip, rendezvous order); each run is signed by the
node that ran it under its lab's certificate and gossiped; every run is re-scored by another
lab, which fetches the submission by CID and scores it against its own copy of the bundle (a
HeurekaBench run: re-runs the task's judge, the stand-in keyword judge, a test double for an
LLM judge). Each node computes the ledger from what it verified. The demo prints the
leaderboard and the HeurekaBench table, who ran and who re-scored what, each node's ledger
root (equal, over both tables), and the evalmesh ledger command that recomputes the root
from the files it exported.

This network counts process-executor runs, which a real network's default policy does not:
the demo agents run as plain processes, without a container's isolation.

The network audits by re-execution (network document ledger.audits, at the default rate):
each lab re-runs the runs of other labs its VRF draw picks (at first every result no other
lab's result can judge yet), signs an audit, and every ledger judges it; each node's line
says how many runs its lab audited. The demo reports once no node owes an audit.

The arithmetic task runs with runners without labels (network document ledger.scorers): it
is sealed, its key granted only to lab1 and lab2, which score it; the other labs run its
slots without the labels and sign each submission with no score, and the ledger counts each
run with the scoring labs' verdict.

--nodes 1 runs the single-node pipeline instead (one lab, no network). --keep leaves the
daemons running until Ctrl-C and prints each node's home and addresses, and its web
dashboard (leaderboard, heatmap, runs, peers; --dashboard-listen picks the first node's
address), so you can open it in a browser or try
evalmesh --home HOME campaign ls, campaign status ID, ledger status, rescore ID.

Examples:
  evalmesh demo
  evalmesh demo --nodes 4 --json
  evalmesh demo --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if nodes == 1 {
				return runSingleDemo(cmd, g, demo.Options{Home: g.homeFlag, Seeds: seeds, Agents: agentNames, Tasks: taskNames})
			}
			opts := demo.NetOptions{Dir: g.homeFlag, Nodes: nodes, Seeds: seeds, Agents: agentNames, Tasks: taskNames, Keep: keep}
			if keep {
				opts.Dashboard = dashboardListen
			}
			if !g.jsonOut {
				opts.Log = cmd.ErrOrStderr()
			}
			w := cmd.OutOrStdout()
			if keep {
				opts.Ready = func(res *demo.NetResult) {
					printNetDemo(w, g.jsonOut, res)
					fmt.Fprintln(w, "\ndaemons keep running; Ctrl-C stops them. Try:")
					for _, n := range res.Nodes {
						fmt.Fprintf(w, "  %s  home %s  api %s\n", n.Lab, n.Home, n.API)
						if n.Dashboard != "" {
							fmt.Fprintf(w, "      dashboard %s\n", n.Dashboard)
						}
						for _, a := range n.Addrs {
							fmt.Fprintf(w, "      %s\n", a)
						}
					}
					fmt.Fprintf(w, "  evalmesh --home %s campaign status %s\n", res.Nodes[0].Home, res.Campaign)
				}
			}
			res, err := demo.ExecuteNetwork(ctx, opts)
			if err != nil {
				return err
			}
			if !keep {
				printNetDemo(w, g.jsonOut, res)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 3, "labs in the demo network, one node each (1: the single-node pipeline)")
	cmd.Flags().BoolVar(&keep, "keep", false, "leave the daemons running until interrupted, printing each node's home and addresses")
	cmd.Flags().StringVar(&dashboardListen, "dashboard-listen", "127.0.0.1:0", "with --keep: the first node's web dashboard address (the others pick free ports); \"\" serves none")
	cmd.Flags().IntVar(&seeds, "seeds", 3, "seeds per (task, agent)")
	cmd.Flags().StringSliceVar(&agentNames, "agents", nil, "example agents to run (default: constant,heuristic,flaky,solver,cosci-hasty,cosci-thorough; the co-scientists answer only heureka-sc)")
	cmd.Flags().StringSliceVar(&taskNames, "tasks", nil, "example tasks to run (default: arithmetic,regression,sentiment,heureka-sc)")
	return cmd
}

// printNetDemo prints the network demo's result: the leaderboard, who ran and re-scored
// what, each node's root, and the command that recomputes it.
func printNetDemo(w io.Writer, asJSON bool, res *demo.NetResult) {
	if asJSON {
		printJSON(w, res)
		return
	}
	var campaigns []string
	if res.Campaign != "" {
		campaigns = append(campaigns, "campaign "+res.Campaign)
	}
	if res.HeurekaCampaign != "" {
		campaigns = append(campaigns, "HeurekaBench campaign "+res.HeurekaCampaign)
	}
	fmt.Fprintf(w, "\nnetwork %s: %d labs, %s, %d runs in %.1f s\npolicy: %s\n\n", res.Network, len(res.Nodes), strings.Join(campaigns, ", "), len(res.Runs), res.Seconds, res.Policy)
	res.Ledger.WriteTable(w) // the AIRS-Bench rows, then the HeurekaBench table when it has runs
	if res.Ledger.Heureka != nil {
		fmt.Fprintln(w, "HeurekaBench judge: the stand-in keyword judge (a test double for an LLM judge), pinned by the task; each run judged on the node that ran it and re-judged by another lab")
	}
	fmt.Fprintln(w, "\nwho ran and who re-scored each run:")
	for _, r := range res.Runs {
		score := "invalid"
		if r.Valid && r.Score != nil {
			score = fmt.Sprintf("%.4g", *r.Score)
		}
		verb := "re-scored by"
		if r.Unscored {
			verb = "without labels; scored by" // runners without labels (ledger.scorers)
		}
		line := fmt.Sprintf("  %-12s %-14s seed %d  %-8s ran by %s, %s %s", r.Task, r.Agent, r.Seed, score, r.RanBy, verb, strings.Join(r.RescoredBy, ","))
		if !r.Counted {
			// A duplicate of a race between two claims: listed, not counted.
			line += "; not counted: " + r.Excluded
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w, "\nledger root of each node (over both tables):")
	for _, n := range res.Nodes {
		fmt.Fprintf(w, "  %s  %s  %s  (signed %d runs, %d re-scores; audited %d runs)\n", n.Lab, n.PeerID, n.LedgerRoot, n.Runs, n.Rescores, n.Audits)
	}
	q := make([]string, len(res.LedgerCommand))
	for i, a := range res.LedgerCommand {
		q[i] = shellQuote(a)
	}
	fmt.Fprintf(w, "all %d roots equal: %s\nrecompute it from the exported files:\n  %s\n", len(res.Nodes), res.LedgerRoot, strings.Join(q, " "))
}

// runSingleDemo is `demo --nodes 1`: one lab, one node, no network.
func runSingleDemo(cmd *cobra.Command, g *globals, opts demo.Options) error {
	ctx := cmd.Context()
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

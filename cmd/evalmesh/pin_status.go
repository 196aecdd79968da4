package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/node"
)

func init() { registerSub("pin", newPinStatusCmd) }

func newPinStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status CID",
		Short: "Which labs hold an object, and whether the network's pin factor is met",
		Long: `Ask the running daemon and every node it is connected to whether they hold every block of
CID, and print, lab by lab in the order that decides who must hold it, which labs hold it,
which must (the first ledger.pin_factor labs of the network document, default 2, among the
labs whose nodes answer), and whether the factor is met. A lab counts as holding it when one
of its nodes does; a node shows its lab with its certificate. The order is rendezvous over
the labs (protocol.HolderOrder): every node computes the same one, and when a holder
leaves, the next lab in it is the one that must fetch (docs/protocol-sync.md §8).

A sealed bundle (one whose key the network's grants give to some labs) counts only the labs
granted its key: a lab without it holds bytes it cannot score from, so it is shown as "no
key" and never counts or is told to fetch, and the factor is capped at the labs with the key.

Exit status 2 when the factor is not met.

Examples:
  evalmesh pin status bafybei...
  evalmesh pin status bafkrei... --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := parseCIDArg(args[0])
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			rep, err := cl.PinStatus(cmd.Context(), c)
			if err != nil {
				return err
			}
			if g.jsonOut {
				printJSON(cmd.OutOrStdout(), rep)
			} else {
				printPinStatus(cmd.OutOrStdout(), rep)
			}
			if !rep.Met {
				return &exitError{code: 2}
			}
			return nil
		},
	}
}

func printPinStatus(w io.Writer, rep *node.PinStatusReport) {
	assigned := map[string]bool{}
	for _, l := range rep.Assigned {
		assigned[l] = true
	}
	fmt.Fprintf(w, "%s: held by %d lab(s) that count, factor %d: ", rep.Object, len(rep.Holding), rep.Factor)
	if rep.Met {
		fmt.Fprintln(w, "met")
	} else {
		fmt.Fprintln(w, "NOT MET")
	}
	if rep.KeyLabs != nil {
		fmt.Fprintf(w, "  sealed bundle: only the %d lab(s) granted its key count\n", len(rep.KeyLabs))
	}
	for _, l := range rep.Labs {
		state := "not heard from"
		switch {
		case l.Holds:
			state = fmt.Sprintf("holds (%d node(s))", len(l.Nodes))
		case l.Present:
			state = "does not hold it"
		}
		role := ""
		switch {
		case assigned[l.Lab]:
			role = "  must hold"
		case l.Present && !l.Counts:
			role = "  no key: does not count (sealed bundle)"
		}
		fmt.Fprintf(w, "  %-10s %s  %s%s\n", orDash(l.Name), l.Lab, state, role)
	}
}

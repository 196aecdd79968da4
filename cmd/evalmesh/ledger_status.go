package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/node"
)

func init() { registerSub("ledger", newLedgerStatusCmd) }

func newLedgerStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Compare this node's ledger root with every peer's, from their signed heads",
		Long: `Print this node's ledger root, attestation count and set fingerprint, and for each peer
heard on /evalmesh/<network>/heads: its root and count, and whether it agrees.

A peer can differ for three reasons, told apart:
  other network document      it runs another network policy: its root is not comparable
  different attestation set   the sets differ (sync under way, or a partition)
  ROOT MISMATCH               same document, same set, another root: a bug or a cheat;
                              reported loudly with both roots, and the command exits 2

Example:
  evalmesh ledger status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			c, err := node.NewClient(h)
			if err != nil {
				return err
			}
			st, err := c.LedgerStatus(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.jsonOut {
				if err := printJSON(out, st); err != nil {
					return err
				}
			} else {
				root := st.LedgerRoot
				if root == "" {
					root = "(not computed yet)"
				}
				fmt.Fprintf(out, "network %s  document %s\nledger root %s  (%d attestations)\n", st.Network, shortID(st.NetworkDoc), root, st.Attestations)
				if len(st.Peers) == 0 {
					fmt.Fprintln(out, "no peer heads heard yet")
				}
				for _, p := range st.Peers {
					fmt.Fprintf(out, "  %s  lab %s  root %s  %d attestations  %s  (heard %s ago)\n", p.PeerID, shortID(p.Lab),
						shortID(p.LedgerRoot), p.Attestations, p.Status, time.Since(p.LastHeard).Round(time.Second))
				}
			}
			if len(st.Mismatches) > 0 {
				for _, p := range st.Peers {
					if p.Status == "ROOT MISMATCH with equal sets" {
						fmt.Fprintf(cmd.ErrOrStderr(), "ROOT MISMATCH: peer %s computed %s from the same %d attestations; this node computed %s\n", p.PeerID, p.LedgerRoot, p.Attestations, st.LedgerRoot)
					}
				}
				return &exitError{code: 2}
			}
			return nil
		},
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/protocol"
)

func init() {
	registerSub("ledger", newLedgerStatusCmd)
	registerSub("attest", newAttestImportCmd)
}

func newLedgerStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show our ledger root and whether each peer's agrees",
		Long: `Print the running daemon's head (network, network document hash, ledger root, number of
attestations, set fingerprint) and, for every peer heard from on /heads, its head and
whether it agrees with ours:

  agrees                         same network document, same set, same root
  different attestation set      same document, other set: anti-entropy is syncing it
  other network document         the peer runs another network policy: roots not compared
  no root yet                    one side has not computed its root
  ROOT MISMATCH with equal sets  same document and set, another root: a bug or a cheat
  stale head                     no head from the peer for 3 head intervals: it left, or its
                                 heads stop reaching us; what it said last is not current

A root mismatch is printed on stderr with both roots and makes the command exit with
status 2.

Examples:
  evalmesh ledger status
  evalmesh ledger status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			st, err := c.LedgerStatus(cmd.Context())
			if err != nil {
				return err
			}
			return printLedgerStatus(cmd.OutOrStdout(), cmd.ErrOrStderr(), st, g.jsonOut)
		},
	}
}

// printLedgerStatus prints st; a root mismatch is an exitError with code 2.
func printLedgerStatus(stdout, stderr io.Writer, st node.LedgerStatus, asJSON bool) error {
	mismatch := 0
	for _, p := range st.Peers {
		if p.Status == protocol.StatusRootMismatch {
			mismatch++
			fmt.Fprintf(stderr, "ROOT MISMATCH: peer %s (lab %s) has ledger root %s for the same %d attestations (fingerprint %s) under the same network document; ours is %s. One of us is buggy or cheating.\n",
				p.PeerID, orDash(p.Lab), p.LedgerRoot, p.Attestations, p.Fingerprint, st.LedgerRoot)
		}
	}
	stale := 0
	for _, p := range st.Peers {
		if p.Stale {
			stale++
		}
	}
	if stale > 0 && stale == len(st.Peers) {
		fmt.Fprintf(stderr, "every peer's head is stale (none heard for 3 head intervals): this node may be cut off; see `evalmesh peers`\n")
	}
	if asJSON {
		if err := printJSON(stdout, st); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "network %s (document %s)\nledger root %s\nattestations %d (fingerprint %s), %d refused, %d campaigns\n",
			orDash(st.Network), orDash(st.NetworkDoc), orDash(st.LedgerRoot), st.Attestations, st.Fingerprint, st.Refused, st.Campaigns)
		if len(st.Peers) == 0 {
			fmt.Fprintln(stdout, "no peer heads heard yet")
		}
		for _, p := range st.Peers {
			fmt.Fprintf(stdout, "peer %s lab %s: %s (root %s, %d attestations, heard %s, %s ago)\n",
				p.PeerID, orDash(p.Lab), p.Status, orDash(p.LedgerRoot), p.Attestations, p.LastHeard.UTC().Format(time.RFC3339),
				time.Duration(p.AgeSeconds*float64(time.Second)).Round(time.Second))
		}
	}
	if mismatch > 0 {
		return &exitError{code: 2}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newAttestImportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "import PATH...",
		Short: "Put envelope files or folders of them into the running node's store",
		Long: `Hand attestation envelopes to the running daemon: each PATH is an envelope file or a
folder of *.json envelope files. The daemon verifies each envelope once, stores what
verifies (it is then served to peers by anti-entropy and counted by "evalmesh ledger"),
and keeps what does not apart with its reason (never forwarded). Envelopes it already has
are counted as known, not verified again.

Prints how many were new, already known, and refused, with one line per refusal on stderr.

Examples:
  evalmesh attest import inbox/
  evalmesh attest import run-1.json run-2.json --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			rep, err := importAttestations(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d new, %d already known, %d refused\n", rep.New, rep.Known, rep.Refused)
			for _, r := range rep.Refusals {
				line := "refused " + r.File + ": " + r.Reason
				if r.Detail != "" {
					line += " (" + r.Detail + ")"
				}
				fmt.Fprintln(cmd.ErrOrStderr(), line)
			}
			return nil
		},
	}
}

// importAttestations resolves paths and asks the daemon to import them.
func importAttestations(ctx context.Context, c *node.Client, paths []string) (node.ImportReport, error) {
	abs := make([]string, len(paths))
	for i, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return node.ImportReport{}, err
		}
		abs[i] = a
	}
	return c.ImportAttestations(ctx, abs)
}

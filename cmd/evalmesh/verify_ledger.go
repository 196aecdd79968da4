package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/progress"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/verify"
)

func init() { register(newVerifyLedgerCmd) }

func newVerifyLedgerCmd(g *globals) *cobra.Command {
	var docPath, executor string
	var peers []string
	var headsWait, fetchTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "verify-ledger --network-doc FILE --peer MULTIADDR [--peer MULTIADDR]... [--json]",
		Short: "Re-verify a network's leaderboard from the network alone, as an outsider (a paper's reviewer)",
		Long: `Recompute a network's ledger from what its labs' nodes serve, and say whether the root the
labs announce is the one the attestations give. It needs no lab: only the network's document
(the labs' keys and the ledger's policy; labs publish it beside their results) and the
address of one or more of the labs' nodes. It runs a node of its own in --home (a fresh home
is initialised; nothing of a lab is needed) for the length of the command:

  1. reconciles the campaign and attestation sets with each --peer (the sync protocol of
     docs/protocol-sync.md): every envelope is verified against the document's labs
     before it is kept;
  2. fetches every campaign's task bundles by CID, each block checked against its CID;
  3. computes the ledger with the document's acceptance policy and scoring options, as the
     daemons do;
  4. re-scores every counted run against its own copy of the bundle, fetching the run's
     submission by CID (the daemons' re-score code; a HeurekaBench run re-runs its judge
     with this home's executor) and compares with the attested score within the metric's
     tolerance;
  5. listens on the network's heads topic for the root each lab node announces.

It prints the root it got beside each announced root, every counted run whose score it
did not reproduce, every counted run it could not re-score and why (a sealed task whose key
this node was not granted, a submission no peer serves), and every campaign bundle no peer
served. It publishes nothing and claims nothing.

Exit status: 0 when every announced root equals the recomputed one and no re-score
disagrees; 2 otherwise (a root mismatch, a disagreeing re-score, a missing bundle, or no
head heard). Runs it could not re-score are listed but do not change the status.

Progress goes to stderr. --json prints one object (docs/cli-json.md, "verify-ledger").

Examples:
  evalmesh verify-ledger --home /tmp/reviewer --network-doc network.json \
      --peer /ip4/203.0.113.7/tcp/4201/p2p/12D3KooW...
  evalmesh verify-ledger --home /tmp/reviewer --network-doc network.json --peer ADDR1 --peer ADDR2 --json

Give a node of every lab with --peer: a submission is fetched from the connected nodes only,
and the node that ran a run, or re-scored it, is the one sure to hold it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			if _, err := h.Identity(); errors.Is(err, home.ErrNotInitialised) {
				if _, err := h.Init(); err != nil {
					return err
				}
			}
			if docPath == "" {
				docPath = h.NetworkDocPath()
			}
			if _, err := os.Stat(docPath); err != nil {
				return fmt.Errorf("network document %s: %w (give the network's document with --network-doc FILE)", docPath, err)
			}
			doc, err := loadNetworkDocFile(docPath)
			if err != nil {
				return err
			}
			if len(peers) == 0 {
				cfg, err := h.Config()
				if err != nil {
					return err
				}
				peers = cfg.Bootstrap
			}
			if len(peers) == 0 {
				return errors.New("no lab node to ask: give one or more --peer /ip4/HOST/tcp/PORT/p2p/PEER_ID (a lab's `evalmesh id` prints its node's addresses)")
			}
			r, err := nodeRunner(h, executor, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var bar *progress.Bar
			phase := ""
			rep, err := node.VerifyLedger(cmd.Context(), h, verify.Options{Doc: doc, Bootstrap: peers, Runner: r,
				HeadsWait: headsWait, FetchTimeout: fetchTimeout,
				Progress: func(p string, done, total int) {
					if p != phase {
						if phase != "" {
							bar.Finish()
						}
						phase = p
						bar = newCountProgress(cmd.ErrOrStderr(), p)
						if !progress.On(cmd.ErrOrStderr()) {
							fmt.Fprintf(cmd.ErrOrStderr(), "verify-ledger: %s (%d)\n", p, total)
						}
					}
					bar.Set(int64(done), int64(total))
				}})
			if phase != "" {
				bar.Finish()
			}
			if err != nil {
				return err
			}
			if g.jsonOut {
				printJSON(cmd.OutOrStdout(), rep)
			} else {
				printVerifyLedger(cmd.OutOrStdout(), rep)
			}
			if !rep.OK {
				return &exitError{code: 2}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&docPath, "network-doc", "", "the network's document (default HOME/network.json)")
	cmd.Flags().StringArrayVar(&peers, "peer", nil, "a lab node's multiaddr with /p2p/PEER_ID (repeatable; default: the home's bootstrap peers)")
	cmd.Flags().DurationVar(&headsWait, "heads-wait", 15*time.Second, "how long to wait for each peer's announced root")
	cmd.Flags().StringVar(&executor, "executor", "", `where a HeurekaBench run's judge is re-run: "docker" or "process" (default: the home's runner.executor)`)
	cmd.Flags().DurationVar(&fetchTimeout, "fetch-timeout", 30*time.Second, "give up a bundle or submission when no block arrives for this long")
	return cmd
}

func printVerifyLedger(w io.Writer, rep *verify.Report) {
	fmt.Fprintf(w, "network        %s (document %.16s)\n", rep.Network, rep.NetworkDoc)
	fmt.Fprintf(w, "synced         %d attestation(s), %d campaign(s)\n", rep.Attestations, rep.Campaigns)
	fmt.Fprintf(w, "recomputed     %s\n", rep.LedgerRoot)
	for _, a := range rep.Announced {
		verdict := "agrees"
		if !a.Agrees {
			verdict = "DIFFERS"
		}
		fmt.Fprintf(w, "announced      %s  %s  lab %s peer %s (%d attestations)\n", a.LedgerRoot, verdict, orDash(a.Lab), a.PeerID, a.Attestations)
	}
	if len(rep.Announced) == 0 {
		fmt.Fprintln(w, "announced      none heard: no lab node's head arrived (try a longer --heads-wait)")
	}
	fmt.Fprintf(w, "re-scored      %d of %d counted run(s); %d confirmed\n", rep.Rescored, rep.Counted, rep.Confirmed)
	for _, d := range rep.Disagreements {
		fmt.Fprintf(w, "DISAGREES      %s  lab %s  %s / %s seed %d: attested %s, re-scored here %s\n", d.Attestation, d.Lab, d.Task, d.Agent, d.Seed,
			scoreText(d.Attested, d.AttestValid), scoreText(d.Rescored, d.RescoreOK))
	}
	for _, n := range rep.NotRescored {
		fmt.Fprintf(w, "NOT RE-SCORED  %s  lab %s  %s: %s\n", n.Attestation, n.Lab, n.Task, n.Reason)
	}
	for _, m := range rep.MissingBundles {
		fmt.Fprintf(w, "MISSING        bundle %s: %s\n", m.Task, m.Reason)
	}
	switch {
	case rep.OK:
		fmt.Fprintf(w, "verified       the announced root is the one the attestations give (%.1f s)\n", rep.Seconds)
	default:
		fmt.Fprintf(w, "NOT VERIFIED   see above (%.1f s)\n", rep.Seconds)
	}
}

func scoreText(s *float64, valid bool) string {
	if !valid {
		return "invalid"
	}
	if s == nil {
		return "no score"
	}
	return strconv.FormatFloat(*s, 'g', 9, 64)
}

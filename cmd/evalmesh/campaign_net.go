package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
)

// The campaign commands that talk to the running daemon (publish, ls, status) and the
// manual re-score; `campaign create|verify` are offline, in campaign.go.

func init() {
	registerSub("campaign", newCampaignPublishCmd)
	registerSub("campaign", newCampaignLsCmd)
	registerSub("campaign", newCampaignStatusCmd)
	register(newRescoreCmd)
}

func newCampaignPublishCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "publish FILE",
		Short: "Publish a signed campaign to the network through the running daemon",
		Long: `Hand a campaign envelope (from evalmesh campaign create) to this node's daemon, which
verifies it under HOME/trust.yaml, stores it, and gossips it on /evalmesh/<network>/campaigns.
Every node of the network that trusts the signing lab then fetches the campaign's bundles
and starts claiming its slots. Any node can publish; the campaign names the lab that signed
it, not the node. Publishing the same campaign again re-gossips it. Prints the campaign ID.

Example:
  evalmesh campaign create --lab ~/acme-lab --title "svamp sweep" --task bafy... \
      --agent agents/greedy.yaml --seeds 3 --replication 1 > campaign.json
  evalmesh campaign publish campaign.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			id, err := runCampaignPublish(cmd.Context(), h, args[0])
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"id": id})
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
}

// runCampaignPublish sends the campaign in path to the daemon of h.
func runCampaignPublish(ctx context.Context, h home.Home, path string) (string, error) {
	env, err := attest.ReadEnvelopeFile(path) // bounded (1 MiB, a campaign's limit too), regular files only
	if err != nil {
		return "", err
	}
	c, err := node.NewClient(h)
	if err != nil {
		return "", err
	}
	return c.PublishCampaign(ctx, env)
}

func newCampaignLsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the campaigns the running daemon knows",
		Long: `List the campaigns this node has verified, newest first: ID, slots (tasks x agents x
seeds), replication, deadline, the signing lab and the title. A campaign whose bundles the
node is still fetching shows "fetching".`,
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
			ls, err := c.Campaigns(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.jsonOut {
				return printJSON(out, ls)
			}
			if len(ls) == 0 {
				fmt.Fprintln(out, "no campaigns yet (publish one with evalmesh campaign publish FILE)")
				return nil
			}
			for _, ci := range ls {
				state := ""
				if !ci.Ready {
					state = " (fetching bundles)"
				}
				fmt.Fprintf(out, "%s  %5d slots  replication %d  deadline %s  %s  %q%s\n", ci.ID, ci.Slots, ci.Replication,
					ci.Deadline.Format(time.RFC3339), ci.LabName, ci.Title, state)
			}
			return nil
		},
	}
}

func newCampaignStatusCmd(g *globals) *cobra.Command {
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "status ID [--watch]",
		Short: "Show a campaign's slots: unclaimed, claimed, running, done, failed",
		Long: `Show how far a campaign has got as this node sees it: slots total, unclaimed, claimed
(a live claim, run not started), running, done (a run attestation is known) and failed
(attempts exhausted by infrastructure failures), then per slot who ran it (peer, lab,
attempt, score), its run attestation, and the re-scores other labs signed of it.

--watch keeps a live progress bar on a terminal until every slot is done or failed (plain
lines when the output is not a terminal), then prints the table.

Example:
  evalmesh campaign status bafkrei... --watch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			c, err := node.NewClient(h)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			rep, err := c.CampaignStatus(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if watch {
				if rep, err = watchCampaign(cmd.Context(), c, rep, interval, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			if g.jsonOut {
				return printJSON(out, rep)
			}
			printCampaignReport(out, rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "follow the campaign with a progress bar until every slot is done or failed")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often --watch asks the daemon")
	return cmd
}

// watchCampaign polls the daemon until the campaign has no open slot, drawing progress.
func watchCampaign(ctx context.Context, c *node.Client, rep *node.CampaignReport, every time.Duration, w io.Writer) (*node.CampaignReport, error) {
	finished := func(r *node.CampaignReport) int { return r.Status.Done + r.Status.Failed }
	var bar *progressbar.ProgressBar
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar = progressbar.NewOptions(rep.Status.Slots, progressbar.OptionSetWriter(w), progressbar.OptionShowCount(),
			progressbar.OptionSetDescription("slots done"), progressbar.OptionClearOnFinish())
	}
	last := -1
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n := finished(rep)
		if bar != nil {
			_ = bar.Set(n)
		} else if n != last {
			fmt.Fprintf(w, "%d/%d slots done (%d running, %d claimed, %d unclaimed, %d failed, %d awaiting a key)\n", n, rep.Status.Slots,
				rep.Status.Running, rep.Status.Claimed, rep.Status.Unclaimed, rep.Status.Failed, rep.Status.AwaitingKey)
		}
		last = n
		if n >= rep.Status.Slots || rep.Status.Closed || rep.Status.Withdrawn {
			if bar != nil {
				_ = bar.Finish()
			}
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-t.C:
		}
		next, err := c.CampaignStatus(ctx, rep.ID)
		if err != nil {
			return rep, err
		}
		rep = next
	}
}

func printCampaignReport(w io.Writer, rep *node.CampaignReport) {
	s := rep.Status
	fmt.Fprintf(w, "campaign %s %q (lab %s)\n", rep.ID, rep.Title, rep.LabName)
	fmt.Fprintf(w, "slots %d: unclaimed %d, claimed %d, running %d, done %d, failed %d", s.Slots, s.Unclaimed, s.Claimed, s.Running, s.Done, s.Failed)
	if s.AwaitingKey > 0 {
		// Free slots whose run waits for a sealed bundle's key: a grant to that lab, or a
		// node of a lab holding the key, finishes them.
		fmt.Fprintf(w, ", awaiting a key %d", s.AwaitingKey)
	}
	if s.NotHere > 0 {
		fmt.Fprintf(w, " (and %d this node never runs: its lab scores their task, or refuses or cannot run their agent)", s.NotHere)
	}
	if s.Closed {
		fmt.Fprint(w, " (deadline passed)")
	}
	if s.Withdrawn {
		fmt.Fprint(w, " (withdrawn here: over its lab's cap since an earlier campaign of its lab came; its runs would not count)")
	}
	fmt.Fprintln(w)
	for _, r := range rep.Refused {
		fmt.Fprintf(w, "not claimed here: agent %s: %s\n", shortID(r.Agent), r.Reason)
	}
	for _, sl := range rep.Slots {
		fmt.Fprintf(w, "  %s seed %d  %s/%s  %s\n", shortID(sl.ID), sl.Seed, shortID(sl.Task), shortID(sl.Agent), sl.State)
		for _, r := range sl.Runs {
			score := "invalid"
			if r.Valid && r.Score != nil {
				score = fmt.Sprintf("%.4g", *r.Score)
			}
			var rs []string
			for _, x := range r.Rescores {
				v := "invalid"
				if x.Valid && x.Score != nil {
					v = fmt.Sprintf("%.4g", *x.Score)
				}
				rs = append(rs, fmt.Sprintf("%s by %s", v, shortID(x.PeerID)))
			}
			fmt.Fprintf(w, "      run %s by %s attempt %d: %s; re-scores: %s\n", shortID(r.AttestationID), shortID(r.PeerID), r.Attempt, score, orNone(rs))
		}
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none yet"
	}
	return strings.Join(s, ", ")
}

func shortID(id string) string {
	if len(id) > 16 {
		return id[:8] + "…" + id[len(id)-6:]
	}
	return id
}

func newRescoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rescore ATTESTATION_ID",
		Short: "Re-score another lab's run by hand: fetch its submission, score, sign, gossip",
		Long: `The manual form of what the daemon does for the runs it is chosen to re-score, for
audits: the running daemon fetches the run's submission by the CID in its attestation from
any peer that has it (checked against the attested sha256), scores it against this node's
own copy of the task bundle with the task's built-in metric, signs a re-score attestation
under this node's lab certificate and gossips it. Prints the re-score's attestation ID.
The ledger counts a run once enough other labs' re-scores agree with it (the network's
replication).

Example:
  evalmesh rescore bafkreih...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			c, err := node.NewClient(h)
			if err != nil {
				return err
			}
			id, err := c.Rescore(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"id": id, "run": args[0]})
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
}

package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/progress"
	"github.com/evalmesh/evalmesh/node"
)

func init() {
	register(newRepoCmd)
	registerSub("repo", newRepoGCCmd)
}

func newRepoCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "repo gc",
		Short: "Maintain the running node's home (garbage collection)",
		Long: `Commands that maintain the home of the running daemon.

Example:
  evalmesh repo gc --dry-run`,
	}
}

func newRepoGCCmd(g *globals) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Remove what nothing needs from the running node's home: unpinned blocks and more",
		Long: `Garbage-collect the home of the running daemon:

  - blocks under no pin (` + "`evalmesh pin rm`" + ` leaves them; a fetch or add that was refused
    removes its own at once), never while an add, import or fetch is between its first
    block and its pin;
  - pack store segments holding dead bytes, rewritten so the disk space comes back;
  - abandoned .unpack-* folders under the home (a killed unpack's temporary folder, older
    than an hour);
  - the workspace/ scratch folders of finished runs (their submissions, logs and
    attestations stay).

--dry-run reports what would go and removes nothing (segments: those already holding dead
bytes). On a terminal a bar shows each phase: mark (pinned blocks found), sweep (blocks
examined), compact (segments rewritten).

Example:
  evalmesh repo gc --dry-run
  evalmesh repo gc --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			rep, err := repoGC(cmd, c, dryRun, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			printGCReport(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be removed; remove nothing")
	return cmd
}

// repoGC runs the daemon's GC, drawing one bar per phase on errw when it is a terminal.
func repoGC(cmd *cobra.Command, c *node.Client, dryRun bool, errw io.Writer) (*node.GCReport, error) {
	var bar *progress.Bar
	var phase string
	rep, err := c.GC(cmd.Context(), dryRun, func(p string, done, total int64) {
		if p != phase {
			if bar != nil {
				bar.Finish()
			}
			phase, bar = p, newCountProgress(errw, p)
		}
		bar.Set(done, total)
	})
	if bar != nil {
		bar.Finish()
	}
	return rep, err
}

func printGCReport(w io.Writer, rep *node.GCReport) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%s %d unpinned blocks (%d bytes)\n", verb, rep.Blocks, rep.BlockBytes)
	fmt.Fprintf(w, "%s %d bytes by compacting %d pack segments\n", map[bool]string{true: "would free", false: "freed"}[rep.DryRun], rep.SegmentBytes, rep.Segments)
	fmt.Fprintf(w, "%s %d abandoned unpack folders\n", verb, len(rep.UnpackFolders))
	for _, p := range rep.UnpackFolders {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintf(w, "%s %d finished runs' workspaces\n", verb, len(rep.Workspaces))
	for _, p := range rep.Workspaces {
		fmt.Fprintf(w, "  %s\n", p)
	}
}

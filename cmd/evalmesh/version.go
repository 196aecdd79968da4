package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/runner"
)

func init() { register(newVersionCmd) }

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the evalmesh build: module version and VCS revision",
		Long: `Print the build of this binary, as every run attestation it signs records it (the
predicate's "build"): the module path and version, the git revision it was built from, and
whether the tree had uncommitted changes ("+modified").

The revision is stamped by ` + "`go build`" + ` (and ` + "`make build`" + `) in a git checkout; a binary made
by ` + "`go run`" + ` or ` + "`go test`" + `, or built outside a checkout, carries none and prints
"revision unknown". A local build's module version is "(devel)"; ` + "`go install MODULE@vX.Y.Z`" + `
stamps the release.

Example:
  make build && ./evalmesh version
  evalmesh version --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := runner.Build()
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]any{
					"module": b.Module, "version": b.Version, "revision": b.Revision, "modified": b.Modified,
				})
			}
			rev := "revision unknown"
			if b.Revision != "" {
				rev = "revision " + b.Revision
				if b.Modified {
					rev += "+modified"
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "evalmesh %s %s (%s)\n", b.Version, rev, b.Module)
			return nil
		},
	}
}

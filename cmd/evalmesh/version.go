package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { register(newVersionCmd) }

func newVersionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the evalmesh version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				v = bi.Main.Version
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"version": v})
			}
			fmt.Fprintln(cmd.OutOrStdout(), "evalmesh", v)
			return nil
		},
	}
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { register(newInitCmd) }

func newInitCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create a node home: an ed25519 identity (mode 0600) and a commented config",
		Long: `Create a node home: an ed25519 libp2p identity (identity.key, mode 0600) and a
commented config.yaml whose defaults keep every packet on 127.0.0.1.
Refuses to touch a home that already has an identity.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			id, err := h.Init()
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"home": h.Dir, "peer_id": id.String()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "initialised %s\npeer ID %s\n", h.Dir, id)
			return nil
		},
	}
}

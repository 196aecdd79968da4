package main

import (
	"encoding/base64"
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/home"
)

func init() { register(newIDCmd) }

// daemonAddrs, when set (by the daemon's CLI file), returns the running daemon's listening
// multiaddrs with /p2p/PEER_ID, or nil when no daemon runs for the home.
var daemonAddrs func(h home.Home) []string

type idOutput struct {
	PeerID    string   `json:"peer_id"`
	PublicKey string   `json:"public_key"` // base64 of the raw 32-byte ed25519 key
	Addrs     []string `json:"addrs,omitempty"`
}

// nodeID reads the identity of a home and, if its daemon runs, its addresses.
func nodeID(h home.Home) (*idOutput, error) {
	key, err := h.Identity()
	if err != nil {
		return nil, err
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	raw, err := key.GetPublic().Raw()
	if err != nil {
		return nil, err
	}
	out := &idOutput{PeerID: id.String(), PublicKey: base64.StdEncoding.EncodeToString(raw)}
	if daemonAddrs != nil {
		out.Addrs = daemonAddrs(h)
	}
	return out, nil
}

func newIDCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "id",
		Short: "Print this node's peer ID, public key and (while the daemon runs) addresses",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			out, err := nodeID(h)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "peer ID     %s\npublic key  %s\n", out.PeerID, out.PublicKey)
			for _, a := range out.Addrs {
				fmt.Fprintf(cmd.OutOrStdout(), "address     %s\n", a)
			}
			return nil
		},
	}
}

package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
)

func newNetworkDrawKeyCmd(g *globals) *cobra.Command {
	var name, labDir, keyFile string
	cmd := &cobra.Command{
		Use:   "draw-key FILE (--name NAME | --lab LABDIR) --key-file DRAWKEY",
		Short: "Name a lab's draw key in a network document (clears its signatures)",
		Long: `Give lab NAME (or the lab of LABDIR's lab.json) one draw key: the ed25519 key its nodes
draw with to re-score and audit other labs' runs (an RFC 9381 VRF, docs/attestation-format.md
"Draw keys"). Without one, each node draws with its own key, so a lab that certifies k nodes
can act from whichever node's draw is lowest and be drawn up to k times as often; once the document
names the lab's draw key, its draws count only under that key, one per run.

The private half is written to DRAWKEY (mode 0600) if that file does not exist; an existing
DRAWKEY is read and named instead (to name it again after the document changed). It is not
the lab key, which stays off the nodes: copy DRAWKEY to every node of the lab as
HOME/draw.key, then the signed document. A node whose document names its lab's draw key
refuses to start without that file. The document changes, so every signature is dropped:
the labs sign it again.

Example:
  evalmesh network draw-key network.json --lab ~/acme-lab --key-file ~/acme-lab/draw.key
  scp ~/acme-lab/draw.key node1:/srv/evalmesh/draw.key     # every node of the lab
  evalmesh network sign network.json --lab ~/acme-lab      # and each other lab`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return fmt.Errorf("--key-file DRAWKEY is required: where the draw key's private half is (or is to be written)")
			}
			if labDir != "" {
				l, err := networkLabFromDir(labDir, name)
				if err != nil {
					return err
				}
				name = l.Name
			}
			if name == "" {
				return fmt.Errorf("give --name NAME (the lab's name in the document) or --lab LABDIR")
			}
			d, made, err := networkDrawKey(args[0], name, keyFile)
			if err != nil {
				return err
			}
			what := "read"
			if made {
				what = "wrote"
			}
			l, _ := d.Lab(name)
			return networkReport(cmd, g, args[0], fmt.Sprintf("lab %q draws with key %s (%s %s: copy it to each of the lab's nodes as HOME/%s)", name, l.DrawKey, what, keyFile, home.DrawKeyFile), d)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the lab's name in the document")
	cmd.Flags().StringVar(&labDir, "lab", "", "lab directory whose lab.json names the lab (only its public file is read)")
	cmd.Flags().StringVar(&keyFile, "key-file", "", "the draw key's private half: written (0600) if absent, else read")
	return cmd
}

// networkDrawKey names the draw key in keyFile (made there first if absent: made) as lab
// name's in the document at path, clearing its signatures.
func networkDrawKey(path, name, keyFile string) (d *protocol.NetworkDoc, made bool, err error) {
	d, err = networkRead(path)
	if err != nil {
		return nil, false, err
	}
	key, err := home.ReadKey(keyFile, "draw key")
	if errors.Is(err, fs.ErrNotExist) {
		made = true
		if key, _, err = crypto.GenerateEd25519Key(nil); err != nil {
			return nil, false, err
		}
		raw, err := crypto.MarshalPrivateKey(key)
		if err != nil {
			return nil, false, err
		}
		if err := home.WriteFileExclusive(keyFile, raw, 0o600); err != nil {
			return nil, false, fmt.Errorf("write draw key %s: %w", keyFile, err)
		}
	} else if err != nil {
		return nil, false, err
	}
	pub, err := attest.DrawKeyString(key)
	if err != nil {
		return nil, false, err
	}
	if err := d.SetDrawKey(name, pub); err != nil {
		return nil, false, err
	}
	return d, made, networkWrite(path, d)
}

// nodeDrawKey is the lab's draw key this node draws with: HOME/draw.key where doc names a
// draw key for lab (the node's lab ID), nil where it names none. A node whose lab has a
// draw key but holds no copy of it, or another key, would draw where its draws do not count:
// it does not start.
func nodeDrawKey(h home.Home, doc *protocol.NetworkDoc, lab string) (crypto.PrivKey, error) {
	if doc == nil {
		return nil, nil
	}
	want := doc.DrawKeys().Named(lab)
	if want == "" {
		return nil, nil
	}
	key, err := home.ReadKey(h.DrawKeyPath(), "draw key")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the network document names draw key %s for this node's lab %s, and %s is missing: copy the draw key file `evalmesh network draw-key` wrote for the lab there (mode 0600) and start again", want, lab, h.DrawKeyPath())
	}
	if err != nil {
		return nil, err
	}
	if got, err := attest.DrawKeyString(key); err != nil || got != want {
		return nil, fmt.Errorf("%s is draw key %s, but the network document names %s for this node's lab %s: copy the lab's current draw key file there, or name this one with `evalmesh network draw-key`", h.DrawKeyPath(), got, want, lab)
	}
	return key, nil
}

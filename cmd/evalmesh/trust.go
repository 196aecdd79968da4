package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/attest"
)

func init() { register(newTrustCmd) }

func newTrustCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trust",
		Short: "Edit a trust file: the lab keys (and node keys) whose attestations count",
		Long: `A trust file (YAML, docs/trust-format.md) lists the lab public keys whose certified nodes
are believed, optionally node keys believed directly, and revocations.

Example:
  evalmesh trust add --trust trust.yaml --lab ~/acme-lab
  evalmesh trust add --trust trust.yaml --key 8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno= --name beta
  evalmesh trust add --trust trust.yaml --node-key "$(evalmesh id --json | jq -r .public_key)" --name laptop
  evalmesh trust add --trust trust.yaml --revocation rev.json
  evalmesh trust list --trust trust.yaml`,
	}
	cmd.AddCommand(newTrustAddCmd(g), newTrustListCmd(g))
	return cmd
}

func newTrustAddCmd(g *globals) *cobra.Command {
	var path, labDir, key, nodeKey, name, revPath string
	cmd := &cobra.Command{
		Use:   "add --trust FILE (--lab LABDIR | --key BASE64 --name NAME | --node-key BASE64 --name NAME | --revocation FILE)",
		Short: "Add a lab, a directly trusted node, or a revocation to a trust file",
		Long: `Add one entry to the trust file (created if missing):

  --lab LABDIR          the lab in LABDIR (reads only its public lab.json)
  --key BASE64          a lab public key (raw 32-byte ed25519, base64), named --name
  --node-key BASE64     a node key believed without a lab certificate, named --name
  --revocation FILE     a revocation from ` + "`evalmesh lab revoke`" + ` (its signature is checked)

Example:
  evalmesh trust add --trust trust.yaml --lab ~/acme-lab`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return fmt.Errorf("--trust FILE is required")
			}
			n := 0
			for _, s := range []string{labDir, key, nodeKey, revPath} {
				if s != "" {
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("give exactly one of --lab, --key, --node-key, --revocation")
			}
			ts, err := attest.LoadTrust(path)
			if errors.Is(err, fs.ErrNotExist) {
				ts, err = attest.NewTrustStore(), nil
			}
			if err != nil {
				return err
			}
			var added string
			switch {
			case labDir != "":
				info, err := attest.LoadLabInfo(labDir)
				if err != nil {
					return err
				}
				if name == "" {
					name = info.Name
				}
				pub, _ := attest.DecodeBase64(info.PublicKey) // checked by LoadLabInfo
				if added, err = ts.AddLab(name, pub); err != nil {
					return err
				}
				if info.AgeRecipient != "" {
					if err := ts.SetAgeRecipient(added, info.AgeRecipient); err != nil {
						return err
					}
				}
			case key != "" || nodeKey != "":
				if name == "" {
					return fmt.Errorf("--name NAME is required with --key and --node-key")
				}
				k := key + nodeKey
				pub, err := attest.DecodeBase64(k)
				if err != nil || len(pub) != 32 {
					return fmt.Errorf("key %q: want the raw 32-byte ed25519 public key in base64 (`evalmesh id --json` prints a node's)", k)
				}
				if key != "" {
					added, err = ts.AddLab(name, pub)
				} else {
					added, err = ts.AddNode(name, pub)
				}
				if err != nil {
					return err
				}
			default:
				b, err := os.ReadFile(revPath)
				if err != nil {
					return err
				}
				rev, err := attest.ParseRevocation(b)
				if err != nil {
					return fmt.Errorf("%s: %w", revPath, err)
				}
				if err := ts.AddRevocation(rev); err != nil {
					return err
				}
				added = "revocation " + rev.ID
			}
			if err := ts.Save(path); err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"trust": path, "added": added})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %s to %s\n", added, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "trust", "", "trust file to edit (created if missing)")
	cmd.Flags().StringVar(&labDir, "lab", "", "lab directory whose public key to trust")
	cmd.Flags().StringVar(&key, "key", "", "lab public key, base64 of the raw 32-byte ed25519 key")
	cmd.Flags().StringVar(&nodeKey, "node-key", "", "node public key to trust directly, base64 raw 32 bytes")
	cmd.Flags().StringVar(&name, "name", "", "name for the lab or node")
	cmd.Flags().StringVar(&revPath, "revocation", "", "revocation file from `evalmesh lab revoke`")
	return cmd
}

func newTrustListCmd(g *globals) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "list --trust FILE",
		Short: "Show the labs, nodes and revocations a trust file holds",
		Long: `Show what a trust file trusts, after checking it parses (lab IDs match keys, revocations
carry valid lab signatures).

Example:
  evalmesh trust list --trust trust.yaml --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return fmt.Errorf("--trust FILE is required")
			}
			ts, err := attest.LoadTrust(path)
			if err != nil {
				return err
			}
			type rev struct {
				ID    string   `json:"id"`
				Lab   string   `json:"lab"`
				Nodes []string `json:"nodes,omitempty"`
				Certs []string `json:"certs,omitempty"`
				Time  string   `json:"time"`
			}
			out := struct {
				Labs        []attest.TrustedLab  `json:"labs"`
				Nodes       []attest.TrustedNode `json:"nodes"`
				Revocations []rev                `json:"revocations"`
			}{Labs: append([]attest.TrustedLab{}, ts.Labs()...), Nodes: append([]attest.TrustedNode{}, ts.Nodes()...), Revocations: []rev{}}
			for _, r := range ts.Revocations() {
				out.Revocations = append(out.Revocations, rev{r.ID, r.Lab, r.Nodes, r.Certs, r.Time.Format("2006-01-02T15:04:05Z07:00")})
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), out)
			}
			w := cmd.OutOrStdout()
			for _, l := range out.Labs {
				fmt.Fprintf(w, "lab   %-12s %s\n", l.Name, l.ID)
			}
			for _, n := range out.Nodes {
				fmt.Fprintf(w, "node  %-12s %s\n", n.Name, n.PeerID)
			}
			for _, r := range out.Revocations {
				fmt.Fprintf(w, "revoked by %s from %s: %v %v\n", r.Lab, r.Time, r.Nodes, r.Certs)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "trust", "", "trust file")
	return cmd
}

package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
)

func init() { register(newLabCmd) }

func newLabCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Manage a lab key: certify the lab's nodes, revoke them",
		Long: `A lab is an organisation contributing GPU time. Its long-term ed25519 key lives in a lab
directory (lab.key, mode 0600, and the public lab.json) — keep it off the nodes. The lab
certifies each of its nodes (node peer ID → lab, for a validity window); nodes embed that
certificate in every attestation they sign, so anyone holding a trust file that lists the
lab's key can verify them. Lab ID = "lab:" + base32(sha256(public key)).

Typical flow:

  evalmesh lab init --dir ~/acme-lab --name acme
  evalmesh id --home ~/.evalmesh --json                 # on the node: its peer_id
  evalmesh lab certify --dir ~/acme-lab --node 12D3KooW... --valid 90d > node-cert.json
  cp node-cert.json ~/.evalmesh/node-cert.json          # on the node
  evalmesh lab revoke --dir ~/acme-lab --node 12D3KooW... --reason "disk lost" > rev.json
  evalmesh trust add --trust trust.yaml --revocation rev.json`,
	}
	cmd.AddCommand(newLabInitCmd(g), newLabCertifyCmd(g), newLabRevokeCmd(g))
	return cmd
}

func newLabInitCmd(g *globals) *cobra.Command {
	var dir, name string
	cmd := &cobra.Command{
		Use:   "init --dir LABDIR",
		Short: "Create a lab key and print the lab ID",
		Long: `Create a lab directory with a fresh ed25519 lab key (lab.key, mode 0600) and its public
half (lab.json: lab_id, public_key, name). Refuses to overwrite an existing key.

Example:
  evalmesh lab init --dir ~/acme-lab --name acme`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir LABDIR is required: where to keep the lab key")
			}
			lab, err := attest.InitLab(dir, name)
			if err != nil {
				return err
			}
			if g.jsonOut {
				info := lab.Info(name)
				return printJSON(cmd.OutOrStdout(), map[string]string{"dir": labAbsPath(dir), "lab_id": info.ID, "public_key": info.PublicKey})
			}
			fmt.Fprintln(cmd.OutOrStdout(), lab.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "lab directory to create (holds lab.key and lab.json)")
	cmd.Flags().StringVar(&name, "name", "", "a human name for the lab, written to lab.json")
	return cmd
}

func newLabCertifyCmd(g *globals) *cobra.Command {
	var dir, node, valid, from, out string
	cmd := &cobra.Command{
		Use:   "certify --dir LABDIR --node PEER_ID",
		Short: "Print a node certificate (lab → node, validity window) as JSON",
		Long: `Sign a certificate saying that node PEER_ID speaks for this lab from --from (default now)
for --valid (default 90d; Go durations like 720h, or days like 30d). The certificate is a
DSSE envelope signed by the lab key (docs/attestation-format.md). Put it in the node's home
as node-cert.json; ` + "`evalmesh attest sign`" + ` embeds it in every attestation.

Example:
  evalmesh lab certify --dir ~/acme-lab --node 12D3KooWxyz... --valid 30d > node-cert.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || node == "" {
				return fmt.Errorf("--dir LABDIR and --node PEER_ID are required (the node's peer ID is in `evalmesh id`)")
			}
			validity, err := labParseValidity(valid)
			if err != nil {
				return err
			}
			start, err := labParseTime("--from", from)
			if err != nil {
				return err
			}
			lab, err := attest.LoadLab(dir)
			if err != nil {
				return err
			}
			cert, err := lab.Certify(node, start, validity)
			if err != nil {
				return err
			}
			return labEmitSigned(cmd, out, cert.Raw())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "lab directory (from `evalmesh lab init`)")
	cmd.Flags().StringVar(&node, "node", "", "peer ID of the node to certify")
	cmd.Flags().StringVar(&valid, "valid", "90d", "validity period: a Go duration (720h) or days (30d)")
	cmd.Flags().StringVar(&from, "from", "", "start of validity, RFC 3339 (default: now)")
	cmd.Flags().StringVar(&out, "out", "", "write the certificate to this file instead of stdout")
	return cmd
}

func newLabRevokeCmd(g *globals) *cobra.Command {
	var dir, at, reason, out string
	var nodes, certs []string
	cmd := &cobra.Command{
		Use:   "revoke --dir LABDIR (--node PEER_ID | --cert CERT_ID)...",
		Short: "Print a signed revocation of nodes or certificates",
		Long: `Sign a revocation: from --at (default now) on, every certificate this lab issued for the
given nodes, and the certificates with the given IDs, are refused. Distribute it to trust
files with ` + "`evalmesh trust add --revocation FILE`" + `.

Example:
  evalmesh lab revoke --dir ~/acme-lab --node 12D3KooWxyz... --reason "host retired" > rev.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir LABDIR is required")
			}
			t, err := labParseTime("--at", at)
			if err != nil {
				return err
			}
			lab, err := attest.LoadLab(dir)
			if err != nil {
				return err
			}
			rev, err := lab.Revoke(nodes, certs, t, reason)
			if err != nil {
				return err
			}
			return labEmitSigned(cmd, out, rev.Raw())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "lab directory (from `evalmesh lab init`)")
	cmd.Flags().StringArrayVar(&nodes, "node", nil, "peer ID of a node to revoke (repeatable)")
	cmd.Flags().StringArrayVar(&certs, "cert", nil, "ID of a certificate to revoke (repeatable)")
	cmd.Flags().StringVar(&at, "at", "", "when the revocation takes effect, RFC 3339 (default: now)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	cmd.Flags().StringVar(&out, "out", "", "write the revocation to this file instead of stdout")
	return cmd
}

// emitSigned prints signed JSON to stdout, or writes it to a file atomically.
func labEmitSigned(cmd *cobra.Command, out string, b []byte) error {
	b = append(append([]byte(nil), b...), '\n')
	if out == "" {
		_, err := cmd.OutOrStdout().Write(b)
		return err
	}
	return home.WriteFileAtomic(out, b, 0o644)
}

// parseValidity accepts Go durations and whole days ("30d").
func labParseValidity(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("--valid %q: want a positive number of days like 30d, or a duration like 720h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("--valid %q: want a positive duration like 720h, or days like 30d", s)
	}
	return v, nil
}

// labNow is the clock of the lab and attest commands; tests replace it.
var labNow = time.Now

func labParseTime(flag, s string) (time.Time, error) {
	if s == "" {
		return labNow(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time like 2026-06-01T12:00:00Z", flag, s)
	}
	return t, nil
}

func labAbsPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
)

func init() { register(newAttestCmd) }

func newAttestCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attest",
		Short: "Sign and verify attestations (in-toto Statements in DSSE envelopes)",
		Long: `An attestation is an in-toto Statement v1 in a DSSE envelope, signed once by a node's
ed25519 key, carrying the node's certificate from its lab (docs/attestation-format.md).
Run attestations use predicateType ` + attest.PredicateRunV1 + `,
re-scores ` + attest.PredicateRescoreV1 + `.

Example:
  evalmesh attest sign --home ~/.evalmesh statement.json > envelope.json
  evalmesh attest verify --trust trust.yaml envelope.json`,
	}
	cmd.AddCommand(newAttestSignCmd(g), newAttestVerifyCmd(g))
	return cmd
}

func newAttestSignCmd(g *globals) *cobra.Command {
	var certPath, out string
	cmd := &cobra.Command{
		Use:   "sign [--cert CERT.json] STATEMENT.json",
		Short: "Sign an in-toto Statement v1 with the node key and print the envelope",
		Long: `Sign the bytes of STATEMENT.json (an in-toto Statement v1, any predicate type) once, with
the node's identity key, and print the DSSE envelope. The node certificate (--cert, default
HOME/node-cert.json when present) travels inside the envelope, so verifiers need only a
trust file. Without a certificate the envelope verifies only where the node's key is
trusted directly. The envelope's ID (the CID of its bytes) is printed on stderr; the bytes
are written exactly, with no trailing newline (except on a terminal), so the file's CID is
that ID.

Example:
  evalmesh attest sign --home ~/.evalmesh --cert node-cert.json statement.json > env.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			key, err := h.Identity()
			if err != nil {
				return err
			}
			if certPath == "" {
				if _, err := os.Stat(h.CertPath()); err == nil {
					certPath = h.CertPath()
				} else if !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			var cert *attest.NodeCert
			if certPath != "" {
				if cert, err = attest.LoadNodeCert(certPath); err != nil {
					return err
				}
				// Signing is still allowed (the statement may be back-dated on purpose), but
				// say now what every verifier will say later.
				if now := labNow(); now.Before(cert.NotBefore) || !now.Before(cert.NotAfter) {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: certificate %s is valid %s to %s, not now: verifiers will refuse this envelope until it is (ask the lab for a new one: evalmesh lab certify)\n",
						certPath, cert.NotBefore.Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339))
				}
			}
			st, err := attest.ReadEnvelopeFile(args[0])
			if err != nil {
				return err
			}
			env, id, err := attest.Sign(key, cert, st)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if err := emitEnvelope(cmd.OutOrStdout(), out, env); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "id", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&certPath, "cert", "", "node certificate from `evalmesh lab certify` (default HOME/node-cert.json if present)")
	cmd.Flags().StringVar(&out, "out", "", "write the envelope to this file instead of stdout")
	return cmd
}

// emitEnvelope writes the envelope bytes exactly: its ID is the CID of these bytes, so a
// trailing newline would give the saved file another ID than the one printed. Only a
// terminal gets a newline (nothing is saved there).
func emitEnvelope(w io.Writer, out string, env []byte) error {
	if out != "" {
		return home.WriteFileAtomic(out, env, 0o644)
	}
	if _, err := w.Write(env); err != nil {
		return err
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		_, err := io.WriteString(w, "\n")
		return err
	}
	return nil
}

type verifyOutput struct {
	OK            bool   `json:"ok"`
	ID            string `json:"id,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Error         string `json:"error,omitempty"`
	Node          string `json:"node,omitempty"`
	Lab           string `json:"lab,omitempty"`
	LabName       string `json:"lab_name,omitempty"`
	PredicateType string `json:"predicate_type,omitempty"`
	// Counts says whether the ledger counts it (evalmesh run or re-score predicates).
	Counts bool `json:"counts"`
}

func newAttestVerifyCmd(g *globals) *cobra.Command {
	var trustPath, at string
	cmd := &cobra.Command{
		Use:   "verify --trust TRUST.yaml ENVELOPE.json",
		Short: "Check an envelope and its signature chain; exit 1 with the reason if refused",
		Long: `Verify ENVELOPE.json against a trust file: the node certificate must be signed by a
trusted lab, inside its validity window and not revoked (or the node trusted directly), the
envelope signature must verify over the payload bytes as received, and the statement (and,
for evalmesh predicates, the predicate) must be well formed. Exit 0 when acceptable, exit 1
with one line saying why not. Statements of other predicate types verify as signed
statements and are reported as not counting for the ledger.

Example:
  evalmesh attest verify --trust trust.yaml envelope.json --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if trustPath == "" {
				return fmt.Errorf("--trust TRUST.yaml is required (create one with `evalmesh trust add`)")
			}
			now, err := labParseTime("--at", at)
			if err != nil {
				return err
			}
			trust, err := attest.LoadTrust(trustPath)
			if err != nil {
				return err
			}
			env, err := attest.ReadEnvelopeFile(args[0]) // bounded, and never waits on a pipe
			if err != nil {
				return err
			}
			v, verr := attest.Verify(env, trust, now)
			if verr != nil {
				if g.jsonOut {
					printJSON(cmd.OutOrStdout(), verifyOutput{OK: false, ID: attest.EnvelopeID(env), Reason: string(attest.ReasonOf(verr)), Error: verr.Error()})
				}
				return &exitError{code: 1, msg: fmt.Sprintf("%s: refused: %v", args[0], verr)}
			}
			o := verifyOutput{OK: true, ID: v.ID, Node: v.Node, Lab: v.Lab, PredicateType: v.Statement.PredicateType, Counts: v.Counts}
			o.LabName, _ = trust.LabName(v.Lab)
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), o)
			}
			who := "node " + v.Node
			if v.Lab != "" {
				who = fmt.Sprintf("lab %s (%s), node %s", o.LabName, v.Lab, v.Node)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok %s\nsigned by %s\npredicate %s\n", v.ID, who, o.PredicateType)
			if !v.Counts {
				fmt.Fprintln(cmd.OutOrStdout(), "not an evalmesh predicate: does not count for the ledger")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&trustPath, "trust", "", "trust file listing lab keys (docs/trust-format.md)")
	cmd.Flags().StringVar(&at, "at", "", "verify as of this time, RFC 3339 (default: now)")
	return cmd
}

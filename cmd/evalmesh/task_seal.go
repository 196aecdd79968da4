package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/tasks"
)

// Sealed bundles from the CLI (docs/bundle-format.md §7): `task pack|add --seal` seal a
// bundle and grant its key to every lab the trust file gives an age recipient; `task grant`
// grants a key this lab holds to one more lab. Grants are written to HOME/attestations
// (the daemon imports that folder at start, and the running daemon is handed them now),
// so they travel on gossip and sync like attestations.

func init() { registerSub("task", newTaskGrantCmd) }

// homeTrust is the trust store of home h: its network document's labs, else
// HOME/trust.yaml; nil when it has neither.
func homeTrust(h home.Home) (*attest.TrustStore, error) {
	cfg, err := h.Config()
	if err != nil {
		return nil, err
	}
	np, err := loadNetworkPolicy(h, cfg.Network)
	if err != nil {
		return nil, err
	}
	if np.Trust != nil {
		return np.Trust, nil
	}
	t, err := attest.LoadTrust(h.TrustPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return t, err
}

// sealByDefault: a home whose trust lists age recipients seals what it packs.
func sealByDefault(g *globals) bool {
	h, err := g.Home()
	if err != nil {
		return false
	}
	t, err := homeTrust(h)
	return err == nil && t != nil && len(t.LabRecipients()) > 0
}

// SealResult is what sealing a bundle did.
type SealResult struct {
	Dir       string   `json:"dir"`
	CID       string   `json:"cid"`
	Sealed    bool     `json:"sealed"`
	GrantedTo []string `json:"granted_to"`
	Grants    []string `json:"grants"` // files under HOME/attestations
	// Scorers, with --scorers: the labs that score the bundle, the only ones granted its
	// key; the network document's ledger.scorers must name them for its CID
	// (ScorersEntry) before its runs count.
	Scorers      []string `json:"scorers,omitempty"`
	ScorersEntry string   `json:"scorers_entry,omitempty"`
}

// SealAndGrant seals the bundle src into out and grants the key to every lab of h's trust
// that lists an age recipient (this node's lab among them, or the key would be lost),
// signed by h's node under its lab certificate. With scorers (lab names; runners without
// labels, docs/design.md §9), it grants the key to those labs only: they must include this
// node's lab (which holds the key from sealing) and leave a lab out to run the task.
func SealAndGrant(ctx context.Context, h home.Home, src, out string, scorers []string) (*SealResult, error) {
	trust, err := homeTrust(h)
	if err != nil {
		return nil, err
	}
	if trust == nil {
		return nil, fmt.Errorf("sealing needs the network's labs and their age recipients: no %s or %s in %s", home.NetworkDocFile, home.TrustFile, h.Dir)
	}
	key, cert, err := nodeSigner(h)
	if err != nil {
		return nil, err
	}
	recips := trust.LabRecipients()
	if recips[cert.Lab] == "" {
		return nil, fmt.Errorf("this node's lab %s lists no age_recipient in the trust file: the bundle's key would be lost; add the lab's recipient (evalmesh trust add --lab LABDIR) first", cert.Lab)
	}
	if len(scorers) > 0 {
		if recips, err = scoringRecipients(trust, cert.Lab, scorers); err != nil {
			return nil, err
		}
	}
	dk, err := tasks.Seal(src, out)
	if err != nil {
		return nil, err
	}
	c, err := tasks.BundleCID(ctx, out)
	if err != nil {
		return nil, err
	}
	res := &SealResult{Dir: out, CID: c.String(), Sealed: true, GrantedTo: []string{}, Grants: []string{}}
	labs := make([]string, 0, len(recips))
	for id := range recips {
		labs = append(labs, id)
	}
	slices.Sort(labs)
	for _, lab := range labs {
		p, err := writeGrant(h, key, cert, res.CID, lab, recips[lab], dk.String())
		if err != nil {
			return nil, err
		}
		name, _ := trust.LabName(lab)
		res.GrantedTo = append(res.GrantedTo, name)
		res.Grants = append(res.Grants, p)
	}
	if len(scorers) > 0 {
		res.Scorers = slices.Sorted(slices.Values(res.GrantedTo)) // the document lists names sorted
		q := make([]string, len(res.Scorers))
		for i, n := range res.Scorers {
			q[i] = fmt.Sprintf("%q", n)
		}
		res.ScorersEntry = fmt.Sprintf(`"ledger": {"scorers": {%q: [%s]}}`, res.CID, strings.Join(q, ", "))
	}
	return res, nil
}

// scoringRecipients is the age recipients, by lab ID, of the labs named in scorers: each a
// lab of trust with a recipient, this node's lab (self, which holds the key from sealing)
// among them, and at least one active lab of trust left out to run the task.
func scoringRecipients(trust *attest.TrustStore, self string, scorers []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range scorers {
		id, ok := trust.LabByName(n)
		if !ok {
			return nil, fmt.Errorf("--scorers: lab %q is not in the trust file or network document (evalmesh trust list shows the labs)", n)
		}
		r := trust.LabRecipient(id)
		if r == "" {
			return nil, fmt.Errorf("--scorers: lab %q lists no age_recipient: a scoring lab is granted the key; add its recipient (evalmesh trust add --lab LABDIR)", n)
		}
		out[id] = r
	}
	if out[self] == "" {
		name, _ := trust.LabName(self)
		return nil, fmt.Errorf("--scorers %s leaves out this node's lab %s, which holds the key once it seals: a lab that holds the labels may not run the task, so seal on a node of a scoring lab, or name %s among the scorers", strings.Join(scorers, ","), name, name)
	}
	runners := 0
	for _, l := range trust.Labs() {
		if _, retired := trust.LabRetired(l.ID); out[l.ID] == "" && !retired {
			runners++
		}
	}
	if runners == 0 {
		return nil, fmt.Errorf("--scorers %s names every lab: no lab without the key is left to run the task; leave at least one out", strings.Join(scorers, ","))
	}
	return out, nil
}

func nodeSigner(h home.Home) (crypto.PrivKey, *attest.NodeCert, error) {
	key, err := h.Identity()
	if err != nil {
		return nil, nil, err
	}
	cert, err := attest.LoadNodeCert(h.CertPath())
	if err != nil {
		return nil, nil, fmt.Errorf("grants are signed by a certified node of a lab that holds the key: %w (ask your lab: evalmesh lab certify)", err)
	}
	return key, cert, nil
}

func writeGrant(h home.Home, key crypto.PrivKey, cert *attest.NodeCert, bundle, lab, recipient, dataKey string) (string, error) {
	env, id, err := attest.NewGrant(key, cert, bundle, lab, recipient, dataKey, time.Now())
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(h.AttestationsDir(), 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(h.AttestationsDir(), id+".json")
	if err := home.WriteFileAtomic(p, env, 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// knownGrants are the grant envelopes of bundle that h knows: its files, and the running
// daemon's store when one answers.
func knownGrants(ctx context.Context, g *globals, h home.Home, bundle string) [][]byte {
	out := runner.DirGrants(h.AttestationsDir())(bundle)
	if c, err := g.client(); err == nil {
		if envs, err := c.StoredEnvelopes(ctx, vstore.SetAttestations); err == nil {
			for _, env := range envs {
				if gp, ok, _ := attest.GrantOf(env); ok && gp.Bundle == bundle {
					out = append(out, env)
				}
			}
		}
	}
	return out
}

// GrantBundle grants the key of sealed bundle to the lab named lab: it opens a grant this
// node's lab holds with HOME/lab-age.key and wraps the key again to lab's recipient.
func GrantBundle(ctx context.Context, g *globals, h home.Home, bundle, lab string) (string, error) {
	trust, err := homeTrust(h)
	if err != nil {
		return "", err
	}
	if trust == nil {
		return "", fmt.Errorf("no trust file or network document in %s: it lists the labs and their age recipients", h.Dir)
	}
	to, ok := trust.LabByName(lab)
	if !ok {
		return "", fmt.Errorf("lab %q is not in the trust file (evalmesh trust list shows the labs)", lab)
	}
	if at, retired := trust.LabRetired(to); retired {
		return "", fmt.Errorf("lab %q retired from the network at %s (network document): it is granted no new bundle keys", lab, at.UTC().Format(time.RFC3339))
	}
	if err := grantFollowsScorers(h, trust, bundle, to); err != nil {
		return "", err
	}
	recip := trust.LabRecipient(to)
	if recip == "" {
		return "", fmt.Errorf("lab %q lists no age_recipient in the trust file: add it (evalmesh trust add --lab LABDIR)", lab)
	}
	key, cert, err := nodeSigner(h)
	if err != nil {
		return "", err
	}
	id, err := attest.LoadAgeIdentity(h.LabAgeKeyPath())
	if err != nil {
		return "", err
	}
	keys := &runner.GrantKeys{Lab: cert.Lab, Identity: id, Trust: trust, Grants: func(b string) [][]byte { return knownGrants(ctx, g, h, b) }}
	dk, err := keys.DataKey(bundle)
	if err != nil {
		return "", err
	}
	p, err := writeGrant(h, key, cert, bundle, to, recip, dk.String())
	if err != nil {
		return "", err
	}
	importIntoDaemon(ctx, g, []string{p})
	return p, nil
}

// grantFollowsScorers refuses a grant of bundle to lab ID to when the network document
// names the labs that score bundle (ledger.scorers) and to is not one of them: the labs that
// run its slots must hold no labels.
func grantFollowsScorers(h home.Home, trust *attest.TrustStore, bundle, to string) error {
	cfg, err := h.Config()
	if err != nil {
		return err
	}
	np, err := loadNetworkPolicy(h, cfg.Network)
	if err != nil || np.Doc == nil {
		return err
	}
	scorers := np.Doc.ScorersOf(bundle)
	name, _ := trust.LabName(to)
	if scorers == nil || slices.Contains(scorers, name) {
		return nil
	}
	return fmt.Errorf("the network document's ledger.scorers names %s as the labs that score %s: only they are granted its key, so that the labs that run its slots (%s among them) hold no labels. To make %s a scoring lab, add it to ledger.scorers[%q] in %s and have the labs sign the document (evalmesh network sign)",
		strings.Join(scorers, ", "), bundle, name, name, bundle, h.NetworkDocPath())
}

// importIntoDaemon hands new grant files to the running daemon, if one answers (else it
// imports them at its next start).
func importIntoDaemon(ctx context.Context, g *globals, paths []string) {
	if c, err := g.client(); err == nil {
		_, _ = c.ImportAttestations(ctx, paths)
	}
}

// grantedTo names the labs a bundle's known grants are for.
func grantedTo(ctx context.Context, g *globals, bundle string) []string {
	h, err := g.Home()
	if err != nil {
		return nil
	}
	trust, _ := homeTrust(h)
	seen := map[string]bool{}
	out := []string{}
	for _, env := range knownGrants(ctx, g, h, bundle) {
		gp, ok, _ := attest.GrantOf(env)
		if !ok || seen[gp.Lab] {
			continue
		}
		seen[gp.Lab] = true
		name := gp.Lab
		if trust != nil {
			if n, ok := trust.LabName(gp.Lab); ok {
				name = n
			}
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func newTaskGrantCmd(g *globals) *cobra.Command {
	var lab string
	cmd := &cobra.Command{
		Use:   "grant CID --lab NAME",
		Short: "Grant a sealed bundle's key to another lab",
		Long: `Grant the data key of the sealed bundle CID to the lab NAME (docs/bundle-format.md §7).
This node's lab must hold the key: a grant to it is among the home's attestation files or in
the running daemon's store, and HOME/lab-age.key is the lab's age identity. The key is
wrapped again to NAME's age_recipient from the trust file (or network document) and signed
by this node; the grant goes to HOME/attestations and to the running daemon, whose gossip
and sync carry it to every node. The bundle, and its CID, do not change.

Where the network document names the labs that score the bundle (ledger.scorers: runners
without labels), only they may be granted its key: a grant to any other lab is refused.

Example:
  evalmesh task grant bafybei… --lab beta`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lab == "" {
				return errors.New("--lab NAME is required: the lab to grant the key to")
			}
			h, err := g.Home()
			if err != nil {
				return err
			}
			p, err := GrantBundle(cmd.Context(), g, h, args[0], lab)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"cid": args[0], "lab": lab, "grant": p})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "granted %s to %s (%s)\n", args[0], lab, p)
			return nil
		},
	}
	cmd.Flags().StringVar(&lab, "lab", "", "the lab (name or lab ID in the trust file) to grant the key to")
	return cmd
}

// sealForAdd seals args[0] for `task add` when asked (or by default), replacing it with the
// sealed copy and handing the grants to the daemon.
func sealForAdd(cmd *cobra.Command, g *globals, args []string, seal bool, out string, unchecked bool, scorers []string) error {
	if !cmd.Flags().Changed("seal") {
		seal = sealByDefault(g) && !unchecked && !tasks.IsSealed(args[0])
	}
	if !seal {
		return nil
	}
	h, err := g.Home()
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Clean(args[0]) + ".sealed"
	}
	res, err := SealAndGrant(cmd.Context(), h, args[0], out, scorers)
	if err != nil {
		return err
	}
	importIntoDaemon(cmd.Context(), g, res.Grants)
	fmt.Fprintf(cmd.ErrOrStderr(), "sealed into %s; key granted to %s\n", res.Dir, strings.Join(res.GrantedTo, ", "))
	printScorersEntry(cmd.ErrOrStderr(), res)
	args[0] = res.Dir
	return nil
}

// printScorersEntry tells, after sealing with --scorers, what the network document needs.
func printScorersEntry(w io.Writer, res *SealResult) {
	if res.ScorersEntry == "" {
		return
	}
	fmt.Fprintf(w, "only %s hold its key and score it; for its runs to count, add to the network document and have the labs sign it:\n  %s\n", strings.Join(res.Scorers, ", "), res.ScorersEntry)
}

// scorersHelp is the help of --scorers (task pack, task add).
const scorersHelp = "with --seal: the labs (names) that score the task, the only ones granted its key; the others run it without labels (network document ledger.scorers)"

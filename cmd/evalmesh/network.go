package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/protocol"
)

func init() { register(newNetworkCmd) }

func newNetworkCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Write, sign and inspect the network document (its labs and ledger policy)",
		Long: `The network document (docs/protocol-sync.md §6; a node reads it as HOME/network.json)
lists a network's labs and the ledger options every node must share to compute the same root.
Its hash is announced in every head and shown by the dashboard: nodes whose hashes differ run
different networks.

A document takes effect once more than half of its labs that have not retired have signed
it with their lab keys (kept off the nodes). Every edit clears the signatures: the labs sign
the document as it now is. The signatures travel in the file but are not part of the hash.

A lab that retires keeps the results its nodes signed before the retirement time; what it
signs from then on does not count. Only a revocation (` + "`evalmesh lab revoke`" + `) voids
earlier results.

Example:
  evalmesh network create --network airs --out network.json --replication 1 --lab ~/acme-lab --lab ~/beta-lab
  evalmesh network add-lab network.json --lab ~/gamma-lab
  evalmesh network draw-key network.json --lab ~/acme-lab --key-file ~/acme-lab/draw.key   # one draw per run per lab
  evalmesh network sign network.json --lab ~/acme-lab      # each lab, on its own machine
  evalmesh network show network.json
  evalmesh network hash network.json                       # what heads announce as network_doc
  cp network.json ~/.evalmesh/network.json                 # on every node, then restart it`,
	}
	cmd.AddCommand(newNetworkCreateCmd(g), newNetworkAddLabCmd(g), newNetworkRetireLabCmd(g), newNetworkRevokeCmd(g),
		newNetworkDrawKeyCmd(g), newNetworkSignCmd(g), newNetworkShowCmd(g), newNetworkHashCmd(g))
	return cmd
}

// networkLabFromDir is the document entry of the lab in dir (its public lab.json only);
// name overrides the name lab.json gives.
func networkLabFromDir(dir, name string) (protocol.NetworkLab, error) {
	info, err := attest.LoadLabInfo(dir)
	if err != nil {
		return protocol.NetworkLab{}, err
	}
	if name == "" {
		name = info.Name
	}
	if name == "" {
		return protocol.NetworkLab{}, fmt.Errorf("lab directory %s has no name in its lab.json: give one with --name", dir)
	}
	return protocol.NetworkLab{Name: name, Key: info.PublicKey, AgeRecipient: info.AgeRecipient}, nil
}

// networkCreate writes a new, unsigned network document of the labs in labDirs to out,
// refusing to overwrite a file.
func networkCreate(out, network string, replication int, executors []string, limits string, labDirs []string) (*protocol.NetworkDoc, error) {
	if _, err := os.Stat(out); err == nil {
		return nil, fmt.Errorf("%s exists: edit it with `evalmesh network add-lab` / `retire-lab`, or pick another --out", out)
	}
	if replication < 0 {
		return nil, fmt.Errorf("--replication %d: want 0 or more (how many other labs re-score a run before it counts)", replication)
	}
	ledger := protocol.LedgerPolicy{Replication: replication, Executors: executors, Limits: limits}
	protocol.NewNetworkRules(&ledger)
	raw, err := json.Marshal(protocol.NetworkDoc{Version: protocol.NetworkDocVersion, Network: network, Ledger: ledger})
	if err != nil {
		return nil, err
	}
	d, err := protocol.ParseNetworkDoc(raw) // refuses bad flags with an error, where Canonical panics
	if err != nil {
		return nil, fmt.Errorf("--network %q --executors %s --limits %q: %w", network, strings.Join(executors, ","), limits, err)
	}
	d.Signatures = []protocol.NetworkSignature{}
	for _, dir := range labDirs {
		l, err := networkLabFromDir(dir, "")
		if err != nil {
			return nil, err
		}
		if err := d.AddLab(l); err != nil {
			return nil, fmt.Errorf("--lab %s: %w", dir, err)
		}
	}
	return d, networkWrite(out, d)
}

// networkRead reads and validates a document file.
func networkRead(path string) (*protocol.NetworkDoc, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist: make one with `evalmesh network create`", path)
	}
	if err != nil {
		return nil, err
	}
	d, err := protocol.ParseNetworkDoc(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func networkWrite(path string, d *protocol.NetworkDoc) error {
	return home.WriteFileAtomic(path, d.File(), 0o644)
}

// networkAddLab adds a lab to the document at path (clearing its signatures).
func networkAddLab(path string, l protocol.NetworkLab) (*protocol.NetworkDoc, error) {
	d, err := networkRead(path)
	if err != nil {
		return nil, err
	}
	if err := d.AddLab(l); err != nil {
		return nil, err
	}
	return d, networkWrite(path, d)
}

// networkRetireLab marks a lab of the document at path retired at (clearing its signatures).
func networkRetireLab(path, name string, at time.Time) (*protocol.NetworkDoc, error) {
	d, err := networkRead(path)
	if err != nil {
		return nil, err
	}
	if err := d.RetireLab(name, at); err != nil {
		return nil, err
	}
	return d, networkWrite(path, d)
}

// networkRevoke adds the signed revocation in revFile to the document at path.
func networkRevoke(path, revFile string) (*protocol.NetworkDoc, error) {
	d, err := networkRead(path)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(revFile)
	if err != nil {
		return nil, err
	}
	if err := d.AddRevocation(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", revFile, err)
	}
	return d, networkWrite(path, d)
}

func newNetworkRevokeCmd(g *globals) *cobra.Command {
	var revFile string
	cmd := &cobra.Command{
		Use:   "revoke FILE --revocation REV.json",
		Short: "Add a lab's revocation of its node to a network document (clears its signatures)",
		Long: `Add the revocation REV.json (from ` + "`evalmesh lab revoke`" + `, signed by a lab of the document)
to the network document FILE: the network-wide path for a revocation. Once a majority of the
labs have signed the document and it is copied to every node's HOME/network.json, each
running node reads its revocations within seconds, without a restart: nothing signed under
the revoked node or certificate counts, earlier results included, and the slots its runs
alone filled are run again by other nodes (docs/operating.md §3, "Revocation"). A lab can
also revoke at once on its own nodes with ` + "`evalmesh trust add --revocation`" + `.

Example:
  evalmesh lab revoke --dir ~/acme-lab --node 12D3KooW... > rev.json
  evalmesh network revoke network.json --revocation rev.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if revFile == "" {
				return fmt.Errorf("--revocation REV.json is required: the output of `evalmesh lab revoke`")
			}
			d, err := networkRevoke(args[0], revFile)
			if err != nil {
				return err
			}
			return networkReport(cmd, g, args[0], "added revocation "+revFile, d)
		},
	}
	cmd.Flags().StringVar(&revFile, "revocation", "", "a revocation from `evalmesh lab revoke`")
	return cmd
}

// networkSign adds the signature of the lab in labDir (named name in the document, or as
// its lab.json says) to the document at path.
func networkSign(path, labDir, name string) (*protocol.NetworkDoc, error) {
	d, err := networkRead(path)
	if err != nil {
		return nil, err
	}
	lab, err := attest.LoadLab(labDir)
	if err != nil {
		return nil, err
	}
	if name == "" {
		// The lab's entry in the document, found by its key.
		key := base64.StdEncoding.EncodeToString(lab.Pub)
		for _, l := range d.Labs {
			if l.Key == key {
				name = l.Name
			}
		}
		if name == "" {
			return nil, fmt.Errorf("the lab in %s (%s) is not in network document %s: add it first with `evalmesh network add-lab %s --lab %s`", labDir, lab.ID, path, path, labDir)
		}
	}
	if d.Signatures == nil {
		d.Signatures = []protocol.NetworkSignature{}
	}
	if err := d.Sign(name, lab); err != nil {
		return nil, err
	}
	return d, networkWrite(path, d)
}

// networkShowLab is one lab in `network show --json`.
type networkShowLab struct {
	Name         string     `json:"name"`
	LabID        string     `json:"lab_id"`
	Key          string     `json:"key"`
	AgeRecipient string     `json:"age_recipient,omitempty"`
	DrawKey      string     `json:"draw_key,omitempty"`
	Retired      *time.Time `json:"retired,omitempty"`
	Signed       bool       `json:"signed"`
}

// networkShowOut is `network show --json`.
type networkShowOut struct {
	File    string                `json:"file"`
	Network string                `json:"network"`
	Version int                   `json:"version"`
	Hash    string                `json:"hash"`
	Labs    []networkShowLab      `json:"labs"`
	Ledger  protocol.LedgerPolicy `json:"ledger"`
	// SignaturesField is false for a document from before signatures (no "signatures"
	// field): nodes still run it, with a warning.
	SignaturesField bool                     `json:"signatures_field"`
	Signatures      protocol.SignatureReport `json:"signatures"`
}

func networkShow(path string) (*networkShowOut, error) {
	d, err := networkRead(path)
	if err != nil {
		return nil, err
	}
	r := d.SignatureReport()
	out := &networkShowOut{File: path, Network: d.Network, Version: d.Version, Hash: d.Hash(), Ledger: d.Ledger,
		SignaturesField: d.Signatures != nil, Signatures: r, Labs: []networkShowLab{}}
	for _, l := range d.Labs {
		pub, _ := base64.StdEncoding.DecodeString(l.Key)
		out.Labs = append(out.Labs, networkShowLab{Name: l.Name, LabID: attest.LabID(pub), Key: l.Key,
			AgeRecipient: l.AgeRecipient, DrawKey: l.DrawKey, Retired: l.Retired, Signed: slices.Contains(r.Signers, l.Name)})
	}
	return out, nil
}

func printNetworkShow(w io.Writer, s *networkShowOut) {
	fmt.Fprintf(w, "network  %s (document version %d)\nhash     %s\n", s.Network, s.Version, s.Hash)
	fmt.Fprintf(w, "ledger   replication %d, executors %s, worst %s, bootstrap rounds %d\n", s.Ledger.Replication,
		strings.Join(s.Ledger.Executors, ","), s.Ledger.Worst, s.Ledger.BootstrapRounds)
	if c := s.Ledger.Caps; c != nil {
		fmt.Fprintf(w, "caps     per lab: %s agents, %s campaigns (a campaign past either is refused whole)\n", capText(c.AgentsPerLab), capText(c.CampaignsPerLab))
	} else {
		fmt.Fprintln(w, "caps     none (ledger.caps absent)")
	}
	fmt.Fprintf(w, "labs     %d\n", len(s.Labs))
	for _, l := range s.Labs {
		state := "not signed"
		if l.Signed {
			state = "signed"
		}
		if l.Retired != nil {
			state = "retired " + l.Retired.Format(time.RFC3339)
		}
		if l.DrawKey != "" {
			state += ", draws with " + l.DrawKey
		}
		fmt.Fprintf(w, "  %-16s %s  %s\n", l.Name, l.LabID, state)
	}
	r := s.Signatures
	switch {
	case !s.SignaturesField:
		fmt.Fprintln(w, "signed   no signatures field: a document from before signatures (nodes run it with a warning; sign it with `evalmesh network sign`)")
	case r.Majority:
		fmt.Fprintf(w, "signed   by a majority: %d of %d needed (%s): in effect\n", len(r.Signers), r.Needed, strings.Join(r.Signers, ", "))
	default:
		fmt.Fprintf(w, "signed   NOT by a majority: %d of %d needed; still to sign: %s (evalmesh network sign %s --lab LABDIR)\n", len(r.Signers), r.Needed, strings.Join(r.Missing, ", "), s.File)
	}
	for _, i := range r.Ignored {
		fmt.Fprintf(w, "ignored  %s\n", i)
	}
}

// networkReport prints what an edit left: the file, the hash, who still has to sign.
func networkReport(cmd *cobra.Command, g *globals, path, what string, d *protocol.NetworkDoc) error {
	r := d.SignatureReport()
	if g.jsonOut {
		return printJSON(cmd.OutOrStdout(), map[string]any{"file": path, "did": what, "hash": d.Hash(), "signatures": r})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\nhash %s\n", path, what, d.Hash())
	if r.Majority {
		fmt.Fprintf(cmd.OutOrStdout(), "signed by a majority (%s): copy it to every node's HOME/network.json\n", strings.Join(r.Signers, ", "))
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "signed by %d of the %d labs needed; still to sign: %s (evalmesh network sign %s --lab LABDIR)\n", len(r.Signers), r.Needed, strings.Join(r.Missing, ", "), path)
	}
	return nil
}

func newNetworkCreateCmd(g *globals) *cobra.Command {
	var out, network, limits string
	var replication int
	var labs, executors []string
	cmd := &cobra.Command{
		Use:   "create --network NAME --out FILE [--replication N] [--executors container[,process]] [--limits any|enforced] [--lab LABDIR]...",
		Short: "Write a new network document of the given labs (unsigned)",
		Long: `Write a network document for network NAME listing the labs of the given lab directories
(only their public lab.json is read: name, public key, age recipient) with the default ledger
policy (isolated container runs count; --replication other labs re-score each run; with two
or more labs, a run counts only from the node that holds its slot's attempt by the signed
claim records: ledger.claims "required", docs/attestation-format.md). Labs sign
it afterwards with ` + "`evalmesh network sign`" + `. An existing FILE is not overwritten.

--executors lists the isolation kinds whose runs count: container (the default) and process.
Counting process runs (agents not isolated from the node) is for trial networks without
Docker, such as the hosts harness of docs/operating.md; every node shows it.

--limits enforced counts only runs whose executor applied the task's resource limits: not
those of a rootless engine on cgroup v1 (podman or Docker), which runs containers without
them and attests limits "none". The default, any, counts them.

Example:
  evalmesh network create --network airs --out network.json --replication 1 --lab ~/acme-lab --lab ~/beta-lab
  evalmesh network create --network trial --out network.json --replication 1 --executors container,process --lab ~/acme-lab --lab ~/beta-lab`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if network == "" || out == "" {
				return fmt.Errorf("--network NAME and --out FILE are required")
			}
			d, err := networkCreate(out, network, replication, executors, limits, labs)
			if err != nil {
				return err
			}
			return networkReport(cmd, g, out, fmt.Sprintf("created network %q with %d labs", network, len(d.Labs)), d)
		},
	}
	cmd.Flags().StringVar(&network, "network", "", "the network's name (as in every node's config network:)")
	cmd.Flags().StringVar(&out, "out", "", "file to write (must not exist)")
	cmd.Flags().IntVar(&replication, "replication", 0, "other labs that must re-score a run for it to count")
	cmd.Flags().StringArrayVar(&labs, "lab", nil, "lab directory whose public lab.json to list (repeat for each lab)")
	cmd.Flags().StringSliceVar(&executors, "executors", nil, "isolation kinds whose runs count, comma-separated: container (default), process (agents not isolated: trial networks only)")
	cmd.Flags().StringVar(&limits, "limits", "", "which runs count by their resource limits: any (default) or enforced (not runs of a rootless engine on cgroup v1)")
	return cmd
}

func newNetworkAddLabCmd(g *globals) *cobra.Command {
	var labDir, name, key, recipient string
	cmd := &cobra.Command{
		Use:   "add-lab FILE (--lab LABDIR [--name NAME] | --name NAME --key BASE64 [--age-recipient AGE1...])",
		Short: "Add a lab to a network document (clears its signatures)",
		Long: `Add a lab to the network document FILE, from its lab directory's public lab.json or from
its name and public key (base64 of the raw 32-byte ed25519 key, as lab.json's public_key).
The document changes, so every signature is dropped: the labs sign it again.

Example:
  evalmesh network add-lab network.json --lab ~/gamma-lab
  evalmesh network add-lab network.json --name gamma --key 8jO3llk1VFAI2toO//YNjsB26i0VUzM5ce7g1PH7Lno=`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var l protocol.NetworkLab
			switch {
			case labDir != "" && key == "":
				var err error
				if l, err = networkLabFromDir(labDir, name); err != nil {
					return err
				}
			case labDir == "" && key != "" && name != "":
				l = protocol.NetworkLab{Name: name, Key: key, AgeRecipient: recipient}
			default:
				return fmt.Errorf("give --lab LABDIR, or --name NAME with --key BASE64")
			}
			d, err := networkAddLab(args[0], l)
			if err != nil {
				return err
			}
			return networkReport(cmd, g, args[0], fmt.Sprintf("added lab %q", l.Name), d)
		},
	}
	cmd.Flags().StringVar(&labDir, "lab", "", "lab directory whose public lab.json to add")
	cmd.Flags().StringVar(&name, "name", "", "the lab's name in the document (default: lab.json's name)")
	cmd.Flags().StringVar(&key, "key", "", "lab public key, base64 of the raw 32-byte ed25519 key")
	cmd.Flags().StringVar(&recipient, "age-recipient", "", "the lab's age recipient (age1…), to grant it sealed bundles")
	return cmd
}

func newNetworkRetireLabCmd(g *globals) *cobra.Command {
	var name, at string
	cmd := &cobra.Command{
		Use:   "retire-lab FILE --name NAME [--at TIME]",
		Short: "Mark a lab retired from a network document (clears its signatures)",
		Long: `Mark lab NAME retired at --at (RFC 3339, default now). The lab stays in the document: the
runs and re-scores its nodes signed claiming an earlier time keep counting; what they sign
claiming a later time, its campaigns created since, and its nodes' live messages are
refused. It no longer counts towards the majority that must sign the document. To void its
earlier results too, the lab (or whoever holds its key) revokes its nodes:
` + "`evalmesh lab revoke`" + `.

Example:
  evalmesh network retire-lab network.json --name beta --at 2026-06-01T00:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" {
				return fmt.Errorf("--name NAME is required: the lab's name in the document (see `evalmesh network show %s`)", args[0])
			}
			t, err := labParseTime("--at", at)
			if err != nil {
				return err
			}
			d, err := networkRetireLab(args[0], name, t)
			if err != nil {
				return err
			}
			return networkReport(cmd, g, args[0], fmt.Sprintf("retired lab %q at %s", name, t.UTC().Truncate(time.Second).Format(time.RFC3339)), d)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the lab's name in the document")
	cmd.Flags().StringVar(&at, "at", "", "retirement time, RFC 3339 (default: now)")
	return cmd
}

func newNetworkSignCmd(g *globals) *cobra.Command {
	var labDir, name string
	cmd := &cobra.Command{
		Use:   "sign FILE --lab LABDIR [--name NAME]",
		Short: "Sign a network document with a lab key",
		Long: `Add the signature of the lab in LABDIR (its private lab.key: run this where the lab key
is kept, not on a node) to the network document FILE. The lab signs the document's canonical
form (DSSE, payload type ` + protocol.NetworkPayloadType + `); the
signature is stored in the file's "signatures" and does not change the document's hash. The
lab is found in the document by its key (or by --name). Signing again replaces the lab's
earlier signature.

Example:
  evalmesh network sign network.json --lab ~/acme-lab`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if labDir == "" {
				return fmt.Errorf("--lab LABDIR is required: the lab directory holding lab.key")
			}
			d, err := networkSign(args[0], labDir, name)
			if err != nil {
				return err
			}
			return networkReport(cmd, g, args[0], "signed by the lab in "+labDir, d)
		},
	}
	cmd.Flags().StringVar(&labDir, "lab", "", "lab directory holding lab.key")
	cmd.Flags().StringVar(&name, "name", "", "the lab's name in the document (default: found by its key)")
	return cmd
}

func newNetworkShowCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "show FILE",
		Short: "Show a network document: labs, ledger policy, hash, who signed",
		Long: `Print the network document FILE: its labs (ID, retired or not, signed or not), its ledger
policy, its hash (what heads announce as network_doc) and whether a majority of its active
labs signed it. Signatures that do not count (another key, an older version of the document,
a second signature of one lab, a retired or unknown lab) are listed as ignored. With --json,
the shape is in docs/cli-json.md.

Example:
  evalmesh network show ~/.evalmesh/network.json --json | jq .signatures.majority`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := networkShow(args[0])
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), s)
			}
			printNetworkShow(cmd.OutOrStdout(), s)
			return nil
		},
	}
}

func newNetworkHashCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "hash FILE",
		Short: "Print the hash of a network document, as heads and the dashboard carry it",
		Long: `Print the hex sha256 of the canonical form of the network document FILE: the network_doc
every head of a node running it announces, and the dashboard shows. Signatures are not part
of it.

Example:
  evalmesh network hash ~/.evalmesh/network.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := networkRead(args[0])
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"file": args[0], "hash": d.Hash()})
			}
			fmt.Fprintln(cmd.OutOrStdout(), d.Hash())
			return nil
		},
	}
}

func capText(n int) string {
	if n == 0 {
		return "any number of"
	}
	return fmt.Sprintf("at most %d", n)
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/tasks"
)

// The campaign command group. `campaign create` and `campaign verify` live here; the
// daemon's `campaign publish|ls|status` add themselves with registerSub("campaign", ...).
func init() {
	register(newCampaignCmd)
	registerSub("campaign", newCampaignCreateCmd)
	registerSub("campaign", newCampaignVerifyCmd)
}

func newCampaignCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "campaign",
		Short: "Create and check campaigns: a lab's signed request to run agents × tasks × seeds",
		Long: `A campaign asks the network to run every agent on every task, a number of seeds each,
and says how many other labs must re-score each run. It is canonical JSON signed by a lab key
in a DSSE envelope (docs/protocol.md, "Campaigns"); its ID is the CID of the envelope's bytes.
Its slots are tasks × agents × seeds; nodes claim and run them.

Typical flow (the lab key stays on the lab's own machine, not on its nodes):

  evalmesh campaign create --lab ~/acme-lab --title "SVAMP sweep" \
      --task bafybei... --task bundles/svamp --agent agents/echo.yaml \
      --seeds 3 --replication 1 --deadline 72h > campaign.json
  evalmesh campaign verify --trust trust.yaml campaign.json`,
	}
}

// campaignCreateOptions are the inputs of `campaign create`.
type campaignCreateOptions struct {
	LabDir      string
	Title       string
	Tasks       []string // bundle CIDs, or bundle folders whose CID is computed
	Agents      []string // agent spec files
	Seeds       int
	Replication int
	Deadline    time.Duration
	Network     string
	Now         time.Time
}

// runCampaignCreate builds, signs and writes the campaign envelope to stdout, exactly its
// bytes with no trailing newline (as `attest sign` does), so the saved file's CID is the
// campaign ID; it returns the ID and the slot count.
func runCampaignCreate(ctx context.Context, o campaignCreateOptions, stdout io.Writer) (id string, slots int, err error) {
	if o.LabDir == "" {
		return "", 0, fmt.Errorf("--lab LABDIR is required: the lab directory whose key signs the campaign (`evalmesh lab init`)")
	}
	if len(o.Tasks) == 0 || len(o.Agents) == 0 {
		return "", 0, fmt.Errorf("give at least one --task (a bundle CID or folder) and one --agent (a spec file)")
	}
	if o.Deadline <= 0 {
		return "", 0, fmt.Errorf("--deadline %s must be positive (e.g. 72h or 3d)", o.Deadline)
	}
	lab, err := attest.LoadLab(o.LabDir)
	if err != nil {
		return "", 0, err
	}
	c := &protocol.Campaign{
		Network: o.Network, Title: o.Title, Seeds: o.Seeds, Replication: o.Replication,
		Created: o.Now, Deadline: o.Now.Add(o.Deadline),
	}
	for _, t := range o.Tasks {
		id, err := campaignTaskCID(ctx, t)
		if err != nil {
			return "", 0, err
		}
		c.Tasks = append(c.Tasks, id)
	}
	for _, path := range o.Agents {
		spec, err := agentspec.Load(path)
		if err != nil {
			return "", 0, err
		}
		c.Agents = append(c.Agents, protocol.NewCampaignAgent(spec))
	}
	env, id, err := protocol.SignCampaign(lab, c)
	if err != nil {
		return "", 0, err
	}
	if _, err := stdout.Write(env); err != nil {
		return "", 0, err
	}
	return id, len(c.Slots()), nil
}

// campaignTaskCID is a --task's bundle CID: the argument itself when it is a CID, else the
// CID of the bundle folder it names (hash only, nothing stored).
func campaignTaskCID(ctx context.Context, arg string) (string, error) {
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		root, err := tasks.Pack(ctx, arg, tasks.NewHashOnlyDAG(), tasks.PackOptions{})
		if err != nil {
			return "", fmt.Errorf("--task %s: %w", arg, err)
		}
		return root.String(), nil
	}
	c, err := cid.Decode(arg)
	if err != nil {
		return "", fmt.Errorf("--task %q is neither a bundle CID nor a bundle folder", arg)
	}
	return c.String(), nil
}

func newCampaignCreateCmd(g *globals) *cobra.Command {
	var o campaignCreateOptions
	var deadline string
	cmd := &cobra.Command{
		Use:   "create --lab LABDIR --title T --task CID... --agent SPEC... --seeds N --replication R",
		Short: "Sign a campaign with a lab key and print it (JSON) on stdout",
		Long: `Build a campaign and sign it with the lab key in LABDIR. The envelope is printed on stdout
(redirect it to a file): exactly the envelope's bytes, no trailing newline, so the file's CID
is the campaign ID (an editor that adds a newline makes another campaign). Its ID and slot
count go to stderr.

  --task CID|FOLDER   a task bundle: its CID, or a bundle folder whose CID is computed
                      (as ` + "`evalmesh task pack`" + ` does, storing nothing). Repeat for more tasks.
  --agent SPEC        an agent spec file (docs/agent-spec.md); its canonical JSON and CID are
                      embedded so nodes can check it without fetching anything. Repeat.
  --seeds N           runs per (task, agent): seeds 0 … N-1
  --replication R     how many labs other than the runner's must re-score each run
  --deadline D        how long the campaign stays open from now (72h, or days like 3d)
  --network NAME      the network it is for (default: the home config's network)

The campaign has tasks × agents × seeds slots; readers refuse more than 100,000.

Example:
  evalmesh campaign create --lab ~/acme-lab --title "SVAMP sweep" \
      --task bafybeifhugo2dz7qowc4mlyeuf3ybfd4ynwau5vbbnd77duut36yeal7zi \
      --agent agents/echo.yaml --seeds 3 --replication 1 > campaign.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Deadline, err = labParseValidity(deadline); err != nil {
				return fmt.Errorf("--deadline %q: want a positive duration like 72h, or days like 3d", deadline)
			}
			if o.Network == "" {
				h, err := g.Home()
				if err != nil {
					return err
				}
				cfg, err := h.Config()
				if err != nil {
					return err
				}
				o.Network = cfg.Network
			}
			o.Now = labNow()
			id, n, err := runCampaignCreate(cmd.Context(), o, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "campaign %s: %d slots, network %s\n", id, n, o.Network)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.LabDir, "lab", "", "lab directory holding the lab key (lab.key)")
	f.StringVar(&o.Title, "title", "", "a human title for the campaign")
	f.StringArrayVar(&o.Tasks, "task", nil, "task bundle CID or bundle folder (repeatable)")
	f.StringArrayVar(&o.Agents, "agent", nil, "agent spec file (repeatable)")
	f.IntVar(&o.Seeds, "seeds", 1, "seeds per (task, agent)")
	f.IntVar(&o.Replication, "replication", 1, "labs other than the runner's that must re-score each run")
	f.StringVar(&deadline, "deadline", "72h", "how long the campaign stays open (72h, 3d)")
	f.StringVar(&o.Network, "network", "", "network name (default: the home config's `network`)")
	return cmd
}

// campaignVerifyOutput is `campaign verify --json`.
type campaignVerifyOutput struct {
	OK          bool                  `json:"ok"`
	ID          string                `json:"id"`
	Reason      string                `json:"reason,omitempty"`
	Error       string                `json:"error,omitempty"`
	Lab         string                `json:"lab,omitempty"`
	LabName     string                `json:"lab_name,omitempty"`
	Title       string                `json:"title,omitempty"`
	Network     string                `json:"network,omitempty"`
	Tasks       []string              `json:"tasks"`
	Agents      []campaignAgentOutput `json:"agents"`
	Seeds       int                   `json:"seeds,omitempty"`
	Replication int                   `json:"replication,omitempty"`
	Slots       int                   `json:"slots"`
	Created     *time.Time            `json:"created,omitempty"`
	Deadline    *time.Time            `json:"deadline,omitempty"`
}

type campaignAgentOutput struct {
	CID     string `json:"cid"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// campaignVerifyOptions are the inputs of `campaign verify`.
type campaignVerifyOptions struct {
	TrustPath string
	Path      string
	Network   string
	MaxSlots  int
	Now       time.Time
}

// runCampaignVerify verifies the campaign file; a refusal is the *protocol.CampaignError
// with the output describing it (OK false).
func runCampaignVerify(o campaignVerifyOptions) (campaignVerifyOutput, error) {
	out := campaignVerifyOutput{Tasks: []string{}, Agents: []campaignAgentOutput{}}
	trust, err := attest.LoadTrust(o.TrustPath)
	if err != nil {
		return out, err
	}
	env, err := os.ReadFile(o.Path)
	if err != nil {
		return out, err
	}
	out.ID = attest.EnvelopeID(env)
	v, err := protocol.VerifyCampaign(env, trust, protocol.CampaignVerifyOptions{Now: o.Now, MaxSlots: o.MaxSlots, Network: o.Network})
	if err != nil {
		out.Reason, out.Error = string(protocol.CampaignReasonOf(err)), err.Error()
		return out, err
	}
	c := v.Campaign
	out.OK, out.Lab, out.LabName, out.Title, out.Network = true, v.Lab, v.LabName, c.Title, c.Network
	out.Tasks, out.Seeds, out.Replication, out.Slots = c.Tasks, c.Seeds, c.Replication, len(c.Slots())
	out.Created, out.Deadline = &c.Created, &c.Deadline
	for _, a := range c.Agents {
		s := v.Agents[a.CID] // VerifyCampaign parsed it
		out.Agents = append(out.Agents, campaignAgentOutput{CID: a.CID, Name: s.Name, Version: s.Version})
	}
	return out, nil
}

func newCampaignVerifyCmd(g *globals) *cobra.Command {
	var o campaignVerifyOptions
	var at string
	cmd := &cobra.Command{
		Use:   "verify --trust TRUST.yaml CAMPAIGN.json",
		Short: "Check a campaign; exit 1 with the reason if a node would refuse it",
		Long: `Verify CAMPAIGN.json as a node does before it runs anything: signed by a lab in the trust
file, signature valid over the bytes as received, well formed and canonical, every agent's
embedded spec hashing to its CID, not past its deadline, and at most --max-slots slots.
Exit 0 when acceptable; exit 1 with one line naming the reason otherwise: malformed,
unknown_version, wrong_network, unknown_lab, bad_signature, expired, not_yet_valid,
agent_cid_mismatch, too_many_slots (docs/protocol.md).

Example:
  evalmesh campaign verify --trust trust.yaml campaign.json
  evalmesh campaign verify --trust trust.yaml campaign.json --json | jq .slots`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.TrustPath == "" {
				return fmt.Errorf("--trust TRUST.yaml is required (create one with `evalmesh trust add`)")
			}
			var err error
			if o.Now, err = labParseTime("--at", at); err != nil {
				return err
			}
			o.Path = args[0]
			out, verr := runCampaignVerify(o)
			if verr != nil && out.ID == "" {
				return verr // the trust file or campaign file could not be read
			}
			if g.jsonOut {
				if err := printJSON(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			}
			if verr != nil {
				return &exitError{code: 1, msg: fmt.Sprintf("%s: %v", o.Path, verr)}
			}
			if !g.jsonOut {
				fmt.Fprintf(cmd.OutOrStdout(), "ok %s\n%q by lab %s (%s), network %s\n%d tasks × %d agents × %d seeds = %d slots, replication %d, deadline %s\n",
					out.ID, out.Title, out.LabName, out.Lab, out.Network, len(out.Tasks), len(out.Agents), out.Seeds, out.Slots, out.Replication, out.Deadline.Format(time.RFC3339))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.TrustPath, "trust", "", "trust file listing lab keys (docs/trust-format.md)")
	cmd.Flags().StringVar(&o.Network, "network", "", "refuse a campaign for another network (default: any)")
	cmd.Flags().IntVar(&o.MaxSlots, "max-slots", protocol.DefaultMaxSlots, "refuse a campaign with more slots than this")
	cmd.Flags().StringVar(&at, "at", "", "verify as of this time, RFC 3339 (default: now)")
	return cmd
}

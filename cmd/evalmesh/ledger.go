package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/agentspec"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/taskset"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/vstore"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/scoring"
)

func init() { register(newLedgerCmd) }

// ledgerOptions are the ledger command's inputs.
type ledgerOptions struct {
	Trust        string   // trust file
	Tasks        string   // folder of task folders
	Attestations string   // folder of envelopes
	Agents       []string // agent spec files or folders of them; none: agents are named by CID
	Policy       attest.AcceptPolicy
	Scoring      scoring.Options
	// NetworkDoc, when set, supplies the labs (unless Trust is given), the policy and the
	// scoring options: the network's own, so the root is the network's.
	NetworkDoc string
}

func newLedgerCmd(g *globals) *cobra.Command {
	var o ledgerOptions
	var rounds int
	cmd := &cobra.Command{
		Use:   "ledger (--trust TRUST.yaml | --network-doc FILE) --tasks DIR [--attestations DIR] [--agents PATH] [--replication N]",
		Short: "Compute the leaderboard from the daemon's verified attestations (or a folder of them)",
		Long: `Compute the leaderboard from signed attestations, as every node of a network does:
verify each envelope in the folder under the trust file, set aside equivocations
(one lab signing two submissions for one slot, both dropped), duplicates, runs that a
re-score contradicts and runs with fewer than --replication other labs confirming their
score, then score what counts exactly as "evalmesh score" does (Elo, normalized score,
valid-submission rate) and print the ledger root.

Only runs isolated in a container count, unless --allow-process-runs: under the process
executor an agent can read the task's private labels ("not isolated"). Of several runs of
one slot by one lab, the lowest attempt counts (re-running cannot pick the best try); two
submissions for the same attempt are equivocation and drop every run of that slot by that
lab. --max-agents-per-lab and --max-runs-per-lab cap what one lab can put on the ledger
(docs/attestation-format.md, "Acceptance").

Run attestations name their task by bundle CID and their agent by agent-spec CID. The
task folders under --tasks are packed (hashing only) to match CIDs to task names; a run of
another bundle does not count. With --agents (spec files, or folders of *.yaml / *.json
specs) agents are shown by their spec's name and runs of other agents do not count;
without it every agent is shown by its CID. Nodes that must agree on the ledger root must
use the same tasks, agents, --replication, --worst, --bootstrap-rounds and --elo-bootstrap.

The ledger does not read the clock: each node certificate is checked at the time its
attestation claims (a run's start and end, a re-score's time), so a run signed while its node's
certificate was valid keeps counting after the certificate expires, and every node gets the
same root whenever it computes it. A revoked certificate or node counts for nothing, whatever
time its attestations claim (a leaked key can backdate them).

Where the envelopes come from: by default the running daemon's store (every envelope the
node accepted from gossip, sync, its own runs and "evalmesh attest import", each verified
once when it arrived: nothing is verified again, the trust file's policy is re-applied);
with no daemon running, the envelope files in HOME/attestations; with --attestations DIR,
the files in DIR (each verified now).

Envelopes that do not verify (bad signature, unknown lab, certificate not valid at the
claimed time, revoked, …) are refused, never counted: each refused file is listed on stderr with its reason, as is each
run that verified but does not count. --json prints the ledger as "evalmesh score --json"
does, with an "attestations" object holding the counts, refusals and exclusions.

With --network-doc HOME/network.json the labs, replication, counted executors and scoring
options are the network's, as its daemons use them (the root then matches theirs).

Examples:
  evalmesh ledger --trust trust.yaml --tasks bundles/
  evalmesh ledger --network-doc ~/.evalmesh/network.json --tasks bundles/ --agents agents/
  evalmesh ledger --trust trust.yaml --tasks bundles/ --attestations inbox/ \
      --agents agents/ --replication 1 --worst estimated --json
  evalmesh ledger --trust trust.yaml --tasks bundles/ --allow-process-runs --max-agents-per-lab 100


The table's terms (docs/scoring.md has the formulas; docs/cli-json.md the JSON):
` + scoring.TableLegend,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.NetworkDoc != "" {
				for _, f := range []string{"replication", "worst", "bootstrap-rounds", "elo-bootstrap", "allow-process-runs"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s and --network-doc both set the ledger's options: the network document's are the network's; drop --%s", f, f)
					}
				}
				doc, err := loadNetworkDocFile(o.NetworkDoc)
				if err != nil {
					return err
				}
				// The network's acceptance policy, as its daemons apply it (misconduct, pardons
				// and claim records included: without the holder rule a run of a node that does
				// not hold its attempt could fill its cell here and move the root); campaign
				// windows, witnesses and caps need the campaigns, which a folder of envelopes
				// does not hold.
				np := doc.AcceptPolicy()
				o.Policy.Replication, o.Policy.AllowProcessRuns = np.Replication, np.AllowProcessRuns
				o.Policy.SetAsideOffenders, o.Policy.Pardoned = np.SetAsideOffenders, np.Pardoned
				o.Policy.RequireClaimRecords = np.RequireClaimRecords
				o.Policy.Scorers = np.Scorers                                       // runners without labels: unscored runs count with their scorers' verdicts
				o.Policy.RescorerDraw, o.Policy.Audits = np.RescorerDraw, np.Audits // who votes, and what audits prove
				sc := doc.ScoringOptions()
				o.Scoring.Worst, rounds, o.Scoring.EloBootstrap = sc.Worst, sc.BootstrapRounds, sc.EloBootstrap
			}
			if (o.Trust == "" && o.NetworkDoc == "") || o.Tasks == "" {
				return fmt.Errorf("--tasks DIR and one of --trust TRUST.yaml or --network-doc FILE are required (see evalmesh ledger --help)")
			}
			if o.Policy.Replication < 0 {
				return fmt.Errorf("--replication %d: give how many other labs must confirm a run, 0 or more", o.Policy.Replication)
			}
			o.Scoring.BootstrapRounds = rounds
			if o.Policy.AllowProcessRuns {
				fmt.Fprintln(cmd.ErrOrStderr(), "this network counts process-executor runs (--allow-process-runs): their agents could read the tasks' private files")
			}
			if o.Attestations == "" {
				h, err := g.Home()
				if err != nil {
					return err
				}
				envs, err := daemonEnvelopes(cmd.Context(), h)
				switch {
				case err == nil:
					l, rep, err := computeLedgerFromStore(cmd.Context(), o, envs)
					if err != nil {
						return err
					}
					return printLedgerReport(cmd.OutOrStdout(), cmd.ErrOrStderr(), l, rep, g.jsonOut)
				case errors.Is(err, node.ErrNoDaemon):
					fmt.Fprintf(cmd.ErrOrStderr(), "no daemon running for %s: reading the envelope files in %s\n", h.Dir, h.AttestationsDir())
					o.Attestations = h.AttestationsDir()
				default:
					return err
				}
			}
			l, rep, err := computeLedgerFromFlags(cmd.Context(), o)
			if err != nil {
				return err
			}
			return printLedgerReport(cmd.OutOrStdout(), cmd.ErrOrStderr(), l, rep, g.jsonOut)
		},
	}
	cmd.Flags().StringVar(&o.Trust, "trust", "", "trust file: the labs (and nodes) whose attestations are believed")
	cmd.Flags().StringVar(&o.Tasks, "tasks", "", "folder of task folders (task.yaml bundles, or AIRS-Bench metadata.yaml)")
	cmd.Flags().StringVar(&o.Attestations, "attestations", "", "folder of attestation envelopes to verify and use instead of the daemon's store")
	cmd.Flags().StringArrayVar(&o.Agents, "agents", nil, "agent spec file or folder of specs, to name agents (repeatable)")
	cmd.Flags().IntVar(&o.Policy.Replication, "replication", 0, "other labs that must re-score a run to the same value for it to count")
	cmd.Flags().BoolVar(&o.Policy.AllowProcessRuns, "allow-process-runs", false, "also count runs not isolated in a container (process executor, or attestations that do not say)")
	cmd.Flags().StringVar(&o.Scoring.Worst, "worst", "population", `worst anchor of the normalized score: "population" or "estimated"`)
	cmd.Flags().IntVar(&rounds, "bootstrap-rounds", 100, "bootstrap rounds for the confidence intervals")
	cmd.Flags().StringVar(&o.Scoring.EloBootstrap, "elo-bootstrap", scoring.EloBootstrapGames, `Elo interval bootstrap: "games" (resample games, refit) or "tasks-linearised" (resample tasks, linear step; docs/scoring.md §4)`)
	cmd.Flags().StringVar(&o.NetworkDoc, "network-doc", "", "the network's document (HOME/network.json): its labs, replication, counted executors and scoring options")
	return cmd
}

// loadNetworkDocFile reads and checks a network document file.
func loadNetworkDocFile(path string) (*protocol.NetworkDoc, error) {
	// A network document has the 1 MiB bound of an envelope (protocol.MaxNetworkDocSize).
	raw, err := attest.ReadEnvelopeFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := protocol.ParseNetworkDoc(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// computeLedgerFromFlags loads the trust file, the task folders (and their bundle CIDs) and
// the agent specs, then hands the folder of envelopes to attest.LedgerFromDir.
func computeLedgerFromFlags(ctx context.Context, o ledgerOptions) (*scoring.Ledger, *attest.LedgerReport, error) {
	in, err := ledgerInputFromFlags(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	return attest.LedgerFromDir(o.Attestations, in)
}

// computeLedgerFromStore is computeLedgerFromFlags over envelopes the daemon's store
// accepted (vstore.LedgerFromStored: no signature checked again).
func computeLedgerFromStore(ctx context.Context, o ledgerOptions, envs [][]byte) (*scoring.Ledger, *attest.LedgerReport, error) {
	in, err := ledgerInputFromFlags(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	return vstore.LedgerFromStored(envs, in)
}

// daemonEnvelopes fetches the running daemon's verified attestations.
func daemonEnvelopes(ctx context.Context, h home.Home) ([][]byte, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := node.NewClient(h)
	if err != nil {
		return nil, err
	}
	return c.StoredEnvelopes(ctx, vstore.SetAttestations)
}

// ledgerInputFromFlags is everything but the envelopes.
func ledgerInputFromFlags(ctx context.Context, o ledgerOptions) (attest.LedgerInput, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var trust *attest.TrustStore
	var err error
	if o.Trust != "" {
		trust, err = attest.LoadTrust(o.Trust)
	} else {
		var doc *protocol.NetworkDoc
		if doc, err = loadNetworkDocFile(o.NetworkDoc); err == nil {
			trust, err = doc.TrustStore()
		}
	}
	if err != nil {
		return attest.LedgerInput{}, err
	}
	folders, err := taskset.Load(o.Tasks)
	if err != nil {
		return attest.LedgerInput{}, err
	}
	infos := make([]scoring.TaskInfo, len(folders))
	for i, f := range folders {
		infos[i] = f.Info
	}
	p := o.Policy
	if p.Tasks, err = taskset.BundleCIDs(ctx, folders); err != nil {
		return attest.LedgerInput{}, err
	}
	if len(o.Agents) > 0 {
		if p.Agents, err = agentNames(o.Agents); err != nil {
			return attest.LedgerInput{}, err
		}
	}
	return attest.LedgerInput{Trust: trust, Tasks: infos, Policy: p, Scoring: o.Scoring}, nil
}

// agentNames maps the CID of every agent spec found at paths to a display name: the spec's
// name, or name@version where two specs share a name.
func agentNames(paths []string) (map[string]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("--agents %s: %w", p, err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("--agents %s: %w", p, err)
		}
		n := len(files)
		for _, e := range entries {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		}
		if len(files) == n {
			return nil, fmt.Errorf("--agents %s holds no agent spec (*.yaml, *.yml or *.json)", p)
		}
	}
	specs := map[string]*agentspec.Spec{} // by CID
	from := map[string]string{}
	for _, f := range files {
		s, err := agentspec.Load(f)
		if err != nil {
			return nil, fmt.Errorf("--agents: %w", err)
		}
		specs[s.CID()] = s
		from[s.CID()] = f
	}
	byName := map[string][]string{}
	for cid, s := range specs {
		byName[s.Name] = append(byName[s.Name], cid)
	}
	names := map[string]string{}
	taken := map[string]string{}
	cids := make([]string, 0, len(specs))
	for cid := range specs {
		cids = append(cids, cid)
	}
	sort.Strings(cids)
	for _, cid := range cids {
		s := specs[cid]
		name := s.Name
		if len(byName[s.Name]) > 1 {
			name = s.Name + "@" + s.Version
		}
		if other, dup := taken[name]; dup {
			return nil, fmt.Errorf("agent specs %s and %s are different agents both called %s: give them different names or versions", from[other], from[cid], name)
		}
		if name == scoring.SOTAPlayer {
			return nil, fmt.Errorf("agent spec %s is called %q, the name of the human-SOTA player: rename it", from[cid], name)
		}
		taken[name] = cid
		names[cid] = name
	}
	return names, nil
}

// printLedgerReport prints the leaderboard as `evalmesh score` does, then what became of the
// envelopes: counts on stdout, one line per refused file and per excluded run on stderr.
// With asJSON, one object: the ledger's fields and "attestations" (the report).
func printLedgerReport(stdout, stderr io.Writer, l *scoring.Ledger, rep *attest.LedgerReport, asJSON bool) error {
	if asJSON {
		lb, err := l.MarshalJSON()
		if err != nil {
			return err
		}
		rb, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		lb = bytes.TrimSpace(lb)
		if len(lb) < 2 || lb[len(lb)-1] != '}' {
			return fmt.Errorf("ledger JSON is not an object")
		}
		var merged bytes.Buffer
		merged.Write(lb[:len(lb)-1])
		merged.WriteString(`,"attestations":`)
		merged.Write(rb)
		merged.WriteByte('}')
		var out bytes.Buffer
		if err := json.Indent(&out, merged.Bytes(), "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		_, err = stdout.Write(out.Bytes())
		return err
	}
	if err := l.WriteTable(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nattestations: %d read, %d refused, %d excluded, %d counted (%d re-scores, %d witness records, %d of other types)\n",
		rep.Read, len(rep.Refused), len(rep.Excluded), rep.Counted, rep.Rescores+rep.Orphans, rep.Witnesses, rep.Other)
	for _, r := range rep.Refused {
		fmt.Fprintf(stderr, "refused %s\n", r)
	}
	for _, e := range rep.Excluded {
		line := fmt.Sprintf("excluded %s (%s seed %d): %s", e.ID, e.Principal, e.Slot.Seed, e.Reason)
		if e.Detail != "" {
			line += " (" + e.Detail + ")"
		}
		fmt.Fprintln(stderr, line)
	}
	for _, u := range rep.Unanswered {
		if u.Charged {
			fmt.Fprintf(stderr, "charged to %s: attempt %d of slot %s (claim record %s by node %s): no run or release by its holder before the campaign's deadline\n",
				u.Principal, u.Attempt, u.Slot, u.Claim, u.Node)
		}
	}
	return nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/runner"
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
}

func newLedgerCmd(g *globals) *cobra.Command {
	var o ledgerOptions
	var rounds int
	cmd := &cobra.Command{
		Use:   "ledger --trust TRUST.yaml --tasks DIR [--attestations DIR] [--agents PATH] [--replication N]",
		Short: "Compute the leaderboard from a folder of signed run attestations",
		Long: `Compute the leaderboard from signed attestations, as every node of a network does:
verify each envelope in the folder under the trust file, set aside equivocations
(one lab signing two submissions for one slot, both dropped), duplicates, runs that a
re-score contradicts and runs with fewer than --replication other labs confirming their
score, then score what counts exactly as "evalmesh score" does (Elo, normalized score,
valid-submission rate) and print the ledger root.

Run attestations name their task by bundle CID and their agent by agent-spec CID. The
task folders under --tasks are packed (hashing only) to match CIDs to task names; a run of
another bundle does not count. With --agents (spec files, or folders of *.yaml / *.json
specs) agents are shown by their spec's name and runs of other agents do not count;
without it every agent is shown by its CID. Nodes that must agree on the ledger root must
use the same tasks, agents, --replication, --worst and --bootstrap-rounds.

The ledger does not read the clock: each node certificate is checked at the time its
attestation claims (a run's end, a re-score's time), so a run signed while its node's
certificate was valid keeps counting after the certificate expires, and every node gets the
same root whenever it computes it. A revoked certificate or node counts for nothing, whatever
time its attestations claim (a leaked key can backdate them).

Envelopes that do not verify (bad signature, unknown lab, certificate not valid at the
claimed time, revoked, …) are refused, never counted: each refused file is listed on stderr with its reason, as is each
run that verified but does not count. --json prints the ledger as "evalmesh score --json"
does, with an "attestations" object holding the counts, refusals and exclusions.

Examples:
  evalmesh ledger --trust trust.yaml --tasks bundles/
  evalmesh ledger --trust trust.yaml --tasks bundles/ --attestations inbox/ \
      --agents agents/ --replication 1 --worst estimated --json

The table's terms (docs/scoring.md has the formulas; docs/cli-json.md the JSON):
` + scoring.TableLegend,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Trust == "" || o.Tasks == "" {
				return fmt.Errorf("--trust TRUST.yaml and --tasks DIR are both required (see evalmesh ledger --help)")
			}
			if o.Policy.Replication < 0 {
				return fmt.Errorf("--replication %d: give how many other labs must confirm a run, 0 or more", o.Policy.Replication)
			}
			if o.Attestations == "" {
				h, err := g.Home()
				if err != nil {
					return err
				}
				o.Attestations = h.AttestationsDir()
			}
			o.Scoring.BootstrapRounds = rounds
			l, rep, err := computeLedgerFromFlags(cmd.Context(), o)
			if err != nil {
				return err
			}
			return printLedgerReport(cmd.OutOrStdout(), cmd.ErrOrStderr(), l, rep, g.jsonOut)
		},
	}
	cmd.Flags().StringVar(&o.Trust, "trust", "", "trust file: the labs (and nodes) whose attestations are believed")
	cmd.Flags().StringVar(&o.Tasks, "tasks", "", "folder of task folders (task.yaml bundles, or AIRS-Bench metadata.yaml)")
	cmd.Flags().StringVar(&o.Attestations, "attestations", "", "folder of attestation envelopes (default HOME/attestations)")
	cmd.Flags().StringArrayVar(&o.Agents, "agents", nil, "agent spec file or folder of specs, to name agents (repeatable)")
	cmd.Flags().IntVar(&o.Policy.Replication, "replication", 0, "other labs that must re-score a run to the same value for it to count")
	cmd.Flags().StringVar(&o.Scoring.Worst, "worst", "population", `worst anchor of the normalized score: "population" or "estimated"`)
	cmd.Flags().IntVar(&rounds, "bootstrap-rounds", 100, "bootstrap rounds for the confidence intervals")
	return cmd
}

// computeLedgerFromFlags loads the trust file, the task folders (and their bundle CIDs) and
// the agent specs, then hands the folder of envelopes to attest.LedgerFromDir.
func computeLedgerFromFlags(ctx context.Context, o ledgerOptions) (*scoring.Ledger, *attest.LedgerReport, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	trust, err := attest.LoadTrust(o.Trust)
	if err != nil {
		return nil, nil, err
	}
	folders, err := loadTaskFolders(o.Tasks)
	if err != nil {
		return nil, nil, err
	}
	infos := make([]scoring.TaskInfo, len(folders))
	for i, f := range folders {
		infos[i] = f.Info
	}
	p := o.Policy
	if p.Tasks, err = bundleCIDs(ctx, folders); err != nil {
		return nil, nil, err
	}
	if len(o.Agents) > 0 {
		if p.Agents, err = agentNames(o.Agents); err != nil {
			return nil, nil, err
		}
	}
	return attest.LedgerFromDir(o.Attestations, attest.LedgerInput{
		Trust: trust, Tasks: infos, Policy: p, Scoring: o.Scoring,
	})
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
	specs := map[string]*runner.AgentSpec{} // by CID
	from := map[string]string{}
	for _, f := range files {
		s, err := runner.LoadAgentSpec(f)
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
	fmt.Fprintf(stdout, "\nattestations: %d read, %d refused, %d excluded, %d counted (%d re-scores, %d of other types)\n",
		rep.Read, len(rep.Refused), len(rep.Excluded), rep.Counted, rep.Rescores+rep.Orphans, rep.Other)
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
	return nil
}

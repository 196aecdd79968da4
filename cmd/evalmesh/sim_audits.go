package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/protocol/auditsim"
)

func init() { registerSub("sim", newSimAuditsCmd) }

func newSimAuditsCmd(g *globals) *cobra.Command {
	c := auditsim.Defaults
	var labs, kinds string
	var workers int
	cmd := &cobra.Command{
		Use:   "audits [--labs 3,10,30,100] [--networks N] [--rate R] [--agents deterministic|stochastic|both] [--rerun-corr ρ]",
		Short: "Simulate audits by re-execution: is a fabricating lab caught, at what cost?",
		Long: `Simulate many networks of labs that run a campaign, one of them dishonest: it fabricates
--fabricate of its runs of one agent with a score lift (--lift). On each network the
neighbour agent's lead is set on the honest results so that the fabrication, counted in
full, just changes the target's published rank (the ledger's 95 % intervals stop being
separated): the smallest rank-changing lift. Other labs audit by re-execution with the
protocol's own rules (docs/scoring.md "Audits by re-execution"): the draw at --rate, movers
and a pivotal group's outliers held until audited, the pair test for stochastic agents
(same-seed re-runs correlated --rerun-corr with the original), the statistical test and
the vote. Labs and runs are modelled, not nodes and slots; nothing touches the network or
the disk.

Per network size and agent kind it prints:
  caught before the rank moves  of the networks in which the fabrication changes the rank:
                                those where the dishonest lab was caught (proof, suspicion,
                                or a fabricated run its audits did not clear) and the
                                published rank never showed the lift, with the one-sided
                                95 % Clopper-Pearson lower bound (goal ≥ 99 %)
  rank never moved              the same, caught or not
  caught at all                 share of all networks
  fabricated runs out           how many fabricated runs it had published when caught
  honest labs flagged           networks in which any honest lab was flagged, with the
                                95 % upper bound (goal < 0.1 %: needs ≥ 3,000 networks)
  honest movers held aside      honest results whose re-runs did not clear them: lost
                                results, not flags
  audit GPU time                the audits' GPU time over the campaign's (runs' GPU time
                                differs by task, --hour-spread; --agents-in-campaign
                                agents, the close pair simulated run by run, the others
                                charged the rate), mean and 95th percentile (goal ≤ 15 %)
  close pair                    audits per run of the two close agents

The same flags and --seed give the same table.

Examples:
  evalmesh sim audits                               # the tables of docs/scoring.md
  evalmesh sim audits --labs 10 --rate 0.05 --networks 500
  evalmesh sim audits --agents stochastic --rerun-corr 0.9`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sizes, err := parseSizes(labs)
			if err != nil {
				return err
			}
			var det []bool
			switch kinds {
			case "both":
				det = []bool{true, false}
			case "deterministic":
				det = []bool{true}
			case "stochastic":
				det = []bool{false}
			default:
				return fmt.Errorf("--agents %q: use deterministic, stochastic or both", kinds)
			}
			for _, n := range sizes {
				cc := c
				cc.Labs = n
				if err := cc.WithDefaults().Check(); err != nil {
					return err
				}
			}
			start := time.Now()
			rs := auditsim.RunSizes(c, sizes, det, workers)
			fmt.Fprintf(cmd.ErrOrStderr(), "sim audits: %.1f s wall, %d workers\n", time.Since(start).Seconds(), workers)
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), rs)
			}
			fmt.Fprint(cmd.OutOrStdout(), auditsim.Table(rs))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&labs, "labs", "3,10,30,100", "network sizes to simulate, comma-separated (each ≥ 3)")
	f.StringVar(&kinds, "agents", "both", "agent kind: deterministic (audits compare submissions), stochastic (statistical test) or both")
	f.IntVar(&c.Networks, "networks", c.Networks, "networks simulated per size and kind")
	f.IntVar(&c.RunsPerLab, "runs-per-lab", c.RunsPerLab, "runs of each of the two close agents by each lab")
	f.IntVar(&c.Tasks, "tasks", c.Tasks, "tasks the runs are spread over")
	f.IntVar(&c.Agents, "agents-in-campaign", c.Agents, "agents in the campaign (for the audit cost's share)")
	f.Float64Var(&c.Sigma, "sigma", c.Sigma, "per-run score noise (normalized score)")
	f.Float64Var(&c.TaskSpread, "task-spread", c.TaskSpread, "spread of task difficulty")
	f.Float64Var(&c.HonestBias, "honest-bias", c.HonestBias, "spread of honest labs' own bias (hardware)")
	f.Float64Var(&c.FabShare, "fabricate", c.FabShare, "share of the dishonest lab's runs of the agent it fabricates")
	f.Float64Var(&c.Lift, "lift", c.Lift, "score lift of a fabricated run (normalized score)")
	f.Float64Var(&c.Rate, "rate", c.Rate, "audit rate: expected audits of an ordinary run")
	f.Float64Var(&c.Bias, "bias", c.Bias, "statistical test: allowed per-lab bias, in units of the results' spread")
	f.Float64Var(&c.Z, "z", c.Z, "statistical test: critical value")
	f.Float64Var(&c.RerunCorr, "rerun-corr", c.RerunCorr, "stochastic agents: correlation of a same-seed re-run with the original run, in [0, 1)")
	f.Float64Var(&c.PairZ, "pair-z", c.PairZ, "pair test of a held stochastic result: critical value (2.326: 1 % of honest pairs held aside)")
	f.Float64Var(&c.HourSpread, "hour-spread", c.HourSpread, "spread of the logarithm of a run's GPU time between tasks")
	f.Uint64Var(&c.Seed, "seed", c.Seed, "random seed")
	f.IntVar(&workers, "workers", runtime.GOMAXPROCS(0), "sizes simulated at once")
	return cmd
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 3 {
			return nil, fmt.Errorf("--labs %q: want comma-separated network sizes of 3 labs or more, like 3,10,30,100", s)
		}
		out = append(out, n)
	}
	return out, nil
}

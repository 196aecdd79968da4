package main

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/protocol/sim"
)

func init() { register(newSimCmd) }

func newSimCmd(g *globals) *cobra.Command {
	c := sim.Defaults
	var partition string
	var wall bool
	cmd := &cobra.Command{
		Use:   "sim [--nodes N] [--labs L] [--slots S] [--loss P] [--partition FRAC:DUR[@AT]] [--crash K] [--seed X]",
		Short: "Simulate the claim protocol: many nodes, lossy network, partitions, crashes",
		Long: `Run N nodes of the real claim state machine (the code the daemon runs) in virtual
time over a simulated network, on one campaign of S slots, and print what happened. Nothing
touches the network or the disk; a simulated day takes seconds. Use it to choose lease,
heartbeat and settle settings for your network before running daemons.

What it prints (--json gives the same fields):
  finished, lost_slots    slots with a run attestation / without one at the end (lost_slots
                          should be 0: attempts exhausted or claims stuck would show here)
  duplicate_runs          runs started for a slot while another run of it had started and not
                          failed: wasted GPU time (retries after an infrastructure failure or
                          a crash are not duplicates); duplicate_runs_partitioned counts those
                          started while the network was partitioned
  claim_to_start_ms       p50/p99/max, per run, of the time from the moment its node had free
                          capacity while the slot was free (campaign known, lease lapsed, or
                          released) to the run's start: the protocol's own overhead (settling,
                          losing a tie), not waiting for capacity or for a lease to lapse
  messages_per_slot       claim messages published per slot (claims, renews, releases);
                          deliveries_per_slot counts their deliveries to nodes
  rescored_ok             finished slots whose counted run was re-scored by --replication
                          labs other than its own (a silent lab is replaced after
                          --rescore-timeout)
  equivocations           one lab with two results for one slot and attempt: should be 0
  keyless_runs            runs of sealed slots by nodes of --keyless-labs labs, which hold no
                          key: they wait for a grant (none comes here), GPU time spent for
                          nothing yet. Keyless nodes take sealed slots last, and never
                          one whose run already waits elsewhere, which keeps it low
  forged_releases, fabricated_results, aborted_by_fabricated
                          with --dishonest-labs: what the dishonest labs sent, and how many
                          honest runs a fabricated result cut short (should be 0: only a
                          node holding a slot or heard running it can); lost_slots then
                          counts slots without an honest result the ledger counts
  claim_records, squat_claims, given_up, given_up_to_dishonest, held_elsewhere
                          with --claim-records (the default, as network create writes): the
                          signed claim records; the dishonest labs' records of attempts
                          other labs were running, which they never run; honest runs given
                          up to a better-ranked record (of those, to a dishonest one); and
                          starts refused because a better-ranked record was already held
  virtual_seconds         until the last slot finished

The same flags and --seed give the same output, byte for byte, but for wall_seconds (the
JSON's last field, the only one that differs between runs). The wall-clock time is also
printed on stderr with the CPU time and peak memory; --wall adds cpu_seconds and
max_rss_mib to the JSON.

Knobs, and what they trade:
  --lease       how long others hold a slot for a claim that is not renewed. Longer: a
                crashed node's slots wait longer before another node retries them. Shorter:
                a partition or a few lost renews lapse live claims sooner, and the cut-off
                nodes start duplicates.
  --heartbeat   how often a live run renews and re-announces its claim (default lease/3).
                Shorter: more messages per slot; a joining or healed node learns the live
                claims sooner. Keep it well under the lease so one or two lost renews do
                not lapse a claim.
  --settle      how long a claim waits for a conflicting one before its run starts. It is
                the floor of claim->start; it must exceed two message delays (--delay-max)
                or simultaneous claims can both start.
  --max-attempts infrastructure failures after which a slot is given up (failed).
  --key-holder-head-start  how long a node without a sealed bundle's key leaves a free slot
                of it to labs that hold the key (default: the lease). Longer: fewer keyless
                runs while key holders have room. Shorter: sealed slots start sooner when
                no key holder has. Model it with --sealed and --keyless-labs.

Examples:
  evalmesh sim --nodes 20 --labs 5 --slots 2000 --loss 0.05 --partition 0.3:10m --crash 2 --seed 7 --json
  evalmesh sim --nodes 200 --slots 20000 --lease 5m --heartbeat 1m
  evalmesh sim --loss 0.25 --settle 1s       # a network that drops a quarter of messages
  evalmesh sim --sealed 0.3 --keyless-labs 2 # 3 of 10 tasks sealed, 2 of 5 labs without the key
  evalmesh sim --dishonest-labs 1            # one lab of 5 forges releases, fabricates results, squats attempts
  evalmesh sim --partition 0.3:30m@9h        # a partition at the campaign's tail
  evalmesh sim --claim-records=false         # a network without signed claim records`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if partition != "" {
				frac, dur, at, err := sim.ParsePartition(partition)
				if err != nil {
					return err
				}
				c.PartitionFrac, c.PartitionFor, c.PartitionAt = frac, dur, at
			} else {
				c.PartitionFrac, c.PartitionFor = 0, 0
			}
			cfg := c.WithDefaults()
			if err := cfg.Check(); err != nil {
				return err
			}
			start, cpu0 := time.Now(), cpuSeconds()
			res := sim.Run(cfg)
			secs, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
			fmt.Fprintf(cmd.ErrOrStderr(), "sim: %.2f s wall (%.0fx faster than real time), %.2f s cpu (%.0fx), max RSS %d MiB\n",
				secs, res.VirtualSeconds/max(secs, 1e-9), cpu, res.VirtualSeconds/max(cpu, 1e-9), maxRSSMiB())
			if g.jsonOut {
				// wall_seconds is the one field that differs between runs of one seed; --wall
				// adds the CPU time and peak memory.
				if wall {
					return printJSON(cmd.OutOrStdout(), struct {
						sim.Result
						WallSeconds float64 `json:"wall_seconds"`
						CPUSeconds  float64 `json:"cpu_seconds"`
						MaxRSSMiB   int64   `json:"max_rss_mib"`
					}{res, secs, cpu, maxRSSMiB()})
				}
				return printJSON(cmd.OutOrStdout(), struct {
					sim.Result
					WallSeconds float64 `json:"wall_seconds"`
				}{res, secs})
			}
			printSimText(cmd.OutOrStdout(), res)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&c.Nodes, "nodes", c.Nodes, "nodes in the network")
	f.IntVar(&c.Labs, "labs", c.Labs, "labs; nodes are dealt to labs round-robin")
	f.IntVar(&c.Slots, "slots", c.Slots, "slots in the campaign")
	f.IntVar(&c.Capacity, "capacity", c.Capacity, "runs each node can hold at once")
	f.Float64Var(&c.Loss, "loss", c.Loss, "probability that one delivery of a message to one node is lost")
	f.Float64Var(&c.Dup, "dup", c.Dup, "probability that a delivered message arrives twice")
	f.DurationVar(&c.DelayLo, "delay-min", c.DelayLo, "shortest one-way message delay")
	f.DurationVar(&c.DelayHi, "delay-max", c.DelayHi, "longest one-way message delay (most are near the minimum)")
	f.StringVar(&partition, "partition", "0.3:10m", "FRAC:DURATION[@AT]: cut off that fraction of nodes for that long, starting AT (default a quarter of the expected makespan); empty: none")
	f.IntVar(&c.Crashes, "crash", c.Crashes, "nodes that crash once each at a random time, losing their runs")
	f.DurationVar(&c.CrashDown, "crash-down", c.CrashDown, "how long a crashed node stays down before restarting")
	f.DurationVar(&c.RunMin, "run-min", c.RunMin, "shortest run")
	f.DurationVar(&c.RunMax, "run-max", c.RunMax, "longest run (lengths are uniform in between)")
	f.Float64Var(&c.AgentFail, "agent-fail", c.AgentFail, "probability a run ends as an agent failure (a valid failed result, never retried)")
	f.Float64Var(&c.InfraFail, "infra-fail", c.InfraFail, "probability a run ends as an infrastructure failure (retried elsewhere)")
	f.Float64Var(&c.Hang, "hang", c.Hang, "probability a run hangs until its hard limit (run-max + grace) aborts it")
	f.DurationVar(&c.Grace, "grace", c.Grace, "hard limit of a slot = run-max + grace")
	f.DurationVar(&c.Lease, "lease", c.Lease, "claim lease")
	f.DurationVar(&c.Heartbeat, "heartbeat", 0, "renew interval of a live claim (default lease/3)")
	f.DurationVar(&c.Settle, "settle", c.Settle, "how long a claim waits for a conflicting one before starting")
	f.DurationVar(&c.DeadAfter, "dead-after", 0, "a node silent this long while others are heard is taken for dead and its claims lapse (default: the daemon's, 2m; negative: only the lease)")
	f.DurationVar(&c.AliveEvery, "alive-every", c.AliveEvery, "how often each node is heard apart from claim messages (the daemon's heads); negative: never")
	f.IntVar(&c.MaxInfraAttempts, "max-attempts", c.MaxInfraAttempts, "infrastructure failures after which a slot is failed")
	f.IntVar(&c.Replication, "replication", c.Replication, "labs other than the runner's that re-score each run")
	f.DurationVar(&c.RescoreTimeout, "rescore-timeout", c.RescoreTimeout, "silence after which the next lab in order re-scores instead")
	f.DurationVar(&c.RescoreTime, "rescore-time", c.RescoreTime, "how long a re-score takes")
	f.IntVar(&c.SilentLabs, "silent-labs", c.SilentLabs, "labs that never re-score")
	f.Float64Var(&c.Sealed, "sealed", c.Sealed, "fraction of the campaign's 10 tasks that are sealed bundles")
	f.IntVar(&c.KeylessLabs, "keyless-labs", c.KeylessLabs, "labs (the last ones) whose nodes hold no key to the sealed tasks")
	f.IntVar(&c.DishonestLabs, "dishonest-labs", c.DishonestLabs, "labs (the last ones) whose first node forges infra releases of every slot and, of each slot it hears another lab running, fabricates a result or (with --claim-records) signs claim records of its attempts it never runs")
	f.BoolVar(&c.ClaimRecords, "claim-records", c.ClaimRecords, "the network requires signed claim records (ledger.claims \"required\", as network create writes): only an attempt's holder by the records finishes its slot and counts")
	f.DurationVar(&c.KeyHolderHeadStart, "key-holder-head-start", 0, "how long a keyless node leaves a free sealed slot to key holders (default: the lease)")
	f.DurationVar(&c.ReconEvery, "recon", c.ReconEvery, "anti-entropy period: attestations lost in gossip arrive at the next one")
	f.Uint64Var(&c.Seed, "seed", c.Seed, "random seed; the same seed and flags give the same output")
	f.BoolVar(&wall, "wall", false, "with --json, also print cpu_seconds and max_rss_mib")
	return cmd
}

// maxRSSMiB is the process's peak resident memory (getrusage), 0 where unknown.
func maxRSSMiB() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss / 1024 // kilobytes on Linux
}

// cpuSeconds is the process's user+system CPU time so far: on a shared machine it says
// what the simulation cost better than the wall clock does.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func printSimText(w io.Writer, r sim.Result) {
	fmt.Fprintf(w, "slots              %d\n", r.Slots)
	fmt.Fprintf(w, "finished           %d\n", r.Finished)
	fmt.Fprintf(w, "lost slots         %d (failed after max attempts: %d)\n", r.LostSlots, r.FailedSlots)
	fmt.Fprintf(w, "runs               %d (infrastructure failures %d)\n", r.Runs, r.InfraFailures)
	fmt.Fprintf(w, "duplicate runs     %d (%.2f%% of slots; extra results %d; started while partitioned %d)\n", r.DuplicateRuns, 100*float64(r.DuplicateRuns)/float64(r.Slots), r.ExtraResults, r.DuplicateRunsPartitioned)
	fmt.Fprintf(w, "equivocations      %d\n", r.Equivocations)
	fmt.Fprintf(w, "claim->start       p50 %.0f ms, p99 %.0f ms, max %.0f ms\n", r.ClaimToStart.P50, r.ClaimToStart.P99, r.ClaimToStart.Max)
	fmt.Fprintf(w, "messages per slot  %.2f published, %.1f delivered (%d deliveries lost)\n", r.MessagesPerSlot, r.DeliveriesPerSlot, r.MessagesLost)
	fmt.Fprintf(w, "re-scored ok       %d of %d finished\n", r.RescoredOK, r.Finished)
	fmt.Fprintf(w, "crashes            %d\n", r.Crashes)
	fmt.Fprintf(w, "keyless runs       %d\n", r.KeylessRuns)
	if r.ForgedReleases+r.FabricatedResults > 0 {
		fmt.Fprintf(w, "dishonest          %d forged releases, %d fabricated results, %d squat claims; honest runs aborted by them %d, given up to squats %d\n",
			r.ForgedReleases, r.FabricatedResults, r.SquatClaims, r.AbortedByFabricated, r.GivenUpToDishonest)
	}
	if r.ClaimRecords > 0 {
		fmt.Fprintf(w, "claim records      %d signed; runs given up to a better-ranked one %d; starts refused, held elsewhere %d\n", r.ClaimRecords, r.GivenUp, r.HeldElsewhere)
	}
	fmt.Fprintf(w, "virtual time       %s\n", time.Duration(r.VirtualSeconds*float64(time.Second)).Round(time.Second))
}

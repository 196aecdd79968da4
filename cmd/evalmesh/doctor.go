package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/doctor"
)

func init() { register(newDoctorCmd) }

func newDoctorCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check that this node can take runs, and say what to fix",
		Long: `Check this node and its machine, one line per check, then what to fix.

Without a daemon (read from the home and this machine):
  config, identity     config.yaml parses; identity.key is there
  network_document     network.json parses and names config's network (its hash), or trust.yaml
  executor             runner.executor, and whether the network counts its runs
  certificate          node-cert.json: for this node, valid now, days left (warns under 14)
  disk                 free space on the home's filesystem against the block store's reserve
  engine               the Docker engine answers (a fail when runner.executor is docker)
  cgroup, seccomp,     the engine's isolation: cgroup v2, a seccomp profile, user
  userns               namespaces or a rootless engine
  gpus                 the GPUs NVML reports (a fail when runner.gpus lists GPUs it lacks)

From the running daemon, when its API answers (else one "daemon" warning):
  daemon, addresses    its peer ID; listen and announced addresses
  peers                peers connected (none: running alone)
  network_agreement    whether peers' heads carry our network document
  clock                the largest offset of a peer's clock against ours, measured on
                       heads (warns from 5 s, fails from 60 s: run NTP)

Each check is ok, warn (worth fixing, runs go on), fail (blocks runs) or info. With --json
it prints {home, time, daemon, fails, warnings, checks: [{name, status, detail, fix}]}
(docs/cli-json.md). It writes nothing and starts no container.

Exit status: 0 when no check fails (warnings allowed), 1 when one fails; the failing
checks are named on stderr.

Examples:
  evalmesh doctor
  evalmesh doctor --home /srv/lab1 --json
  DOCKER_HOST=unix:///run/user/1000/docker.sock evalmesh doctor`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			rep := doctor.Run(cmd.Context(), h, doctor.Options{})
			if g.jsonOut {
				if err := printJSON(cmd.OutOrStdout(), rep); err != nil {
					return err
				}
			} else {
				printDoctor(cmd.OutOrStdout(), rep)
			}
			if failed := rep.Failed(); len(failed) > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("evalmesh doctor: %d check(s) fail, so this node takes no run: %s", len(failed), strings.Join(failed, ", "))}
			}
			return nil
		},
	}
}

// printDoctor prints one line per check, then the fixes.
func printDoctor(w io.Writer, rep *doctor.Report) {
	marks := map[doctor.Status]string{doctor.OK: "ok  ", doctor.Warn: "WARN", doctor.Fail: "FAIL", doctor.Info: "info"}
	fmt.Fprintf(w, "home %s\n", rep.Home)
	for _, c := range rep.Checks {
		fmt.Fprintf(w, "%s %-18s %s\n", marks[c.Status], c.Name, c.Detail)
	}
	var fixes []string
	for _, c := range rep.Checks {
		if c.Fix != "" && (c.Status == doctor.Fail || c.Status == doctor.Warn) {
			fixes = append(fixes, fmt.Sprintf("  %s %s: %s", marks[c.Status], c.Name, c.Fix))
		}
	}
	fmt.Fprintf(w, "%d fail, %d warning(s)\n", rep.Fails, rep.Warnings)
	if len(fixes) > 0 {
		fmt.Fprintln(w, "what to fix:")
		for _, f := range fixes {
			fmt.Fprintln(w, f)
		}
	}
}

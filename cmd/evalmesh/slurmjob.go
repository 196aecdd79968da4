package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/runner/slurm"
)

func init() { register(newSlurmJobCmd) }

// newSlurmJobCmd is what a Slurm batch job of the slurm executor runs on its compute node;
// people do not call it, so it is hidden.
func newSlurmJobCmd(_ *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "slurm-job SPEC.json",
		Short: "Run one task's container on this Slurm compute node (the slurm executor's batch job)",
		Long: `Run the task described by SPEC.json (written by the slurm executor into the run folder) in
a container on this node's Docker engine, with the docker executor's isolation and the GPUs
Slurm granted the job; stop it when Slurm signals the job; write record.json next to the spec
and exit with the container's status. The slurm executor's batch script runs this; the run
folder must be on a filesystem this node shares with the evalmesh node (docs/slurm.md).`,
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			os.Exit(slurm.RunJob(args[0], cmd.ErrOrStderr()))
			return nil
		},
	}
}

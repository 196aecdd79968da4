package main

import (
	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/examples/agents"
)

func init() { register(newAgentCmd) }

// newAgentCmd is the hidden `evalmesh agent NAME`: the example agents (and the example
// evaluator) linked into this binary, so the process executor runs them with no build.
func newAgentCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "agent NAME [ARGS...]",
		Short: "Agent images over IPFS (add, pull), and the built-in example agents",
		Long: `evalmesh agent add|pull move an agent's container image between labs by CID (see
their --help). evalmesh agent NAME runs one of the example agents linked into evalmesh, in the folders the runner passes in
EVALMESH_PUBLIC, EVALMESH_OUTPUT and EVALMESH_SEED. Agents: constant, heuristic, flaky,
solver; "evaluator" is the example AIRS-Bench-contract evaluator.

Example agent spec for the process executor:

  name: solver
  version: "1.0.0"
  command: ["evalmesh", "agent", "solver"]`,
		Args:               cobra.MinimumNArgs(1),
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Flag parsing is off so an agent's own flags pass through; help still works.
			if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
				return cmd.Help()
			}
			if code := agents.Run(args[0], args[1:], cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
}

// Command evalmesh is the node a lab runs to evaluate AI research agents with other labs.
//
// The CLI is thin: each command parses its flags and calls one package function. Commands
// live one group per file and add themselves to the root with register, so files do not
// step on each other.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/home"
)

// globals holds the persistent flags every command sees.
type globals struct {
	homeFlag string
	jsonOut  bool
}

// Home resolves --home, then $EVALMESH_HOME, then ~/.evalmesh.
func (g *globals) Home() (home.Home, error) { return home.Resolve(g.homeFlag) }

// constructors of top-level commands, filled by init functions in this package.
var constructors []func(*globals) *cobra.Command

func register(c func(*globals) *cobra.Command) { constructors = append(constructors, c) }

// subconstructors adds subcommands to a top-level command from another file: the node's
// `task add` lives apart from the offline `task pack`, say.
var subconstructors = map[string][]func(*globals) *cobra.Command{}

// registerSub adds a subcommand under the top-level command named parent.
func registerSub(parent string, c func(*globals) *cobra.Command) {
	subconstructors[parent] = append(subconstructors[parent], c)
}

// exitError makes the process exit with a code other than 1, or print nothing more.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "evalmesh",
		Short: "Evaluate AI research agents with other labs, without a central server",
		Long: `evalmesh is the node a lab runs to take part in a shared, verifiable leaderboard of AI
research agents on benchmark tasks (AIRS-Bench, HeurekaBench).

Task bundles are content-addressed (IPFS UnixFS) and pinned; work is announced and
claimed over libp2p; each run executes in a container on the lab's own GPUs; each result
is a signed in-toto attestation that other labs verify; every node recomputes the same
leaderboard (Elo, normalized score, valid-submission rate) from what it verified.

Every command takes --home DIR (or $EVALMESH_HOME; default ~/.evalmesh) and every command
that prints data takes --json.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.homeFlag, "home", "", "node home directory (default $EVALMESH_HOME, else ~/.evalmesh)")
	root.PersistentFlags().BoolVar(&g.jsonOut, "json", false, "print machine-readable JSON instead of text")
	for _, c := range constructors {
		cmd := c(g)
		for _, sub := range subconstructors[cmd.Name()] {
			cmd.AddCommand(sub(g))
		}
		root.AddCommand(cmd)
	}
	return root
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the CLI with args and returns the exit code; tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "evalmesh:", err)
		return 1
	}
	return 0
}

// printJSON writes v as indented JSON followed by a newline.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

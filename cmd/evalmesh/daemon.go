package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/runner"
)

func init() { register(newDaemonCmd) }

func newDaemonCmd(g *globals) *cobra.Command {
	var listen []string
	var api string
	cmd := &cobra.Command{
		Use:   "daemon [--listen MULTIADDR]... [--api HOST:PORT]",
		Short: "Run this node: hold, pin and exchange task bundles with other labs",
		Long: `Run the node of this home until SIGINT or SIGTERM: a libp2p host (TCP and QUIC), the
blockstore and pins, bitswap and the streaming bundle transfer, and the local HTTP API
the other commands talk to. The API address is written to HOME/api while it runs, and a
fresh API token to HOME/api.token (mode 0600): the API answers only requests that carry it,
so only this account can drive the daemon (docs/api.md). The CLI sends it for you.

Listen addresses and the API address come from HOME/config.yaml unless given here; port 0
picks a free port. Nothing is sent beyond 127.0.0.1 unless the config says so (listen
addresses, bootstrap peers, mdns).

At start it also recovers the runs a killed node left unfinished (as evalmesh run --recover
does): it re-attaches to agents still running, enforcing their wall-clock limits, and
attests each run once; runs whose task is gone are attested as failed and free their GPUs.

Stopping it (Ctrl-C) finishes running requests for a few seconds, then closes the stores:
nothing written is lost. Re-attached agents keep running and are recovered again at the
next start.

Example:
  evalmesh init --home /srv/lab1
  evalmesh daemon --home /srv/lab1 --listen /ip4/127.0.0.1/tcp/0 --api 127.0.0.1:0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errw := cmd.ErrOrStderr()
			opts := node.Options{
				Listen: listen,
				API:    api,
				Logf:   func(format string, args ...any) { fmt.Fprintf(errw, format+"\n", args...) },
			}
			defer fmt.Fprintln(errw, "daemon stopped")
			var recovering sync.WaitGroup
			defer recovering.Wait()
			return node.Run(ctx, h, opts, func(n *node.Node, apiAddr string) {
				recovering.Add(1)
				go func() {
					defer recovering.Done()
					recoverAtStart(ctx, h, errw)
				}()
				out := cmd.OutOrStdout()
				if g.jsonOut {
					printJSON(out, map[string]any{"peer_id": n.ID().String(), "addrs": n.Addrs(), "api": apiAddr})
					return
				}
				fmt.Fprintf(out, "peer ID     %s\n", n.ID())
				for _, a := range n.Addrs() {
					fmt.Fprintf(out, "listening   %s\n", a)
				}
				fmt.Fprintf(out, "API         http://%s (address in %s, token in %s)\n", apiAddr, h.APIPath(), node.APITokenPath(h))
				fmt.Fprintln(out, "daemon ready; Ctrl-C stops it")
			})
		},
	}
	cmd.Flags().StringArrayVar(&listen, "listen", nil, "libp2p listen multiaddr (repeatable; default: config listen)")
	cmd.Flags().StringVar(&api, "api", "", "HTTP API host:port (default: config api; port 0 picks one)")
	return cmd
}

// recoverAtStart recovers the home's unfinished runs in the background of a starting daemon;
// it returns when they have ended or ctx is done (the daemon stops; they stay recoverable).
func recoverAtStart(ctx context.Context, h home.Home, log io.Writer) {
	runs, err := runner.ListRuns(h)
	if err != nil {
		fmt.Fprintf(log, "run recovery: %v\n", err)
		return
	}
	unfinished := 0
	for _, st := range runs {
		if !st.Phase.Final() {
			unfinished++
		}
	}
	if unfinished == 0 {
		return
	}
	fmt.Fprintf(log, "recovering %d unfinished run(s)\n", unfinished)
	r, err := nodeRunner(h, "", log)
	if err != nil {
		fmt.Fprintf(log, "run recovery: %v (evalmesh run --home %s --recover retries)\n", err, h.Dir)
		return
	}
	if _, _, err := recoverRuns(ctx, r, log); err != nil && ctx.Err() == nil {
		fmt.Fprintf(log, "run recovery: %v\n", err)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/attest"
	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/node"
	"github.com/evalmesh/evalmesh/node/mesh"
	"github.com/evalmesh/evalmesh/protocol"
	"github.com/evalmesh/evalmesh/runner"
	"github.com/evalmesh/evalmesh/runner/slurm"
)

func init() { register(newDaemonCmd) }

func newDaemonCmd(g *globals) *cobra.Command {
	var listen []string
	var api string
	var claims protocol.ClaimConfig
	var testControls, testFabricate, testForgeTranscript, testClaimHoldings bool
	var testHoldAudits string
	var dashboardListen, logFormat string
	var rescoreTimeout, redialMax time.Duration
	cmd := &cobra.Command{
		Use:   "daemon [--listen MULTIADDR]... [--api HOST:PORT]",
		Short: "Run this node: hold, pin and exchange task bundles with other labs",
		Long: `Run the node of this home until SIGINT or SIGTERM: a libp2p host (TCP and QUIC), the
blockstore and pins, bitswap and the streaming bundle transfer, and the local HTTP API
the other commands talk to. The API address is written to HOME/api while it runs, and a
fresh API token to HOME/api.token (mode 0600): the API answers only requests that carry it,
so only this account can drive the daemon (docs/api.md). The CLI sends it for you.

With --dashboard-listen HOST:PORT it also serves a read-only web dashboard on that address:
the leaderboard, per-task heatmap, agents, tasks, campaigns, runs, peers and evidence, the
same data as JSON under /api/v1/, and Prometheus metrics on /metrics. It needs no token and
has no control endpoint, so a lab can expose it while the API stays private (docs/api.md).
Logs go to stderr through log/slog: text lines, or JSON with --log-format json.

Listen addresses and the API address come from HOME/config.yaml unless given here; port 0
picks a free port. Nothing is sent beyond 127.0.0.1 unless the config says so (listen
addresses, bootstrap peers, mdns).

At start it also recovers the runs a killed node left unfinished (as evalmesh run --recover
does): it re-attaches to agents still running, enforcing their wall-clock limits, and
attests each run once; runs whose task is gone are attested as failed and free their GPUs.

In a network: when HOME/trust.yaml lists the network's labs and HOME/node-cert.json
certifies this node for one of them, the daemon also joins the network's gossip topics
(/evalmesh/<network>/campaigns, /claims, /attestations, /heads), claims slots of the
campaigns it verified within its capacity (one run per allowed GPU, or runner.max_parallel
on a CPU-only node), fetches their bundles from peers, runs them, gossips the signed
attestations, re-scores the runs of other labs it is chosen for, and recomputes the ledger
as attestations arrive. See evalmesh campaign --help.

Peers it has been connected to (bootstrap, evalmesh connect, or peers of the network that
connected to it) are kept in HOME/peers.json and dialled again, with backoff up to
--redial-max, whenever the connection drops, also across restarts. Peers connecting and
leaving, and the node running alone, are logged at WARN.

Stopping it (Ctrl-C) finishes running requests for a few seconds, then closes the stores:
nothing written is lost. Re-attached agents keep running and are recovered again at the
next start.

Example:
  evalmesh init --home /srv/lab1
  evalmesh daemon --home /srv/lab1 --listen /ip4/127.0.0.1/tcp/0 --api 127.0.0.1:0
  evalmesh daemon --dashboard-listen 127.0.0.1:5280 --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := g.Home()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if dir := os.Getenv("EVALMESH_PROFILE_DIR"); dir != "" {
				stopProfile, err := startProfiles(dir)
				if err != nil {
					return err
				}
				defer stopProfile()
			}
			logger, err := newLogger(cmd.ErrOrStderr(), logFormat)
			if err != nil {
				return err
			}
			errw := &logWriter{l: logger}
			logf := func(format string, args ...any) { logLine(logger, fmt.Sprintf(format, args...)) }
			warnf := func(format string, args ...any) { logLineAt(logger, slog.LevelWarn, fmt.Sprintf(format, args...)) }
			opts := node.Options{
				Listen:            listen,
				API:               api,
				Logf:              logf,
				Warnf:             warnf,
				Redial:            node.RedialOptions{Max: redialMax},
				TestControls:      testControls,
				TestClaimHoldings: testClaimHoldings, // a dishonest lab, in tests only
				DashboardListen:   dashboardListen,
				Mesh: func(n *node.Node) (*mesh.Options, error) {
					mo, err := meshOptions(h, n, claims, errw)
					if mo != nil {
						mo.RescoreTimeout = rescoreTimeout
						if testFabricate {
							mo.Runner.TestFabricate = fabricateFromLabels // a dishonest lab, in tests only
						}
						if testForgeTranscript {
							mo.Runner.TestForgeTranscript = forgeTranscript // a dishonest lab, in tests only
						}
						mo.TestAuditGate = testHoldAudits
					}
					return mo, err
				},
			}
			defer fmt.Fprintln(errw, "daemon stopped")
			var recovering sync.WaitGroup
			defer recovering.Wait()
			return node.Run(ctx, h, opts, func(n *node.Node, apiAddr string) {
				recovering.Add(1)
				go func() {
					defer recovering.Done()
					recoverAtStart(ctx, h, errw)
					// Runs signed before a crash, or just recovered, reach the network.
					if m := n.Mesh(); m != nil {
						if k, err := m.ImportLocal(ctx); err != nil {
							fmt.Fprintf(errw, "import local attestations: %v\n", err)
						} else if k > 0 {
							fmt.Fprintf(errw, "imported %d local attestation(s) into the store\n", k)
						}
					}
				}()
				out := cmd.OutOrStdout()
				if g.jsonOut {
					printJSON(out, map[string]any{"peer_id": n.ID().String(), "addrs": n.Addrs(), "api": apiAddr, "dashboard": n.DashboardAddr()})
					return
				}
				fmt.Fprintf(out, "peer ID     %s\n", n.ID())
				for _, a := range n.Addrs() {
					fmt.Fprintf(out, "listening   %s\n", a)
				}
				fmt.Fprintf(out, "API         http://%s (address in %s, token in %s)\n", apiAddr, h.APIPath(), h.APITokenPath())
				if d := n.DashboardAddr(); d != "" {
					fmt.Fprintf(out, "dashboard   http://%s/ (read-only, no token; metrics on /metrics)\n", d)
				}
				fmt.Fprintln(out, "daemon ready; Ctrl-C stops it")
			})
		},
	}
	cmd.Flags().StringArrayVar(&listen, "listen", nil, "libp2p listen multiaddr (repeatable; default: config listen)")
	cmd.Flags().StringVar(&api, "api", "", "HTTP API host:port (default: config api; port 0 picks one)")
	cmd.Flags().DurationVar(&claims.Lease, "lease", protocol.DefaultLease, "how long other nodes hold a slot for this node after each claim or renewal (pick it with `evalmesh sim`)")
	cmd.Flags().DurationVar(&rescoreTimeout, "rescore-timeout", 2*time.Minute, "how long a lab chosen to re-score a run may stay silent before the next lab in the order steps in")
	cmd.Flags().DurationVar(&redialMax, "redial-max", time.Minute, "longest wait between dials of a known peer that is not connected (the wait starts at 1s and doubles per failed dial)")
	cmd.Flags().BoolVar(&testControls, "test-controls", false, "serve the fault-test partition controls on the API (tests only)")
	_ = cmd.Flags().MarkHidden("test-controls")
	cmd.Flags().BoolVar(&testFabricate, "test-fabricate", false, "sign every run with a submission written from the task's private data instead of the agent's (a dishonest lab; tests only)")
	_ = cmd.Flags().MarkHidden("test-fabricate")
	cmd.Flags().BoolVar(&testForgeTranscript, "test-forge-transcript", false, "sign every run with a transcript of its first model call only (a dishonest lab; tests only)")
	_ = cmd.Flags().MarkHidden("test-forge-transcript")
	cmd.Flags().BoolVar(&testClaimHoldings, "test-claim-holdings", false, "answer \"held\" to every holdings request and fetch nothing in repair rounds (a dishonest lab; tests only)")
	_ = cmd.Flags().MarkHidden("test-claim-holdings")
	cmd.Flags().StringVar(&testHoldAudits, "test-hold-audits", "", "hold this node's audits while this file exists (tests only)")
	_ = cmd.Flags().MarkHidden("test-hold-audits")
	cmd.Flags().StringVar(&dashboardListen, "dashboard-listen", "", "serve the read-only web dashboard, its JSON API and /metrics on this host:port (e.g. 127.0.0.1:5280; port 0 picks one; default off). It needs no token and serves no control endpoint: safe to expose (docs/api.md)")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format on stderr: text (key=value lines) or json (one object a line)")
	cmd.Flags().DurationVar(&claims.DeadAfter, "dead-after", protocol.DefaultDeadAfter, "a node silent this long (no claim message, no heads) while others are heard is taken for dead: its slots are free again before their leases lapse (negative: wait for the lease; docs/protocol-claims.md rule 4a)")
	cmd.Flags().DurationVar(&claims.Heartbeat, "heartbeat", 0, "how often live claims are renewed and re-announced (default lease/3)")
	cmd.Flags().DurationVar(&claims.KeyHolderHeadStart, "key-holder-head-start", 0, "how long a free slot of a sealed bundle this lab cannot open is left to labs that hold its key before this node runs it anyway (default: the lease)")
	return cmd
}

// startProfiles writes a CPU profile of the daemon's whole life to DIR/cpu.pprof and, when it
// stops, its allocations to DIR/allocs.pprof (bench/transfer.sh -profile sets
// EVALMESH_PROFILE_DIR; the variable is for measuring, not a user option).
func startProfiles(dir string) (stop func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if a, err := os.Create(filepath.Join(dir, "allocs.pprof")); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
	}, nil
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

// meshOptions decides whether the daemon of h joins a network, and how: it needs a trust
// file listing the network's labs and a lab certificate for this node. Without either the
// node runs alone (bundles, pins, transfer) and says why.
func meshOptions(h home.Home, n *node.Node, claims protocol.ClaimConfig, log io.Writer) (*mesh.Options, error) {
	net, err := loadNetworkPolicy(h, n.Config().Network)
	if err != nil {
		return nil, err
	}
	if net.Warn != "" {
		fmt.Fprintf(log, "network: WARN %s\n", net.Warn)
	}
	trust := net.Trust
	if trust == nil {
		trustPath := h.TrustPath()
		if _, err := os.Stat(trustPath); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(log, "not joining a network: no %s or %s (list the network's labs in one of them)\n", h.NetworkDocPath(), trustPath)
			return nil, nil
		}
		if trust, err = attest.LoadTrust(trustPath); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(h.CertPath()); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(log, "not joining a network: no lab certificate %s (ask your lab: evalmesh lab certify --node %s)\n", h.CertPath(), n.ID())
		return nil, nil
	}
	r, err := nodeRunner(h, "", log)
	if err != nil {
		return nil, err
	}
	r.Trust = trust // each run's preflight checks the certificate against the network's labs
	if c := r.CurrentCert(); c != nil {
		if r.DrawKey, err = nodeDrawKey(h, net.Doc, c.Lab); err != nil {
			return nil, err
		}
	}
	capacity := n.Config().Runner.MaxParallel
	if inv, err := r.Inventory(); err == nil && !inv.CPUOnly && len(inv.GPUs) > 0 {
		capacity = len(inv.GPUs)
		if allowed := n.Config().Runner.GPUs; len(allowed) > 0 {
			capacity = len(allowed)
		}
	}
	var free func() (int, error)
	if sl, ok := r.Executors[r.Executor].(*slurm.Executor); ok {
		// A Slurm node claims no more than its partition can start: its free GPUs now.
		free = func() (int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return sl.Capacity(ctx, 0)
		}
		if capacity, err = free(); err != nil {
			return nil, err
		}
	}
	counts := "isolated (container) runs only"
	if net.Policy.AllowProcessRuns {
		counts = "process-executor runs too (agents not isolated)"
	}
	fmt.Fprintf(log, "joining network %s: %d trusted lab(s), %d revocation(s), capacity %d run(s), executor %s; the ledger counts %s, replication %d\n",
		n.Config().Network, len(trust.Labs()), len(trust.Revocations()), max(capacity, 1), r.Executor, counts, net.Policy.Replication)
	return &mesh.Options{Trust: trust, Runner: r, Capacity: capacity, FreeCapacity: free, Claims: claims,
		Policy: net.Policy, Scoring: net.Scoring, NetworkDoc: net.Doc}, nil
}

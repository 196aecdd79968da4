package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/home"
	"github.com/evalmesh/evalmesh/internal/progress"
	"github.com/evalmesh/evalmesh/node"
)

// Commands that talk to the running daemon over its HTTP API (node.Client).

func init() {
	daemonAddrs = func(h home.Home) []string {
		c, err := node.NewClient(h)
		if err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		id, err := c.ID(ctx)
		if err != nil {
			return nil
		}
		return id.Addrs
	}
	registerSub("task", newTaskAddCmd)
	registerSub("task", newTaskGetCmd)
	registerSub("task", newTaskExportCmd)
	registerSub("task", newTaskImportCARCmd)
	register(newPinCmd)
	register(newPeersCmd)
	register(newConnectCmd)
}

// client finds the home's daemon; the error says how to start one.
func (g *globals) client() (*node.Client, error) {
	h, err := g.Home()
	if err != nil {
		return nil, err
	}
	return node.NewClient(h)
}

func parseCIDArg(s string) (cid.Cid, error) {
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("%q is not a CID: %w", s, err)
	}
	return c, nil
}

// newProgress is the byte-progress line of task add / get and pin add (internal/progress).
func newProgress(w io.Writer, what string) *progress.Bar { return progress.New(w, what) }

// newCountProgress is newProgress for a count of items (blocks, segments) instead of bytes.
func newCountProgress(w io.Writer, what string) *progress.Bar { return progress.NewCount(w, what) }

func newTaskAddCmd(g *globals) *cobra.Command {
	var unchecked, seal bool
	var sealOut string
	var scorers []string
	cmd := &cobra.Command{
		Use:   "add [--unchecked] DIR",
		Short: "Pack a bundle folder into the running node, pin it, print its CID",
		Long: `Pack the folder DIR into a UnixFS DAG (the CID ` + "`ipfs add -r --cid-version=1`" + ` gives),
store it in the running daemon's blockstore and pin it, so other labs can fetch it.
DIR must be a valid task bundle (see ` + "`evalmesh task check`" + `) unless --unchecked.

Example:
  evalmesh task add ./bundles/spaceship-titanic
  evalmesh task add --unchecked ./any-folder --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := sealForAdd(cmd, g, args, seal, sealOut, unchecked, scorers); err != nil {
				return err
			}
			bar := newProgress(cmd.ErrOrStderr(), "pack")
			root, err := c.Add(cmd.Context(), args[0], unchecked, func(d int64) { bar.Set(d, -1) })
			bar.Finish()
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"cid": root.String()})
			}
			fmt.Fprintln(cmd.OutOrStdout(), root)
			return nil
		},
	}
	cmd.Flags().BoolVar(&unchecked, "unchecked", false, "pack any folder, not only a valid bundle")
	cmd.Flags().BoolVar(&seal, "seal", false, "seal private/ first and grant its key (see task pack --help; default: on when the trust file lists age recipients)")
	cmd.Flags().StringVar(&sealOut, "out", "", "with --seal: the sealed copy's folder (default DIR.sealed)")
	cmd.Flags().StringSliceVar(&scorers, "scorers", nil, scorersHelp)
	return cmd
}

// addKept adds kept_blocks and kept_bytes to a fetching command's JSON when the daemon's
// fetch resumed an interrupted one (docs/cli-json.md).
func addKept(out map[string]any, rep node.FetchReport) {
	if rep.Resumed() {
		out["kept_blocks"], out["kept_bytes"] = rep.KeptBlocks, rep.KeptBytes
	}
}

// printKept says, when the fetch resumed, how much of the DAG was already held, e.g.
// "resumed: kept 1,843 blocks (1.80 GiB) of 2.00 GiB already held".
func printKept(w io.Writer, rep node.FetchReport) {
	if rep.Resumed() {
		fmt.Fprintf(w, "resumed: kept %s blocks (%s) of %s already held\n", humanize.Comma(rep.KeptBlocks), gib(rep.KeptBytes), gib(rep.Total))
	}
}

// gib writes a byte count in binary units with two decimals (1.80 GiB, 512.00 KiB).
func gib(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

func newTaskGetCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "get [--timeout DURATION] CID DIR",
		Short: "Fetch a bundle from peers, verify it, pin it and unpack it into DIR",
		Long: `Fetch the bundle CID from connected peers (split across those that have it, every block
checked against its CID as it arrives), pin it on this node, and unpack it safely into DIR
(which must not exist or be empty): absolute paths, "..", links leaving the bundle and
bundles over max_bundle_size are refused. On a terminal a bar shows bytes, rate and ETA.

It gives up once no connected peer has sent a block for --timeout (the root included: a CID
no peer has fails after that long), naming the CID and the peers it asked.

Example:
  evalmesh connect /ip4/10.0.0.7/tcp/4201/p2p/12D3KooW...
  evalmesh task get bafybei... ./work/task1
  evalmesh task get --timeout 30s bafybei... ./work/task1`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := parseCIDArg(args[0])
			if err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s: want a positive duration, e.g. 30s or 5m", timeout)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(args[1])
			if err != nil {
				return err
			}
			bar := newProgress(cmd.ErrOrStderr(), "fetch")
			start := time.Now()
			var size int64
			rep, err := c.GetFetch(cmd.Context(), root, dir, timeout, func(d, t int64) { size = t; bar.Set(d, t) }, bar.Finish)
			bar.Finish()
			if err != nil {
				return err
			}
			if g.jsonOut {
				out := map[string]any{"cid": root.String(), "dir": dir, "bytes": size, "seconds": time.Since(start).Seconds()}
				addKept(out, rep)
				return printJSON(cmd.OutOrStdout(), out)
			}
			printKept(cmd.OutOrStdout(), rep)
			fmt.Fprintf(cmd.OutOrStdout(), "%s → %s (%d bytes, %.1fs)\n", root, dir, size, time.Since(start).Seconds())
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up once no peer has sent a block for this long")
	return cmd
}

func newTaskExportCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "export CID FILE.car",
		Short: "Write a bundle held by the running node to a CAR file",
		Long: `Write the DAG of CID, which the running node must hold, to FILE.car as a CARv1 with CID as
its root: ` + "`ipfs dag import FILE.car`" + ` reads it, and so does ` + "`evalmesh task import-car`" + `.
The file is written atomically: it appears complete or not at all.

Example:
  evalmesh task export bafybei... task1.car`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := parseCIDArg(args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			path := args[1]
			if err := home.WriteAtomic(path, 0o644, func(w io.Writer) error { return c.ExportCAR(cmd.Context(), root, w) }); err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"cid": root.String(), "file": path})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s → %s\n", root, path)
			return nil
		},
	}
}

func newTaskImportCARCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "import-car FILE.car",
		Short: "Store and pin the DAGs of a CAR file in the running node",
		Long: `Read FILE.car (CARv1 or v2, as ` + "`ipfs dag export`" + ` writes), check every block against its
CID, store the blocks in the running node and pin each root; prints the roots. A root
whose DAG is incomplete in the file is refused.

Example:
  evalmesh task import-car task1.car`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			roots, err := c.ImportCAR(cmd.Context(), f)
			if err != nil {
				return fmt.Errorf("import %s: %w", args[0], err)
			}
			if g.jsonOut {
				var out []string
				for _, r := range roots {
					out = append(out, r.String())
				}
				return printJSON(cmd.OutOrStdout(), map[string][]string{"roots": out})
			}
			for _, r := range roots {
				fmt.Fprintln(cmd.OutOrStdout(), r)
			}
			return nil
		},
	}
}

func newPinCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pin ls|add|rm",
		Short: "List, add and remove pins on the running node",
		Long: `Pinned DAGs are kept by this node (for reproducibility) and served to other labs.

Example:
  evalmesh pin ls
  evalmesh pin add bafybei...      # fetches from peers if needed
  evalmesh pin rm bafybei...`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List pinned CIDs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			pins, err := c.Pins(cmd.Context())
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), pins)
			}
			for _, p := range pins {
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", p.CID, p.Name)
			}
			return nil
		},
	})
	var name string
	add := &cobra.Command{
		Use:   "add CID",
		Short: "Fetch a DAG from peers if needed and pin it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := parseCIDArg(args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			bar := newProgress(cmd.ErrOrStderr(), "fetch")
			rep, err := c.PinFetch(cmd.Context(), root, name, bar.Set)
			bar.Finish()
			if err != nil {
				return err
			}
			if g.jsonOut {
				out := map[string]any{"cid": root.String()}
				addKept(out, rep)
				return printJSON(cmd.OutOrStdout(), out)
			}
			printKept(cmd.OutOrStdout(), rep)
			fmt.Fprintf(cmd.OutOrStdout(), "pinned %s\n", root)
			return nil
		},
	}
	add.Flags().StringVar(&name, "name", "", "a name to remember the pin by")
	cmd.AddCommand(add)
	cmd.AddCommand(&cobra.Command{
		Use:   "rm CID",
		Short: "Remove a pin (blocks stay until garbage collection)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := parseCIDArg(args[0])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.Unpin(cmd.Context(), root); err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"cid": root.String()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "unpinned %s\n", root)
			return nil
		},
	})
	return cmd
}

func newPeersCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "peers",
		Short: "List the peers the running node is connected to",
		Long: `List connected peers with the address of the connection and how long ago each one's
last head (/heads) was heard; "head stale" means none came within the staleness bound
(3 head intervals), so its ledger status is not current.

On stderr: each known peer that is not connected (the daemon re-dials it with backoff)
with its failed dials, next dial and last error, and a line saying so when no peer is
connected at all.

Example:
  evalmesh peers --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			peers, err := c.Peers(cmd.Context())
			if err != nil {
				return err
			}
			known, err := c.KnownPeers(cmd.Context())
			if err != nil {
				return err
			}
			printPeersNotConnected(cmd.ErrOrStderr(), peers, known, time.Now())
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), peers)
			}
			for _, p := range peers {
				head := "no head heard"
				if p.HeadAgeSeconds != nil {
					head = fmt.Sprintf("head %s ago", time.Duration(*p.HeadAgeSeconds*float64(time.Second)).Round(time.Second))
					if p.HeadStale {
						head = "head stale: last " + strings.TrimPrefix(head, "head ")
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s  %s\n", p.ID, p.Addr, head)
			}
			return nil
		},
	}
}

// printPeersNotConnected says on w which known peers are not connected and whether the
// node runs alone.
func printPeersNotConnected(w io.Writer, peers []node.PeerInfo, known []node.KnownPeer, now time.Time) {
	down := 0
	for _, k := range known {
		if k.Connected {
			continue
		}
		down++
		line := fmt.Sprintf("not connected: %s (%d failed dial(s) in a row, next in %s)", k.ID, k.Failures, max(k.NextDial.Sub(now), 0).Round(time.Second))
		if k.LastError != "" {
			line += ": " + k.LastError
		}
		fmt.Fprintln(w, line)
	}
	if len(peers) == 0 {
		fmt.Fprintf(w, "no peers connected: this node is running alone (%d known peer(s) being re-dialled; `evalmesh connect ADDR` adds one)\n", down)
	}
}

func newConnectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "connect ADDR",
		Short: "Connect the running node to a peer",
		Long: `Dial a peer given as a multiaddr ending in /p2p/PEER_ID (` + "`evalmesh id`" + ` on that node
prints its addresses while its daemon runs). To connect at every start, list it under
bootstrap in config.yaml.

Example:
  evalmesh connect /ip4/10.0.0.7/tcp/4201/p2p/12D3KooW...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.Connect(cmd.Context(), args[0]); err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"connected": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "connected %s\n", args[0])
			return nil
		},
	}
}

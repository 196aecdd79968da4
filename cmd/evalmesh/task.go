package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalmesh/evalmesh/internal/progress"
	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

func init() { register(newTaskCmd) }

func newTaskCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Make, check, pack and unpack task bundles",
		Long: `A task bundle is a folder — task.yaml, prompt.md, public/, private/, and optionally
evaluate/ and source/ — identified by its IPFS CID (docs/bundle-format.md).

Typical flow for an AIRS-Bench task:

  evalmesh task import airs-bench/airsbench/tasks/rad/MathQuestionAnsweringSVAMPAccuracy \
      --data /data/prepared/svamp --out bundles/svamp
  evalmesh task check bundles/svamp
  evalmesh task pack bundles/svamp --car svamp.car
  evalmesh task inspect svamp.car --json
  evalmesh task unpack svamp.car /tmp/svamp`,
	}
	cmd.AddCommand(newTaskImportCmd(g), newTaskImportHeurekaCmd(g), newTaskPackCmd(g), newTaskCheckCmd(g), newTaskInspectCmd(g), newTaskUnpackCmd(g))
	return cmd
}

func newTaskImportCmd(g *globals) *cobra.Command {
	var out, data string
	var gpus int
	var wall time.Duration
	cmd := &cobra.Command{
		Use:   "import AIRS_TASK_DIR --out DIR",
		Short: "Turn an AIRS-Bench task folder into a bundle",
		Long: `Import an upstream AIRS-Bench task folder (airsbench/tasks/rad/<Task>/: metadata.yaml,
project_description.md, prepare.py, evaluate_prepare.py, evaluate.py, …) as a bundle:
metadata.yaml becomes task.yaml, project_description.md becomes prompt.md, and every upstream
file is kept unchanged under source/.

--data DIR places data already prepared with the task's prepare.py / evaluate_prepare.py:
DIR/train, DIR/test (and DIR/validation) go to public/, DIR/test_with_labels to private/.
Without --data, public/ and private/ are empty.

AIRS-Bench gives every run one GPU and 24 hours; --gpus N and --wall-clock DUR make a
variant on purpose (--gpus 0: a CPU-only variant that a node without GPUs will run). The
variant is another bundle with another CID.

Example:
  evalmesh task import rad/MathQuestionAnsweringSVAMPAccuracy --data /data/svamp --out svamp`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out DIR is required: where to write the bundle")
			}
			opts := tasks.ImportOptions{DataDir: data, WallClockSeconds: int64(wall / time.Second)}
			if cmd.Flags().Changed("gpus") {
				opts.GPUs = &gpus
			}
			if cmd.Flags().Changed("wall-clock") && wall < time.Second {
				return fmt.Errorf("--wall-clock %s: expected at least 1s (e.g. 2h)", wall)
			}
			m, err := tasks.ImportAIRS(args[0], out, opts)
			if err != nil {
				return err
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]any{"dir": out, "name": m.Name, "metric": m.Metric, "labels": m.Evaluator.Labels})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s into %s\n", m.Name, out)
			if m.Evaluator.Labels == "" {
				fmt.Fprintln(cmd.OutOrStdout(), "note: no labels CSV in the bundle yet (use --data with test_with_labels/); `task check` will say what is missing")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder to create (must not exist, or be empty)")
	cmd.Flags().StringVar(&data, "data", "", "prepared data folder with train/, test/, test_with_labels/")
	cmd.Flags().IntVar(&gpus, "gpus", 1, "GPUs per run (AIRS-Bench: 1; 0 makes a CPU-only variant)")
	cmd.Flags().DurationVar(&wall, "wall-clock", 24*time.Hour, "wall-clock limit per run (AIRS-Bench: 24h)")
	return cmd
}

// Progress bars: drawn on stderr only when it is a terminal (a pipe, a CI log or a test
// buffer gets none) and only for jobs of at least progressMin bytes. Variables so tests
// can draw one without a pty or a 64 MiB folder (with progress.IsTerminal).
var progressMin = int64(64 << 20)

// progressFor returns a progress callback drawing a bar on stderr — that writer, not the
// process's os.Stderr — when it is a terminal and the job is large enough to be worth
// one; else nil. The second func ends the bar.
func progressFor(stderr io.Writer, total int64, what string) (func(int64), func()) {
	if !progress.On(stderr) || total < progressMin {
		return nil, func() {}
	}
	bar := progress.New(stderr, what)
	return func(n int64) { bar.Set(n, total) }, bar.Finish
}

func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if i, err := d.Info(); err == nil {
				n += i.Size()
			}
		}
		return nil
	})
	return n
}

func newTaskPackCmd(g *globals) *cobra.Command {
	var carPath, sealOut string
	var unchecked, seal bool
	var scorers []string
	cmd := &cobra.Command{
		Use:   "pack DIR [--car FILE]",
		Short: "Print a bundle's root CID (kubo-compatible), optionally writing a CAR",
		Long: `Pack a bundle folder as a UnixFS DAG and print its root CID: CIDv1, raw leaves, sha2-256,
256 KiB chunks, balanced layout — the same CID as ` + "`ipfs add -r --cid-version=1 DIR`" + `.
Names starting with "." are skipped (as kubo does without --hidden); symlinks and special
files are refused. The bundle is validated first; --unchecked packs any folder.

--seal writes a sealed copy (--out, default DIR.sealed) whose private/ (and evaluate/,
source/) is encrypted with age under a fresh key, grants that key to every lab of the
trust file (or network document) that lists an age_recipient, and packs the sealed copy:
its CID can be pinned anywhere, and only granted labs can score (docs/bundle-format.md §7).
A home whose trust file lists recipients seals by default; --seal=false packs in the clear.
--scorers NAMES grants the key to those labs only (this node's lab among them): the labs
that score the task, while the others run its slots without its labels; add the printed
ledger.scorers entry to the network document for its runs to count (docs/design.md §9).

Example:
  evalmesh task pack bundles/svamp --car svamp.car
  evalmesh task pack bundles/svamp --seal --out bundles/svamp.sealed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			if !cmd.Flags().Changed("seal") {
				seal = sealByDefault(g) && !unchecked && !tasks.IsSealed(args[0])
			}
			var sealed *SealResult
			if seal {
				h, err := g.Home()
				if err != nil {
					return err
				}
				if sealOut == "" {
					sealOut = filepath.Clean(args[0]) + ".sealed"
				}
				if sealed, err = SealAndGrant(ctx, h, args[0], sealOut, scorers); err != nil {
					return err
				}
				importIntoDaemon(ctx, g, sealed.Grants)
				if !g.jsonOut {
					printScorersEntry(cmd.ErrOrStderr(), sealed)
				}
				args[0] = sealed.Dir
			}
			progress, finish := progressFor(cmd.ErrOrStderr(), treeSize(args[0]), "packing")
			opts := tasks.PackOptions{Unchecked: unchecked, Progress: progress}
			var c fmt.Stringer
			if carPath != "" {
				w, err := tasks.NewCARWriterDAG(carPath)
				if err != nil {
					return err
				}
				root, err := tasks.Pack(ctx, args[0], w, opts)
				finish()
				if err != nil {
					w.Abort()
					return err
				}
				if err := w.Finish(root); err != nil {
					return err
				}
				c = root
			} else {
				root, err := tasks.Pack(ctx, args[0], tasks.NewHashOnlyDAG(), opts)
				finish()
				if err != nil {
					return err
				}
				c = root
			}
			if g.jsonOut {
				out := map[string]any{"cid": c.String()}
				if carPath != "" {
					out["car"] = carPath
				}
				if sealed != nil {
					out["sealed"], out["dir"], out["granted_to"] = true, sealed.Dir, sealed.GrantedTo
					if sealed.ScorersEntry != "" {
						out["scorers"], out["scorers_entry"] = sealed.Scorers, sealed.ScorersEntry
					}
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			fmt.Fprintln(cmd.OutOrStdout(), c)
			if sealed != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "sealed into %s; key granted to %s\n", sealed.Dir, strings.Join(sealed.GrantedTo, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&carPath, "car", "", "also write every block into this CARv1 file")
	cmd.Flags().BoolVar(&seal, "seal", false, "seal private/ with age and grant the key to the trust file's labs (default: on when the trust file lists age recipients)")
	cmd.Flags().StringVar(&sealOut, "out", "", "with --seal: the sealed copy's folder (default DIR.sealed)")
	cmd.Flags().StringSliceVar(&scorers, "scorers", nil, scorersHelp)
	cmd.Flags().BoolVar(&unchecked, "unchecked", false, "pack any folder, not only a valid bundle")
	return cmd
}

// scoreCSV adapts scoring.ScoreCSV to tasks.ScoreFunc.
func scoreCSV(task, metric string, submission, labels []byte, header []string, rows int, cols []string) (float64, error) {
	return scoring.ScoreCSV(metric, submission, labels, scoring.CSVSpec{Task: task, Header: header, Rows: rows, ScoringColumns: cols})
}

func newTaskCheckCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check PATH",
		Short: "Validate a bundle and run its gold-submission check",
		Long: `Check a bundle folder: layout, every task.yaml field (each problem names the field and
what is expected), files pack would refuse or skip. When the bundle has a gold submission
(gold_submission.csv at the root, or under evaluate/ or source/) and evaluator.labels, the
gold must score exactly metric.optimal_score and a permuted gold (rows shuffled with a
fixed seed; plus any gold_submission_permuted*.csv beside it) strictly worse.

Exits 1 when there is any problem.

Example:
  evalmesh task check bundles/svamp --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := tasks.Check(args[0], tasks.CheckOptions{Score: scoreCSV})
			w := cmd.OutOrStdout()
			if g.jsonOut {
				if err := printJSON(w, r); err != nil {
					return err
				}
			} else {
				printCheck(w, r)
			}
			if !r.OK {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	return cmd
}

func printCheck(w io.Writer, r *tasks.CheckReport) {
	name := r.Name
	if name == "" {
		name = r.Dir
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
	for _, x := range r.Warnings {
		fmt.Fprintln(w, "warning:", x)
	}
	if gc := r.Gold; gc != nil {
		if gc.Score != nil {
			fmt.Fprintf(w, "gold %s: %s = %v (optimum %v)\n", gc.Submission, gc.Metric, *gc.Score, gc.Optimal)
		}
		for _, p := range gc.Permuted {
			if p.Score != nil {
				fmt.Fprintf(w, "permuted (%s): %v, strictly worse: %v\n", p.Source, *p.Score, p.OK)
			} else {
				fmt.Fprintf(w, "permuted (%s): %s\n", p.Source, p.Error)
			}
		}
	}
	if r.OK {
		fmt.Fprintf(w, "%s: ok\n", name)
	} else {
		fmt.Fprintf(w, "%s: %d problem(s)\n", name, len(r.Problems))
	}
}

func newTaskInspectCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect PATH|CAR",
		Short: "Show a bundle's metadata and CID, from a folder or a CAR file",
		Long: `Inspect a bundle folder (its CID is computed as pack does) or a CAR file (checked as
unpack would, then task.yaml is read from inside it; nothing is written).

Example:
  evalmesh task inspect svamp.car --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := tasks.Inspect(context.Background(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			var granted []string
			if info.Sealed {
				granted = grantedTo(cmd.Context(), g, info.CID)
			}
			if g.jsonOut {
				return printJSON(w, struct {
					*tasks.Info
					GrantedTo []string `json:"granted_to,omitempty"`
				}{info, granted})
			}
			dir := "higher is better"
			if info.Metric.LowerIsBetter {
				dir = "lower is better"
			}
			fmt.Fprintf(w, "name:      %s (version %s)\n", info.Name, info.Version)
			fmt.Fprintf(w, "cid:       %s\n", info.CID)
			fmt.Fprintf(w, "category:  %s — %s\n", info.Category, info.ResearchProblem)
			fmt.Fprintf(w, "metric:    %s (%s, optimum %v)\n", info.Metric.Name, dir, info.Metric.OptimalScore)
			fmt.Fprintf(w, "sota:      %v — %s (%d)\n", info.SOTA.Score, info.SOTA.Paper, info.SOTA.Year)
			fmt.Fprintf(w, "dataset:   %s %s (train %s, test %s)\n", info.Dataset.ID, info.Dataset.Config, info.Dataset.Splits.Train, info.Dataset.Splits.Test)
			fmt.Fprintf(w, "size:      %d bytes\n", info.Size)
			if info.Sealed {
				to := "no lab this home knows of"
				if len(granted) > 0 {
					to = strings.Join(granted, ", ")
				}
				fmt.Fprintf(w, "sealed:    yes (private.age); key granted to %s\n", to)
			} else {
				fmt.Fprintf(w, "sealed:    no\n")
			}
			return nil
		},
	}
	return cmd
}

// parseSize reads 123, 64GiB, 10MB, 1.5G (binary multiples for K/M/G/T with or without
// "iB"; decimal for "KB"/"MB"/…).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := float64(1)
	units := []struct {
		suf string
		m   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	}
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suf)) {
			mult = u.m
			t = strings.TrimSpace(t[:len(t)-len(u.suf)])
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	// NaN fails every comparison, so test for the good range rather than the bad one. Zero
	// is refused too: UnpackOptions reads 0 as "the default", which a user asking for 0
	// would not expect.
	if err != nil || !(v*mult >= 1 && v*mult <= 1<<62) {
		return 0, fmt.Errorf("size %q: expected a positive number of bytes like 1073741824, 64GiB or 500MB", s)
	}
	return int64(v * mult), nil
}

func newTaskUnpackCmd(g *globals) *cobra.Command {
	var maxSize string
	cmd := &cobra.Command{
		Use:   "unpack CAR|PATH DIR",
		Short: "Safely unpack a bundle CAR (or copy a bundle folder) into a new folder",
		Long: `Unpack a bundle from a CAR file into DIR, which must not exist (or be empty). The whole DAG
is checked before anything is written: every block is re-hashed; absolute names, "..",
names with "/", symlinks, duplicate names, device or unknown UnixFS types and a declared
size over --max-size are refused, naming the offending path. Files are written into a
temporary folder beside DIR and renamed at the end, so a refusal leaves no partial DIR.

Missing folders above DIR are created once the bundle has passed every check.

Given a folder instead of a CAR, it is copied with the same refusals (a checked copy that
holds no file data in memory): packed first, then copied, and the copy must pack to the
same CID.

Example:
  evalmesh task unpack svamp.car /tmp/svamp --max-size 10GiB`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := parseSize(maxSize)
			if err != nil {
				return fmt.Errorf("--max-size: %w", err)
			}
			ctx := context.Background()
			src, dir := args[0], args[1]
			fi, err := os.Stat(src)
			if err != nil {
				return err
			}
			total := fi.Size() // a CAR: about the bytes to write
			if fi.IsDir() {
				total = treeSize(src)
			}
			progress, finish := progressFor(cmd.ErrOrStderr(), total, "unpacking")
			opts := tasks.UnpackOptions{MaxSize: ms, Progress: progress}
			var root string
			if fi.IsDir() {
				c, err := tasks.CopyBundle(ctx, src, dir, opts)
				finish()
				if err != nil {
					return err
				}
				root = c.String()
			} else {
				c, err := tasks.UnpackCAR(ctx, src, dir, opts)
				finish()
				if err != nil {
					return err
				}
				root = c.String()
			}
			if g.jsonOut {
				return printJSON(cmd.OutOrStdout(), map[string]string{"cid": root, "dir": dir})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "unpacked %s into %s\n", root, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&maxSize, "max-size", "64GiB", "refuse bundles whose files declare more bytes than this")
	return cmd
}

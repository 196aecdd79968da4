package scoring

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// TableLegend explains the leaderboard's terms where they are printed (WriteTable ends
// with it; `evalmesh score --help` and `evalmesh ledger --help` quote it). docs/scoring.md
// has the formulas.
const TableLegend = `legend:
  elo           Bradley–Terry rating from every seed-vs-seed game on each task, the sota player
                included (400 points = 10:1 odds, mean 1000): the median over the bootstrap
                rounds, with their 2.5–97.5 % interval
  elo (MLE)     the maximum-likelihood rating on all the games, no resampling
  rank          1 + the players whose interval lies wholly above this one's: overlapping
                intervals share a rank (tied ranks), so ranks repeat and skip
  norm. score   mean over tasks x seeds of the march-of-nines score: 0 at the worst anchor,
                1 at the task's SOTA, above 1 = better than SOTA; failed runs count 0
  worst anchor  population: the worst valid score on each task in these results (a new, worse
                agent moves everyone's norm. score); estimated: the task's estimated worst
  valid rate    share of an agent's runs per task that finished with a score, mean over tasks
  prov.         provisional: ran only some of the tasks, so its figures rest on fewer tasks;
                listed after the agents that ran every task, not ranked among them
  elo fit       mle: the pure maximum-likelihood fit; regularised: some players never won (or
                never lost) against the rest, so one pseudo-tie per pair keeps ratings finite
                and gaps between such groups reflect that, not only the games
`

// WriteTable writes the leaderboard as a readable table, best Elo first (the order of
// Agents), the provisional agents (Provisional) after the rest, then a summary and
// TableLegend. The sota player shows its Elo only.
func (l *Ledger) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tagent\telo\t95% CI\telo (MLE)\tnorm. score\t95% CI\tvalid rate\truns\t")
	row := func(a Agent, rank string) {
		ns, nsci, vsr, runs := "-", "-", "-", "-"
		if a.NormalizedScore != nil {
			ns = fmt.Sprintf("%.3f", *a.NormalizedScore)
			nsci = fmt.Sprintf("[%.3f, %.3f]", a.NormalizedScoreCI[0], a.NormalizedScoreCI[1])
			vsr = fmt.Sprintf("%.1f%%", 100**a.ValidSubmissionRate)
			runs = fmt.Sprint(a.Runs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t[%.1f, %.1f]\t%.1f\t%s\t%s\t%s\t%s\t\n",
			rank, a.Agent, a.Elo, a.EloCI[0], a.EloCI[1], a.EloMLE, ns, nsci, vsr, runs)
	}
	// Ranks among the complete players only, as ComputeLedger ranks everyone.
	complete := slices.DeleteFunc(slices.Clone(l.Agents), func(a Agent) bool { return slices.Contains(l.provisional, a.Agent) })
	for _, a := range complete {
		rank := 1
		for _, b := range complete {
			if b.Agent != a.Agent && b.EloCI[0] > a.EloCI[1] {
				rank++
			}
		}
		row(a, fmt.Sprint(rank))
	}
	for _, a := range l.Agents {
		if slices.Contains(l.provisional, a.Agent) {
			row(a, "prov.")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fit := "elo fit mle (maximum likelihood)"
	if l.EloFit == EloFitRegularised {
		fit = "elo fit regularised (some players never won or never lost against the rest: one pseudo-tie per pair keeps the ratings finite)"
	}
	if l.Policy.EloBootstrap == EloBootstrapTasksLinearised {
		fit += "\nelo bootstrap tasks-linearised: the tasks resampled, one linear step from the MLE per round (intervals are variation across tasks, not games)"
	}
	_, err := fmt.Fprintf(w, "\n%d agents + sota (%d provisional), %d tasks, worst anchor %s, %d bootstrap rounds (%d regularised)\n%s\nledger root %s\n\n%s",
		len(l.Agents)-1, len(l.provisional), len(l.Tasks), l.Policy.Worst, l.Policy.BootstrapRounds, l.EloBootstrapRegularised, fit, l.root, TableLegend)
	if err != nil {
		return err
	}
	return l.Heureka.WriteTable(w)
}

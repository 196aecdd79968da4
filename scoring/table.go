package scoring

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the leaderboard as a readable table, best Elo first (the order of
// Agents). The sota player shows its Elo only.
func (l *Ledger) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tagent\telo\t95% CI\telo (MLE)\tnorm. score\t95% CI\tvalid rate\truns\t")
	for _, a := range l.Agents {
		ns, nsci, vsr, runs := "-", "-", "-", "-"
		if a.NormalizedScore != nil {
			ns = fmt.Sprintf("%.3f", *a.NormalizedScore)
			nsci = fmt.Sprintf("[%.3f, %.3f]", a.NormalizedScoreCI[0], a.NormalizedScoreCI[1])
			vsr = fmt.Sprintf("%.1f%%", 100**a.ValidSubmissionRate)
			runs = fmt.Sprint(a.Runs)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t[%.1f, %.1f]\t%.1f\t%s\t%s\t%s\t%s\t\n",
			a.Rank, a.Agent, a.Elo, a.EloCI[0], a.EloCI[1], a.EloMLE, ns, nsci, vsr, runs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fit := "elo fit mle (maximum likelihood)"
	if l.EloFit == EloFitRegularised {
		fit = "elo fit regularised (some players never won or never lost against the rest: one pseudo-tie per pair keeps the ratings finite)"
	}
	_, err := fmt.Fprintf(w, "\n%d agents + sota, %d tasks, worst anchor %s, %d bootstrap rounds (%d regularised)\n%s\nledger root %s\n",
		len(l.Agents)-1, len(l.Tasks), l.Policy.Worst, l.Policy.BootstrapRounds, l.EloBootstrapRegularised, fit, l.root)
	return err
}

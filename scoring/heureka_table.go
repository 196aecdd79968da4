package scoring

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// HeurekaLegend explains the HeurekaBench table's columns.
const HeurekaLegend = `OEQ: mean judge score of the open-ended answers (1-5, rubric over the gold answer's atomic facts);
MCQ accuracy: exact letter sets / all questions (unanswered = wrong); recall, precision: macro
(mean over answered questions); intervals: 95 % bootstrap over questions; elo: over the runs'
OEQ scores per task, sota = the task's sota.score.
`

// WriteTable prints the HeurekaBench table in the layout of the paper's main table, with
// the Elo columns after it. A nil table prints nothing.
func (t *HeurekaTable) WriteTable(w io.Writer) error {
	if t == nil {
		return nil
	}
	fmt.Fprintf(w, "\nHeurekaBench (%s)\n", strings.Join(t.Tasks, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "agent\tOEQ [1-5]\t95% CI\tMCQ acc.\t95% CI\tMCQ recall\t95% CI\tMCQ prec.\t95% CI\telo\t95% CI\truns\t")
	pct := func(v *float64, ci *[2]float64) (string, string) {
		if v == nil {
			return "-", "-"
		}
		return fmt.Sprintf("%.1f%%", 100**v), fmt.Sprintf("[%.1f, %.1f]", 100*ci[0], 100*ci[1])
	}
	for _, a := range t.Agents {
		oeq, oeqCI := "-", "-"
		if a.OEQ != nil {
			oeq, oeqCI = fmt.Sprintf("%.2f", *a.OEQ), fmt.Sprintf("[%.2f, %.2f]", a.OEQCI[0], a.OEQCI[1])
		}
		acc, accCI := pct(a.MCQAccuracy, a.MCQAccuracyCI)
		rec, recCI := pct(a.MCQRecall, a.MCQRecallCI)
		prec, precCI := pct(a.MCQPrecision, a.MCQPrecisionCI)
		runs := "-"
		if a.Agent != SOTAPlayer {
			runs = fmt.Sprintf("%d/%d valid", a.ValidRuns, a.Runs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t[%.1f, %.1f]\t%s\t\n",
			a.Agent, oeq, oeqCI, acc, accCI, rec, recCI, prec, precCI, a.Elo, a.EloCI[0], a.EloCI[1], runs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "elo fit %s\n%s", t.EloFit, HeurekaLegend)
	return err
}

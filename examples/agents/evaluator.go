package agents

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalmesh/evalmesh/scoring"
)

// Evaluate is an example evaluator under the AIRS-Bench evaluate.py contract: it reads
// labels.csv from $EVALMESH_PRIVATE (default /private) and the submission named by
// --submission-file, prints progress, then the line "--- EVALUATION RESULT ---" and a JSON
// object {"<metric>": score}. An unusable submission exits 1 (the run is invalid).
func Evaluate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("evaluator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sub := fs.String("submission-file", "submission.csv", "submission CSV to score")
	metric := fs.String("metric", "Accuracy", "built-in metric name (scoring package)")
	column := fs.String("column", "", "scored columns, comma-separated (default: every labels column but id)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	priv := os.Getenv("EVALMESH_PRIVATE")
	if priv == "" {
		priv = "/private"
	}
	labels, err := os.ReadFile(filepath.Join(priv, "labels.csv"))
	if err != nil {
		fmt.Fprintf(stderr, "evaluator: labels: %v\n", err)
		return 2
	}
	data, err := os.ReadFile(*sub)
	if err != nil {
		fmt.Fprintf(stderr, "evaluator: submission: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "scoring %s (%d bytes) with %s\n", *sub, len(data), *metric)
	spec := scoring.CSVSpec{}
	if *column != "" {
		spec.ScoringColumns = strings.Split(*column, ",")
	} else if hdr, err := csv.NewReader(bytes.NewReader(labels)).Read(); err == nil {
		// Every labels column but the row key.
		for _, c := range hdr {
			if c != "id" {
				spec.ScoringColumns = append(spec.ScoringColumns, c)
			}
		}
	}
	score, err := scoring.ScoreCSV(*metric, data, labels, spec)
	if err != nil {
		fmt.Fprintf(stderr, "evaluator: %v\n", err)
		return 1
	}
	out, _ := json.Marshal(map[string]float64{*metric: score})
	fmt.Fprintf(stdout, "--- EVALUATION RESULT ---\n%s\n", out)
	return 0
}

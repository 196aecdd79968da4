package scoring

import (
	"bytes"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt expectations from the current output")

// TestLedgerText runs the cases in testdata/ledger.txt, pebble style: a case is a
// "# name" line, input lines, "----", then the expected table. Input lines:
//
//	task NAME lower|higher SOTA [estimated-worst]
//	opts worst=population|estimated rounds=N
//	TASK AGENT SEED STATUS [SCORE]
func TestLedgerText(t *testing.T) {
	const path = "testdata/ledger.txt"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cases := strings.Split(string(data), "\n# ")
	for ci, c := range cases {
		c = strings.TrimPrefix(c, "# ")
		if strings.TrimSpace(c) == "" {
			continue
		}
		name, rest, _ := strings.Cut(c, "\n")
		input, want, ok := strings.Cut(rest, "----\n")
		if !ok {
			t.Fatalf("case %q: no ---- line", name)
		}
		var ti []TaskInfo
		var rs []Result
		opts := Options{}
		for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 0:
			case f[0] == "task":
				sota, _ := strconv.ParseFloat(f[3], 64)
				info := TaskInfo{Name: f[1], LowerIsBetter: f[2] == "lower", SOTA: sota, Optimum: 1}
				if info.LowerIsBetter {
					info.Optimum = 0
				}
				if len(f) > 4 {
					w, _ := strconv.ParseFloat(f[4], 64)
					info.EstimatedWorst = &w
				}
				ti = append(ti, info)
			case f[0] == "opts":
				for _, kv := range f[1:] {
					k, v, _ := strings.Cut(kv, "=")
					switch k {
					case "worst":
						opts.Worst = v
					case "rounds":
						opts.BootstrapRounds, _ = strconv.Atoi(v)
					}
				}
			default:
				seed, _ := strconv.Atoi(f[2])
				r := Result{Task: f[0], Agent: f[1], Seed: seed, Status: f[3]}
				if len(f) > 4 {
					v, _ := strconv.ParseFloat(f[4], 64)
					r.Score = &v
				}
				rs = append(rs, r)
			}
		}
		var got bytes.Buffer
		if l, err := ComputeLedger(rs, ti, opts); err != nil {
			got.WriteString("error: " + err.Error() + "\n")
		} else if err := l.WriteTable(&got); err != nil {
			t.Fatal(err)
		} else {
			// Every table ends with the same legend (TestTableLegend); keep it out of the cases.
			table, ok := strings.CutSuffix(got.String(), "\n"+TableLegend)
			if !ok {
				t.Fatalf("case %q: the table does not end with TableLegend:\n%s", name, got.String())
			}
			got.Reset()
			got.WriteString(table)
		}
		if ci > 0 || strings.HasPrefix(string(data), "\n") {
			out.WriteString("\n")
		}
		out.WriteString("# " + name + "\n" + input + "----\n" + got.String())
		if !*rewrite && got.String() != want {
			t.Errorf("case %q:\n--- got\n%s--- want\n%s", name, got.String(), want)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The legend names every term the table prints that a reader could misread.
func TestTableLegend(t *testing.T) {
	for _, term := range []string{"elo ", "elo (MLE)", "worst anchor", "regularised", "tied ranks", "above 1", "prov."} {
		if !strings.Contains(TableLegend, term) {
			t.Errorf("TableLegend does not explain %q", term)
		}
	}
}

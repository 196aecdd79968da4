// Package cosci holds the two example co-scientist agents of the HeurekaBench example
// (examples/heureka): they read public/data/expression.csv and public/questions.jsonl and
// write answers.jsonl. They are static Go, not LLM agents: each question is routed to an
// analysis by words in its text (what an LLM's reading of the question stands in for).
//
//   - Thorough analyses per cell type and condition (fold changes per gene and cell type,
//     composition, markers, per-donor effects) and writes its numbers into its answers; on
//     odd seeds it skips the per-donor analysis and leaves that question unanswered.
//   - Hasty pools every cell (no cell types), so it finds only the effects shared by all
//     cells; elsewhere it guesses a letter from its seed, writes a vague sentence, and
//     leaves the last two questions unanswered.
//
// It imports nothing of evalmesh, so each builds as a static binary (examples/agents/cmd).
package cosci

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type question struct {
	ID  string `json:"id"`
	OEQ string `json:"oeq"`
	MCQ struct {
		Question string            `json:"question"`
		Options  map[string]string `json:"options"`
	} `json:"mcq"`
}

type answer struct {
	ID  string `json:"id"`
	MCQ string `json:"mcq"`
	OEQ string `json:"oeq"`
}

// table is the expression data.
type table struct {
	genes []string
	cells []cell
}

type cell struct {
	typ, cond, donor string
	expr             []float64
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func load() (*table, []question, string, int, error) {
	pub := env("EVALMESH_PUBLIC", "/public")
	out := env("EVALMESH_OUTPUT", "/output")
	seed, _ := strconv.Atoi(os.Getenv("EVALMESH_SEED"))
	f, err := os.ReadFile(filepath.Join(pub, "data", "expression.csv"))
	if err != nil {
		return nil, nil, "", 0, err
	}
	rows, err := csv.NewReader(bytes.NewReader(f)).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[0]) < 5 {
		return nil, nil, "", 0, fmt.Errorf("expression.csv: %v", err)
	}
	t := &table{genes: rows[0][4:]}
	for _, r := range rows[1:] {
		c := cell{typ: r[1], cond: r[2], donor: r[3]}
		for _, v := range r[4:] {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, nil, "", 0, fmt.Errorf("expression.csv: %v", err)
			}
			c.expr = append(c.expr, x)
		}
		t.cells = append(t.cells, c)
	}
	qd, err := os.ReadFile(filepath.Join(pub, "questions.jsonl"))
	if err != nil {
		return nil, nil, "", 0, err
	}
	var qs []question
	sc := bufio.NewScanner(bytes.NewReader(qd))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var q question
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
			return nil, nil, "", 0, fmt.Errorf("questions.jsonl: %v", err)
		}
		qs = append(qs, q)
	}
	return t, qs, out, seed, nil
}

// mean of gene g over the cells keep accepts (0 if none).
func (t *table) mean(g int, keep func(c *cell) bool) float64 {
	s, n := 0.0, 0
	for i := range t.cells {
		if keep(&t.cells[i]) {
			s += t.cells[i].expr[g]
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return s / float64(n)
}

func (t *table) fold(g int, keep func(c *cell) bool) float64 {
	tr := t.mean(g, func(c *cell) bool { return c.cond == "treated" && keep(c) })
	co := t.mean(g, func(c *cell) bool { return c.cond == "control" && keep(c) })
	return (tr + 0.5) / (co + 0.5)
}

func (t *table) types() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range t.cells {
		if !seen[c.typ] {
			seen[c.typ] = true
			out = append(out, c.typ)
		}
	}
	sort.Strings(out)
	return out
}

var typeWords = map[string]string{"T": "T cells", "B": "B cells", "Mono": "monocytes", "NK": "NK cells"}

// findings is what an analysis found, by topic.
type findings struct {
	sharedUp       []string            // up > 2x in every cell type
	specificUp     map[string][]string // cell type → genes up > 2x only there
	down           map[string][]string // cell type → genes down < 0.6x
	stable         []string            // within ±25 % everywhere they are expressed
	markers        map[string][]string // cell type → genes > 5x its mean elsewhere
	fractionChange map[string][2]float64
	strongest      string  // cell type with the largest shared-gene fold
	strongestFold  float64 //
	donorsUp       int     // donors with ISG15 up > 2x
	skipDonors     bool    // the per-donor analysis was not run (odd seeds)
	folds          map[string]float64
}

func thoroughAnalysis(t *table) *findings {
	f := &findings{specificUp: map[string][]string{}, down: map[string][]string{}, markers: map[string][]string{},
		fractionChange: map[string][2]float64{}, folds: map[string]float64{}}
	types := t.types()
	for g, gene := range t.genes {
		upIn := []string{}
		stable, downAny := true, false
		for _, ty := range types {
			fc := t.fold(g, func(c *cell) bool { return c.typ == ty })
			f.folds[gene+"/"+ty] = fc
			if fc > 2 {
				upIn = append(upIn, ty)
			}
			if fc < 0.6 {
				f.down[ty] = append(f.down[ty], gene)
				downAny = true
			}
			in := t.mean(g, func(c *cell) bool { return c.typ == ty && c.cond == "control" })
			if in > 5 && (fc < 0.8 || fc > 1.25) {
				stable = false
			}
			other := t.mean(g, func(c *cell) bool { return c.typ != ty && c.cond == "control" })
			if in > 5*other && in > 5 {
				f.markers[ty] = append(f.markers[ty], gene)
			}
		}
		switch {
		case len(upIn) == len(types):
			f.sharedUp = append(f.sharedUp, gene)
		case len(upIn) == 1:
			f.specificUp[upIn[0]] = append(f.specificUp[upIn[0]], gene)
		}
		if stable && !downAny && len(upIn) == 0 {
			f.stable = append(f.stable, gene)
		}
	}
	for _, ty := range types {
		var n [2]float64
		var tot [2]float64
		for _, c := range t.cells {
			i := 0
			if c.cond == "treated" {
				i = 1
			}
			tot[i]++
			if c.typ == ty {
				n[i]++
			}
		}
		f.fractionChange[ty] = [2]float64{n[0] / tot[0], n[1] / tot[1]}
	}
	for _, ty := range types {
		s := 0.0
		for _, g := range f.sharedUp {
			s += f.folds[g+"/"+ty]
		}
		if len(f.sharedUp) > 0 && s/float64(len(f.sharedUp)) > f.strongestFold {
			f.strongest, f.strongestFold = ty, s/float64(len(f.sharedUp))
		}
	}
	if g := index(t.genes, "ISG15"); g >= 0 {
		donors := map[string]bool{}
		for _, c := range t.cells {
			donors[c.donor] = true
		}
		for d := range donors {
			if t.fold(g, func(c *cell) bool { return c.donor == d }) > 2 {
				f.donorsUp++
			}
		}
	}
	return f
}

func index(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// pick returns the letters whose option text names one of names (case-insensitive).
func pick(options map[string]string, names []string) string {
	var out []string
	for _, l := range sortedLetters(options) {
		for _, n := range names {
			if strings.EqualFold(strings.TrimSpace(options[l]), n) || strings.HasPrefix(strings.ToLower(options[l]), strings.ToLower(n)) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, ",")
}

func sortedLetters(options map[string]string) []string {
	out := make([]string, 0, len(options))
	for l := range options {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func has(s string, words ...string) bool {
	s = strings.ToLower(s)
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func foldText(f *findings, genes []string, ty string) string {
	var parts []string
	for _, g := range genes {
		parts = append(parts, fmt.Sprintf("%s %.1f-fold", g, f.folds[g+"/"+ty]))
	}
	return strings.Join(parts, ", ")
}

// thoroughAnswer answers one question from the full analysis.
func thoroughAnswer(f *findings, q question) answer {
	a := answer{ID: q.ID}
	text := q.OEQ + " " + q.MCQ.Question
	switch {
	case has(text, "only in nk", "cell-type-specific"):
		a.MCQ = pick(q.MCQ.Options, f.specificUp["NK"])
		a.OEQ = fmt.Sprintf("Yes: %s rises only in NK cells (%s); no other cell type shows it.", strings.Join(f.specificUp["NK"], ", "), foldText(f, f.specificUp["NK"], "NK"))
	case has(text, "composition", "fraction"):
		fc := f.fractionChange["B"]
		word := "It increases"
		if fc[1] < fc[0]*0.8 {
			word = "It decreases"
		}
		a.MCQ = pick(q.MCQ.Options, []string{word})
		a.OEQ = fmt.Sprintf("B cells drop from %.0f%% of cells in controls to %.0f%% under treatment; the fraction decreases while other types change little.", 100*fc[0], 100*fc[1])
	case has(text, "prolifer"):
		a.MCQ = pick(q.MCQ.Options, f.specificUp["T"])
		a.OEQ = fmt.Sprintf("Yes: treated T cells raise %s (%s), a proliferation signature.", strings.Join(f.specificUp["T"], ", "), foldText(f, f.specificUp["T"], "T"))
	case has(text, "monocytes from", "highest in monocytes"):
		a.MCQ = pick(q.MCQ.Options, f.markers["Mono"])
		a.OEQ = fmt.Sprintf("Monocytes express %s far above all other cells.", strings.Join(f.markers["Mono"], ", "))
	case has(text, "marker"):
		var all []string
		var parts []string
		for _, ty := range []string{"T", "B", "Mono", "NK"} {
			all = append(all, f.markers[ty]...)
			parts = append(parts, strings.Join(f.markers[ty], "/")+" marks "+typeWords[ty])
		}
		a.MCQ = pick(q.MCQ.Options, all)
		a.OEQ = strings.Join(parts, "; ") + "."
	case has(text, "repress", "falls in t"):
		a.MCQ = pick(q.MCQ.Options, f.down["T"])
		a.OEQ = fmt.Sprintf("%s falls in treated T cells (%s): a decrease of naive T-cell genes.", strings.Join(f.down["T"], ", "), foldText(f, f.down["T"], "T"))
	case has(text, "donor") && !f.skipDonors:
		a.MCQ = pick(q.MCQ.Options, []string{[]string{"None", "One", "Two", "Three", "All four"}[min(f.donorsUp, 4)]})
		a.OEQ = fmt.Sprintf("Yes: ISG15 is induced in all four donors (%d of 4 above two-fold).", f.donorsUp)
	case has(text, "stable", "do not change"):
		a.MCQ = pick(q.MCQ.Options, f.stable)
		a.OEQ = fmt.Sprintf("%s stay unchanged under treatment (within 25%%).", strings.Join(f.stable, ", "))
	case has(text, "most strongly", "strongest"):
		a.MCQ = pick(q.MCQ.Options, []string{typeWords[f.strongest]})
		a.OEQ = fmt.Sprintf("%s show the strongest response: ISG15 and IFIT1 rise %.1f-fold on average, the most of any cell type.", typeWords[f.strongest], f.strongestFold)
	case has(text, "every cell type", "shared across", "main transcriptional"):
		a.MCQ = pick(q.MCQ.Options, f.sharedUp)
		a.OEQ = fmt.Sprintf("An interferon response: %s rise in every cell type (T: %s).", strings.Join(f.sharedUp, " and "), foldText(f, f.sharedUp, "T"))
	default:
		a.OEQ = "I could not relate this question to the data."
	}
	return a
}

// hastyAnswer pools every cell: only what all cells share shows.
func hastyAnswer(t *table, q question, seed int, n int) (answer, bool) {
	a := answer{ID: q.ID}
	if n >= 8 { // it runs out of time before the last questions
		return a, false
	}
	text := q.OEQ + " " + q.MCQ.Question
	all := func(*cell) bool { return true }
	var up []string
	for g, gene := range t.genes {
		if t.fold(g, all) > 2 {
			up = append(up, gene)
		}
	}
	letters := sortedLetters(q.MCQ.Options)
	guess := letters[(seed+n)%len(letters)]
	switch {
	case has(text, "every cell type", "main transcriptional"):
		a.MCQ = pick(q.MCQ.Options, up)
		a.OEQ = fmt.Sprintf("Treated cells express more %s overall.", strings.Join(up, " and "))
	case has(text, "composition", "fraction"):
		a.MCQ = pick(q.MCQ.Options, []string{"It is unchanged"})
		a.OEQ = "The composition is unchanged; the treatment acts on expression."
	default:
		a.MCQ = guess
		a.OEQ = "The treatment changes gene expression in these cells."
	}
	return a, true
}

func write(out string, answers []answer) error {
	var b bytes.Buffer
	for _, a := range answers {
		line, _ := json.Marshal(a)
		b.Write(append(line, '\n'))
	}
	return os.WriteFile(filepath.Join(out, "answers.jsonl"), b.Bytes(), 0o644)
}

// Thorough is the stronger co-scientist.
func Thorough(stderr io.Writer) int {
	t, qs, out, seed, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "cosci-thorough: %v\n", err)
		return 2
	}
	f := thoroughAnalysis(t)
	// On odd seeds its plan leaves out the per-donor analysis, as an agent's plan varies
	// from run to run: that question then gets no answer.
	f.skipDonors = seed%2 == 1
	var answers []answer
	for _, q := range qs {
		answers = append(answers, thoroughAnswer(f, q))
	}
	fmt.Fprintf(stderr, "cosci-thorough: %d cells, %d genes, %d questions answered\n", len(t.cells), len(t.genes), len(answers))
	if err := write(out, answers); err != nil {
		fmt.Fprintf(stderr, "cosci-thorough: %v\n", err)
		return 1
	}
	return 0
}

// Hasty is the weaker co-scientist.
func Hasty(stderr io.Writer) int {
	t, qs, out, seed, err := load()
	if err != nil {
		fmt.Fprintf(stderr, "cosci-hasty: %v\n", err)
		return 2
	}
	var answers []answer
	for i, q := range qs {
		if a, ok := hastyAnswer(t, q, seed, i); ok {
			answers = append(answers, a)
		}
	}
	fmt.Fprintf(stderr, "cosci-hasty: %d of %d questions answered\n", len(answers), len(qs))
	if err := write(out, answers); err != nil {
		fmt.Fprintf(stderr, "cosci-hasty: %v\n", err)
		return 1
	}
	return 0
}

// Package heurekaexample generates the example HeurekaBench task: a synthetic
// single-cell-like expression table (cells × genes, with cell type, condition and donor)
// with planted findings — an interferon response to the treatment in every cell type,
// strongest in monocytes; GZMB induced only in NK cells; proliferating (MKI67) T cells and
// CCR7 falling in them; B cells dropping from about 25 % to 10 % of cells — and 10
// questions about them, each in an open-ended and a multiple-choice form, with the gold
// letters and the gold answer's atomic facts. The data comes from a fixed PCG seed with
// no transcendental functions, so every machine writes the same bytes and the same CID.
package heurekaexample

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/evalmesh/evalmesh/tasks"
)

// Name is the example task's name (and folder).
const Name = "heureka-sc"

// JudgeImage is the digest the example task pins its judge by. The demo runs the judge
// with the process executor, which runs evaluator.command and ignores the image, so this
// is a stand-in: the sha256 of the string "evalmesh example heureka judge image". A docker
// network builds examples/agents/cmd/heureka-judge into a FROM scratch image and pins that
// image's digest instead.
var JudgeImage = digestOf("evalmesh example heureka judge image")

// JudgeModel is the model digest the example pins. The stand-in judge has no model: this
// is the sha256 of "evalmesh stand-in keyword judge v1", so an attestation names which
// "model" judged, as an LLM judge names its weights.
var JudgeModel = digestOf("evalmesh stand-in keyword judge v1")

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// SOTA is the example's anchor for Elo's sota player: the best published OEQ correctness
// on sc-HeurekaBench (BixBench-Agent, 2.34 of 5; the seed summary's main table).
const SOTA = 2.34

// Genes and cell types of the table.
var (
	Genes     = []string{"CD3E", "IL7R", "CCR7", "MKI67", "MS4A1", "CD14", "LYZ", "S100A8", "NKG7", "GZMB", "ISG15", "IFIT1"}
	CellTypes = []string{"T", "B", "Mono", "NK"}
	Donors    = []string{"d1", "d2", "d3", "d4"}
)

// Generate writes the example bundle to dir/Name and returns its folder. Existing files are
// overwritten with the same bytes.
func Generate(dir string) (string, error) {
	return GenerateWithJudge(dir, "")
}

// GenerateWithJudge writes the example bundle as Generate does, pinning another judge:
// image "" keeps JudgeImage, no command keeps JudgeCommand. Tests use it for the stand-in
// judge's modes (JudgeCommand plus --sampling or --fault=...) and for the judge built into
// a container image (its digest, "/judge"). Such a bundle has another CID than the
// example's: to a network it is another task.
func GenerateWithJudge(dir, image string, command ...string) (string, error) {
	if image == "" {
		image = JudgeImage
	}
	if len(command) == 0 {
		command = JudgeCommand
	}
	files, err := files(image, command)
	if err != nil {
		return "", err
	}
	root := filepath.Join(dir, Name)
	for rel, data := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	return root, nil
}

// JudgeCommand is the example's judge: the stand-in keyword judge linked into evalmesh.
var JudgeCommand = []string{"evalmesh", "agent", "heureka-judge"}

// Files returns the bundle's files by slash-separated path.
func Files() (map[string][]byte, error) { return files(JudgeImage, JudgeCommand) }

func files(judgeImage string, judgeCommand []string) (map[string][]byte, error) {
	files, _, err := tasks.HeurekaBundleFiles(Items(), tasks.HeurekaImportOptions{
		Name: Name, Version: "1", SOTA: SOTA, WallClockSeconds: 120,
		JudgeImage: judgeImage, JudgeCommand: judgeCommand, JudgeModel: JudgeModel,
	})
	if err != nil {
		return nil, fmt.Errorf("example %s: %w", Name, err)
	}
	files[tasks.HeurekaDataDir+"/expression.csv"] = Expression()
	return files, nil
}

// base is each gene's mean expression per cell type (T, B, Mono, NK) in controls.
var base = map[string][4]float64{
	"CD3E": {50, 2, 2, 3}, "IL7R": {15, 1, 1, 2}, "CCR7": {20, 2, 1, 1}, "MKI67": {3, 3, 3, 3},
	"MS4A1": {1, 40, 1, 1}, "CD14": {1, 1, 40, 1}, "LYZ": {2, 2, 60, 2}, "S100A8": {2, 2, 50, 2},
	"NKG7": {3, 1, 1, 45}, "GZMB": {2, 1, 1, 20}, "ISG15": {5, 5, 5, 5}, "IFIT1": {4, 4, 4, 4},
}

// treatedFold is the planted effect of the treatment per gene and cell type.
func treatedFold(gene string, ct int) float64 {
	switch gene {
	case "ISG15", "IFIT1":
		if CellTypes[ct] == "Mono" {
			return 6
		}
		return 4
	case "GZMB":
		if CellTypes[ct] == "NK" {
			return 2.5
		}
	case "MKI67":
		if CellTypes[ct] == "T" {
			return 3
		}
	case "CCR7":
		if CellTypes[ct] == "T" {
			return 0.5
		}
	}
	return 1
}

// Cells per condition and their cell-type counts (B cells fall from 25 % to 10 %).
var composition = map[string][4]int{
	"control": {80, 50, 40, 30},
	"treated": {90, 20, 50, 40},
}

// Expression is public/data/expression.csv: cell_id, cell_type, condition, donor, then one
// column per gene (normalised counts, two decimals).
func Expression() []byte {
	rng := rand.New(rand.NewPCG(20260117, 17))
	var b bytes.Buffer
	b.WriteString("cell_id,cell_type,condition,donor")
	for _, g := range Genes {
		b.WriteString("," + g)
	}
	b.WriteByte('\n')
	n := 0
	for _, cond := range []string{"control", "treated"} {
		for ct, count := range composition[cond] {
			for i := 0; i < count; i++ {
				n++
				fmt.Fprintf(&b, "c%04d,%s,%s,%s", n, CellTypes[ct], cond, Donors[i%len(Donors)])
				for _, g := range Genes {
					mean := base[g][ct]
					if cond == "treated" {
						mean = float64(mean * treatedFold(g, ct))
					}
					// Uniform noise of ±25 %: no exp or log, so the bytes are the same everywhere.
					v := float64(mean * float64(0.75+float64(0.5*rng.Float64())))
					b.WriteString("," + strconv.FormatFloat(v, 'f', 2, 64))
				}
				b.WriteByte('\n')
			}
		}
	}
	return b.Bytes()
}

func item(id, oeq, oeqAnswer string, facts []tasks.HeurekaFact, mcq string, options map[string]string, gold string) tasks.HeurekaItem {
	var it tasks.HeurekaItem
	it.ID = id
	it.OEQ.Question, it.OEQ.Answer, it.OEQ.Facts = oeq, oeqAnswer, facts
	it.MCQ.Question, it.MCQ.Options, it.MCQ.Answer = mcq, options, gold
	return it
}

func fact(text string, contradicts []string, keywords ...string) tasks.HeurekaFact {
	return tasks.HeurekaFact{Fact: text, Keywords: keywords, Contradicts: contradicts}
}

// Items are the 10 questions. Keywords are lower-case; "a|b" accepts either.
func Items() []tasks.HeurekaItem {
	return []tasks.HeurekaItem{
		item("q01", "What is the main transcriptional response to the treatment, and is it shared across cell types?",
			"An interferon response: ISG15 and IFIT1 rise about four-fold in treated cells of every cell type.",
			[]tasks.HeurekaFact{
				fact("ISG15 is induced by the treatment", []string{"isg15 falls", "isg15 decreases"}, "isg15"),
				fact("IFIT1 is induced by the treatment", []string{"ifit1 falls", "ifit1 decreases"}, "ifit1"),
				fact("it is an interferon response", nil, "interferon"),
				fact("the response is shared by every cell type", []string{"only in"}, "every cell type|all cell types"),
			},
			"Which genes are induced by the treatment in every cell type?",
			map[string]string{"A": "ISG15", "B": "CD14", "C": "IFIT1", "D": "CCR7"}, "A,C"),
		item("q02", "Is there a cell-type-specific response to the treatment?",
			"Yes: GZMB rises about 2.5-fold in NK cells under treatment and not in other cell types.",
			[]tasks.HeurekaFact{
				fact("GZMB is induced", []string{"gzmb falls"}, "gzmb"),
				fact("only in NK cells", nil, "nk"),
			},
			"Which gene rises under treatment only in NK cells?",
			map[string]string{"A": "LYZ", "B": "GZMB", "C": "MS4A1", "D": "S100A8"}, "B"),
		item("q03", "How does the treatment change the cell-type composition?",
			"B cells drop from about 25% of cells in controls to about 10% under treatment.",
			[]tasks.HeurekaFact{
				fact("B cells are the population that changes", nil, "b cell"),
				fact("their fraction decreases", []string{"composition is unchanged", "b cells increase"}, "decrease|drop|fall"),
			},
			"How does the fraction of B cells change with treatment?",
			map[string]string{"A": "It increases", "B": "It is unchanged", "C": "It decreases", "D": "B cells are absent from treated samples"}, "C"),
		item("q04", "Do any cells proliferate in response to the treatment?",
			"Treated T cells express MKI67 about three-fold higher than control T cells: they proliferate.",
			[]tasks.HeurekaFact{
				fact("MKI67 rises", nil, "mki67"),
				fact("in T cells", nil, "t cell"),
				fact("a sign of proliferation", nil, "prolifer"),
			},
			"Which gene indicates that treated T cells proliferate?",
			map[string]string{"A": "NKG7", "B": "CCR7", "C": "CD14", "D": "MKI67"}, "D"),
		item("q05", "Which marker genes identify the cell types?",
			"CD3E marks T cells, MS4A1 B cells, CD14 monocytes and NKG7 NK cells.",
			[]tasks.HeurekaFact{
				fact("CD3E marks T cells", nil, "cd3e"),
				fact("MS4A1 marks B cells", nil, "ms4a1"),
				fact("CD14 marks monocytes", nil, "cd14"),
				fact("NKG7 marks NK cells", nil, "nkg7"),
			},
			"Which of these genes are markers of a single cell type?",
			map[string]string{"A": "CD3E", "B": "ISG15", "C": "MS4A1", "D": "IFIT1"}, "A,C"),
		item("q06", "What distinguishes monocytes from the other cells?",
			"Monocytes express CD14, LYZ and S100A8 far above other cells.",
			[]tasks.HeurekaFact{
				fact("CD14", nil, "cd14"), fact("LYZ", nil, "lyz"), fact("S100A8", nil, "s100a8"),
			},
			"Which genes are highest in monocytes?",
			map[string]string{"A": "CD3E", "B": "LYZ", "C": "GZMB", "D": "CD14"}, "B,D"),
		item("q07", "Which T-cell genes does the treatment repress?",
			"CCR7 falls about two-fold in treated T cells, a shift away from naive T cells.",
			[]tasks.HeurekaFact{
				fact("CCR7 falls", []string{"ccr7 rises", "ccr7 increases"}, "ccr7"),
				fact("in T cells", nil, "t cell"),
				fact("it is a decrease", nil, "fall|decrease|down|repress"),
			},
			"Which gene falls in T cells under treatment?",
			map[string]string{"A": "IL7R", "B": "CCR7", "C": "ISG15", "D": "MKI67"}, "B"),
		item("q08", "Is the interferon response consistent across donors?",
			"Yes: ISG15 is induced in all four donors.",
			[]tasks.HeurekaFact{
				fact("ISG15 is induced", nil, "isg15"),
				fact("in every donor", []string{"only one donor"}, "all four donors|every donor|each donor"),
			},
			"In how many of the four donors is ISG15 induced?",
			map[string]string{"A": "One", "B": "Two", "C": "Three", "D": "All four"}, "D"),
		item("q09", "Which genes are stable under the treatment?",
			"Lineage genes such as CD3E and IL7R stay unchanged.",
			[]tasks.HeurekaFact{
				fact("CD3E is stable", nil, "cd3e"),
				fact("IL7R is stable", nil, "il7r"),
				fact("they do not change", nil, "unchanged|stable|no change"),
			},
			"Which genes do not change with treatment?",
			map[string]string{"A": "IL7R", "B": "ISG15", "C": "CD3E", "D": "IFIT1"}, "A,C"),
		item("q10", "Which cell type responds most strongly to the treatment?",
			"Monocytes: their ISG15 and IFIT1 rise about six-fold, more than in any other cell type.",
			[]tasks.HeurekaFact{
				fact("monocytes", nil, "monocyte"),
				fact("through the interferon genes", nil, "isg15|ifit1"),
				fact("the strongest response", nil, "strongest|most|largest"),
			},
			"Which cell type shows the strongest interferon response?",
			map[string]string{"A": "T cells", "B": "B cells", "C": "Monocytes", "D": "NK cells"}, "C"),
	}
}

package agents

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/evalmesh/evalmesh/scoring"
	"github.com/evalmesh/evalmesh/tasks"
)

// Judge is the stand-in HeurekaBench judge: a TEST DOUBLE for an LLM judge (the paper's
// GPT-4o G-Eval), deterministic and model-free. It reads the gold answers
// ($EVALMESH_PRIVATE/answers.jsonl) and the agent's answers (--submission-file), and for
// every question labels each gold fact against the answer text by keyword matching —
// INCORRECT when a contradiction phrase appears, PRESENT when every keyword does (a
// keyword "a|b" accepts either), PARTIAL when some do, MISSING when none — then scores by
// the rubric: 1 on any contradiction, else 1 + round(4 × (present + ½ partial) / facts)
// (5: all present; 1: all missing). It writes the verdicts to $EVALMESH_JUDGE_VERDICTS and
// prints the OEQ mean after the AIRS-Bench marker line.
//
// Flags make it misbehave the ways a judge can, for tests: --sampling stands in for an
// LLM sampled at temperature > 0 (each question's score moves by −1, 0 or +1 as the bits
// of sha256($EVALMESH_JUDGE_NONCE, id) say, so two calls with different nonces disagree),
// --fault=out-of-range rates the first question 6, --fault=omit leaves the last question
// out, --fault=malformed writes a file that is not JSON.
func Judge(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("heureka-judge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sub := fs.String("submission-file", "answers.jsonl", "the agent's answers (JSON lines)")
	sampling := fs.Bool("sampling", false, "test double of a sampling judge: jitter scores from $EVALMESH_JUDGE_NONCE")
	fault := fs.String("fault", "", "test double of a broken judge: out-of-range, omit or malformed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	priv := os.Getenv("EVALMESH_PRIVATE")
	if priv == "" {
		priv = "/private"
	}
	out := os.Getenv("EVALMESH_JUDGE_VERDICTS")
	if out == "" {
		fmt.Fprintln(stderr, "heureka-judge: EVALMESH_JUDGE_VERDICTS is not set")
		return 2
	}
	if p := os.Getenv("EVALMESH_JUDGE_PROMPT"); p != "" {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(stderr, "heureka-judge: prompt: %v\n", err)
			return 2
		}
	}
	gd, err := os.ReadFile(filepath.Join(priv, "answers.jsonl"))
	if err != nil {
		fmt.Fprintf(stderr, "heureka-judge: gold answers: %v\n", err)
		return 2
	}
	gold, err := tasks.ParseHeurekaGold(gd)
	if err != nil {
		fmt.Fprintf(stderr, "heureka-judge: %v\n", err)
		return 2
	}
	ids := make([]string, len(gold))
	for i, g := range gold {
		ids[i] = g.ID
	}
	sd, err := os.ReadFile(*sub)
	if err != nil {
		fmt.Fprintf(stderr, "heureka-judge: submission: %v\n", err)
		return 1
	}
	answers, err := scoring.ParseHeurekaAnswers(sd, ids)
	if err != nil {
		fmt.Fprintf(stderr, "heureka-judge: %v\n", err)
		return 1
	}
	nonce := os.Getenv("EVALMESH_JUDGE_NONCE")
	var v scoring.JudgeVerdicts
	sum := 0.0
	for _, g := range gold {
		q := JudgeKeywords(g, answers[g.ID].OEQ)
		if *sampling {
			q.Score = math.Max(scoring.OEQMin, math.Min(scoring.OEQMax, q.Score+jitter(nonce, g.ID)))
		}
		sum += q.Score
		v.Questions = append(v.Questions, q)
	}
	switch *fault {
	case "out-of-range":
		v.Questions[0].Score = 6
	case "omit":
		v.Questions = v.Questions[:len(v.Questions)-1]
	}
	data, _ := json.MarshalIndent(v, "", " ")
	if *fault == "malformed" {
		data = []byte("the answers look good to me")
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		fmt.Fprintf(stderr, "heureka-judge: %v\n", err)
		return 2
	}
	res, _ := json.Marshal(map[string]float64{scoring.OEQMetric: sum / float64(len(gold))})
	fmt.Fprintf(stdout, "judged %d questions\n--- EVALUATION RESULT ---\n%s\n", len(gold), res)
	return 0
}

// jitter is −1, 0 or +1 from sha256(nonce, id): a sampling judge's noise, reproducible
// for a given nonce.
func jitter(nonce, id string) float64 {
	sum := sha256.Sum256([]byte(nonce + "\x00" + id))
	return float64(int(binary.BigEndian.Uint32(sum[:4])%3) - 1)
}

// JudgeKeywords is the stand-in judge's verdict on one answer (see Judge).
func JudgeKeywords(g tasks.HeurekaGold, answer string) scoring.QuestionVerdict {
	text := strings.ToLower(answer)
	q := scoring.QuestionVerdict{ID: g.ID}
	present, partial, contradicted := 0, 0, false
	for _, f := range g.Facts {
		label := scoring.FactMissing
		hit := 0
		for _, kw := range f.Keywords {
			for _, alt := range strings.Split(kw, "|") {
				if alt != "" && strings.Contains(text, strings.ToLower(alt)) {
					hit++
					break
				}
			}
		}
		switch {
		case hit == len(f.Keywords) && hit > 0:
			label = scoring.FactPresent
			present++
		case hit > 0:
			label = scoring.FactPartial
			partial++
		}
		for _, c := range f.Contradicts {
			if strings.Contains(text, strings.ToLower(c)) {
				label, contradicted = scoring.FactIncorrect, true
			}
		}
		q.Facts = append(q.Facts, scoring.JudgeFact{Fact: f.Fact, Label: label})
	}
	switch {
	case contradicted || len(g.Facts) == 0:
		q.Score = scoring.OEQMin
		q.Rationale = "a gold fact is contradicted (or the gold has no facts)"
	default:
		frac := (float64(present) + float64(partial)/2) / float64(len(g.Facts))
		q.Score = 1 + math.Round(4*frac)
		q.Rationale = fmt.Sprintf("%d of %d facts present, %d partial", present, len(g.Facts), partial)
	}
	return q
}

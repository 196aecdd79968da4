package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// EvaluationMarker is the line AIRS-Bench's evaluate.py prints before its JSON result.
const EvaluationMarker = "--- EVALUATION RESULT ---"

// maxEvaluatorOutput bounds what ParseEvaluatorOutput reads; an evaluator that prints more
// than this is treated as broken rather than exhausting memory.
const maxEvaluatorOutput = 16 << 20

// ErrNoMarker means the evaluator exited without printing EvaluationMarker: the submission
// is invalid (AIRS-Bench: no marker = invalid).
var ErrNoMarker = errors.New("evaluator printed no " + EvaluationMarker + " line")

// EvaluatorResult is what an evaluator reported.
type EvaluatorResult struct {
	Metric string
	Score  float64
	// Extra holds the other numeric entries of the JSON object (additional metrics).
	Extra map[string]float64
}

// ParseEvaluatorOutput reads an evaluator's stdout under the AIRS-Bench contract: anything,
// then a line that is exactly EvaluationMarker (surrounding space ignored), then a JSON
// object. The score is the entry named metric if present, else the object's single numeric
// entry. The last marker wins, so progress output cannot spoof an earlier one away from the
// final answer. It is a decoder of outside input: every failure is an error, never a panic.
func ParseEvaluatorOutput(out []byte, metric string) (*EvaluatorResult, error) {
	if len(out) > maxEvaluatorOutput {
		return nil, fmt.Errorf("evaluator output is %d bytes, over the %d-byte limit", len(out), maxEvaluatorOutput)
	}
	lines := bytes.Split(out, []byte("\n"))
	at := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if string(bytes.TrimSpace(lines[i])) == EvaluationMarker {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, ErrNoMarker
	}
	rest := bytes.TrimSpace(bytes.Join(lines[at+1:], []byte("\n")))
	if len(rest) == 0 {
		return nil, fmt.Errorf("evaluator printed %s but no JSON object after it", EvaluationMarker)
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("evaluator result after %s is not a JSON object: %v", EvaluationMarker, err)
	}
	if obj == nil {
		return nil, fmt.Errorf("evaluator result after %s is null, want a JSON object", EvaluationMarker)
	}
	nums := map[string]float64{}
	for k, v := range obj {
		n, ok := v.(json.Number)
		if !ok {
			continue
		}
		f, err := n.Float64()
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		nums[k] = f
	}
	res := &EvaluatorResult{Extra: map[string]float64{}}
	if v, ok := nums[metric]; ok && metric != "" {
		res.Metric, res.Score = metric, v
	} else if len(nums) == 1 {
		for k, v := range nums {
			res.Metric, res.Score = k, v
		}
	} else if len(nums) == 0 {
		return nil, fmt.Errorf("evaluator result has no finite numeric entry (want {%q: <number>})", metric)
	} else {
		keys := make([]string, 0, len(nums))
		for k := range nums {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("evaluator result has several numbers (%s) and none is named %q", strings.Join(keys, ", "), metric)
	}
	for k, v := range nums {
		if k != res.Metric {
			res.Extra[k] = v
		}
	}
	return res, nil
}

package scoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
)

// resultLine is one line of a results file. Pointers tell a missing field from a zero.
type resultLine struct {
	Task          *string          `json:"task"`
	Agent         *string          `json:"agent"`
	Seed          *json.Number     `json:"seed"`
	Status        *string          `json:"status"`
	Score         *json.RawMessage `json:"score"`
	AttestationID string           `json:"attestation_id,omitempty"`
}

// ParseResultsJSONL parses a results file, one JSON object a line:
// {"task": NAME, "agent": NAME, "seed": INT, "status": "SUCCESS"|OTHER, "score": NUMBER|null}
// (optionally "attestation_id"). Blank lines are skipped. The first bad line is an error
// that names its line number and what is wrong with it.
func ParseResultsJSONL(data []byte) ([]Result, error) {
	var out []Result
	line := 0
	for len(data) > 0 {
		line++
		var raw []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			raw, data = data, nil
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		r, err := parseResultLine(raw)
		if err != nil {
			return nil, fmt.Errorf("results line %d: %v", line, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseResultLine(raw []byte) (Result, error) {
	var l resultLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Result{}, fmt.Errorf("not a results object (%v); expected {\"task\":…,\"agent\":…,\"seed\":INT,\"status\":…,\"score\":NUMBER|null}", err)
	}
	if dec.More() {
		return Result{}, fmt.Errorf("more than one JSON value on the line")
	}
	switch {
	case l.Task == nil || *l.Task == "":
		return Result{}, fmt.Errorf("missing \"task\"")
	case l.Agent == nil || *l.Agent == "":
		return Result{}, fmt.Errorf("missing \"agent\"")
	case l.Seed == nil:
		return Result{}, fmt.Errorf("missing \"seed\"")
	case l.Status == nil || *l.Status == "":
		return Result{}, fmt.Errorf("missing \"status\"")
	}
	if *l.Agent == SOTAPlayer {
		return Result{}, fmt.Errorf("agent name %q is reserved for the human-SOTA player", SOTAPlayer)
	}
	seed, err := l.Seed.Int64()
	if err != nil || seed < math.MinInt32 || seed > math.MaxInt32 {
		return Result{}, fmt.Errorf("\"seed\" %s is not an integer in 32-bit range", l.Seed.String())
	}
	r := Result{Task: *l.Task, Agent: *l.Agent, Seed: int(seed), Status: *l.Status, AttestationID: l.AttestationID}
	if l.Score != nil && string(*l.Score) != "null" {
		var n json.Number
		if err := json.Unmarshal(*l.Score, &n); err != nil {
			return Result{}, fmt.Errorf("\"score\" %s is not a number or null", string(*l.Score))
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) {
			return Result{}, fmt.Errorf("\"score\" %s is out of float64 range", n.String())
		}
		r.Score = &f
	}
	return r, nil
}

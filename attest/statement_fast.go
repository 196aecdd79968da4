package attest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// fastStatement decodes an evalmesh statement (run or re-score predicate) without
// reflection: after the signature check this is the largest cost of verification, and
// encoding/json spends three times as long on it. Like fastEnvelope it handles a strict subset
// — no string escapes, ASCII strings, no duplicate or case-folded known keys, no null except
// for score and telemetry — and declines (ok=false) everything else, every type mismatch and
// every statement that fails validation, so that decodeStatementReference (encoding/json)
// decides those and words the error. When it says ok its result equals the reference's;
// FuzzDecodeStatement checks exactly that.
func fastStatement(b []byte) (*Statement, *RunPredicate, *RescorePredicate, bool) {
	p := fastParser{b: b}
	if !p.eat('{') {
		return nil, nil, nil, false
	}
	st := &Statement{}
	var seen uint8
	ok := p.object(func(key []byte) bool {
		switch string(key) {
		case "_type":
			if !once(&seen, 1) {
				return false
			}
			v, ok := p.str()
			st.Type = v
			return ok
		case "subject":
			if !once(&seen, 2) {
				return false
			}
			v, ok := p.subjects()
			st.Subject = v
			return ok
		case "predicateType":
			if !once(&seen, 4) {
				return false
			}
			v, ok := p.str()
			st.PredicateType = v
			return ok && (v == PredicateRunV1 || v == PredicateRescoreV1)
		case "predicate":
			if !once(&seen, 8) || p.peek() != '{' {
				return false
			}
			start := p.i
			if !p.skip(0) {
				return false
			}
			st.Predicate = b[start:p.i:p.i]
			return true
		}
		return !foldsTo(key, "_type", "subject", "predicateType", "predicate") && p.skip(0)
	})
	p.ws()
	if !ok || p.i != len(b) || seen != 15 || st.validate() != nil {
		return nil, nil, nil, false
	}
	if st.PredicateType == PredicateRunV1 {
		run, ok := fastRun(st.Predicate)
		if !ok || run.validate() != nil {
			return nil, nil, nil, false
		}
		return st, run, nil, true
	}
	rs, ok := fastRescore(st.Predicate)
	if !ok || rs.validate() != nil {
		return nil, nil, nil, false
	}
	return st, nil, rs, true
}

func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

func once32(seen *uint32, bit uint32) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// foldsTo reports whether key matches one of names only case-insensitively: encoding/json
// would take it for that field, so the fast path must not treat it as unknown.
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

func (p *fastParser) subjects() ([]Subject, bool) {
	if !p.eat('[') {
		return nil, false
	}
	subs := []Subject{}
	if p.eat(']') {
		return subs, true
	}
	for {
		if !p.eat('{') {
			return nil, false
		}
		var s Subject
		var seen uint8
		if !p.object(func(key []byte) bool {
			switch string(key) {
			case "name":
				if !once(&seen, 1) {
					return false
				}
				v, ok := p.str()
				s.Name = v
				return ok
			case "digest":
				if !once(&seen, 2) || !p.eat('{') {
					return false
				}
				s.Digest = map[string]string{}
				return p.object(func(k []byte) bool {
					v, ok := p.str()
					s.Digest[string(k)] = v
					return ok
				})
			case "annotations":
				if !once(&seen, 4) || !p.eat('{') {
					return false
				}
				s.Annotations = map[string]any{}
				return p.object(func(k []byte) bool {
					v, ok := p.anyValue()
					s.Annotations[string(k)] = v
					return ok
				})
			}
			return !foldsTo(key, "name", "digest", "annotations") && p.skip(0)
		}) {
			return nil, false
		}
		subs = append(subs, s)
		if p.eat(',') {
			continue
		}
		return subs, p.eat(']')
	}
}

// anyValue decodes a value as encoding/json does into an interface: strings directly, the
// rest (rare in annotations and telemetry) through encoding/json itself.
func (p *fastParser) anyValue() (any, bool) {
	if p.peek() == '"' {
		return p.str()
	}
	start := p.i
	if !p.skip(0) {
		return nil, false
	}
	var v any
	if err := json.Unmarshal(p.b[start:p.i], &v); err != nil {
		return nil, false
	}
	return v, true
}

func (p *fastParser) float() (float64, bool) {
	p.ws()
	start := p.i
	if !p.number() {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	return f, err == nil
}

func (p *fastParser) integer() (int, bool) {
	p.ws()
	start := p.i
	if !p.number() {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil || int64(int(n)) != n {
		return 0, false
	}
	return int(n), true
}

func (p *fastParser) boolean() (bool, bool) {
	switch p.peek() {
	case 't':
		return true, p.lit("true")
	case 'f':
		return false, p.lit("false")
	}
	return false, false
}

// timeValue decodes as time.Time.UnmarshalJSON does (encoding/json calls exactly that).
func (p *fastParser) timeValue() (time.Time, bool) {
	p.ws()
	start := p.i
	if _, ok := p.raw(); !ok {
		return time.Time{}, false
	}
	var t time.Time
	return t, t.UnmarshalJSON(p.b[start:p.i]) == nil
}

// score decodes a *float64: null is nil.
func (p *fastParser) score() (*float64, bool) {
	if p.peek() == 'n' {
		return nil, p.lit("null")
	}
	f, ok := p.float()
	return &f, ok
}

func fastRun(b []byte) (*RunPredicate, bool) {
	p := fastParser{b: b}
	if !p.eat('{') {
		return nil, false
	}
	r := &RunPredicate{}
	var seen uint32
	ok := p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "slot":
			if !once32(&seen, 1<<0) {
				return false
			}
			return p.slot(&r.Slot)
		case "node":
			if !once32(&seen, 1<<1) {
				return false
			}
			r.Node, ok = p.str()
		case "lab":
			if !once32(&seen, 1<<2) {
				return false
			}
			r.Lab, ok = p.str()
		case "hardware":
			if !once32(&seen, 1<<3) {
				return false
			}
			return p.hardware(&r.Hardware)
		case "start":
			if !once32(&seen, 1<<4) {
				return false
			}
			r.Start, ok = p.timeValue()
		case "end":
			if !once32(&seen, 1<<5) {
				return false
			}
			r.End, ok = p.timeValue()
		case "wall_seconds":
			if !once32(&seen, 1<<6) {
				return false
			}
			r.WallSeconds, ok = p.float()
		case "gpu_seconds":
			if !once32(&seen, 1<<7) {
				return false
			}
			r.GPUSeconds, ok = p.float()
		case "energy_joules":
			if !once32(&seen, 1<<8) {
				return false
			}
			r.EnergyJoules, ok = p.float()
		case "exit":
			if !once32(&seen, 1<<9) {
				return false
			}
			return p.exit(&r.Exit)
		case "valid":
			if !once32(&seen, 1<<10) {
				return false
			}
			r.Valid, ok = p.boolean()
		case "invalid_reason":
			if !once32(&seen, 1<<11) {
				return false
			}
			r.InvalidReason, ok = p.str()
		case "score":
			if !once32(&seen, 1<<12) {
				return false
			}
			r.Score, ok = p.score()
		case "metric":
			if !once32(&seen, 1<<13) {
				return false
			}
			r.Metric, ok = p.str()
		case "evaluator":
			if !once32(&seen, 1<<14) {
				return false
			}
			r.Evaluator, ok = p.str()
		case "telemetry":
			if !once32(&seen, 1<<15) {
				return false
			}
			r.Telemetry, ok = p.anyValue()
		case "attempt":
			if !once32(&seen, 1<<16) {
				return false
			}
			r.Attempt, ok = p.integer()
		case "executor":
			if !once32(&seen, 1<<17) || !p.eat('{') { // null (nil) goes to the reference
				return false
			}
			r.Executor = &ExecutorInfo{}
			return p.executor(r.Executor)
		case "build":
			if !once32(&seen, 1<<18) || !p.eat('{') {
				return false
			}
			r.Build = &BuildInfo{}
			return p.build(r.Build)
		case "heureka", "model", "score_absent":
			return false // HeurekaBench runs, runs with a model and unscored runs are rare: encoding/json decodes them
		case "witness":
			if !once32(&seen, 1<<19) {
				return false
			}
			r.Witness, ok = p.str()
		default:
			return !foldsTo(key, "slot", "node", "lab", "hardware", "start", "end", "wall_seconds", "gpu_seconds",
				"energy_joules", "exit", "valid", "invalid_reason", "score", "metric", "evaluator", "telemetry",
				"attempt", "executor", "build", "heureka", "model", "witness", "score_absent") && p.skip(0)
		}
		return ok
	})
	p.ws()
	return r, ok && p.i == len(b)
}

func (p *fastParser) slot(s *Slot) bool {
	if !p.eat('{') {
		return false
	}
	var seen uint8
	return p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "campaign":
			if !once(&seen, 1) {
				return false
			}
			s.Campaign, ok = p.str()
		case "task":
			if !once(&seen, 2) {
				return false
			}
			s.Task, ok = p.str()
		case "agent":
			if !once(&seen, 4) {
				return false
			}
			s.Agent, ok = p.str()
		case "seed":
			if !once(&seen, 8) {
				return false
			}
			s.Seed, ok = p.integer()
		default:
			return !foldsTo(key, "campaign", "task", "agent", "seed") && p.skip(0)
		}
		return ok
	})
}

func (p *fastParser) hardware(h *Hardware) bool {
	if !p.eat('{') {
		return false
	}
	var seen uint8
	return p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "gpu_model":
			if !once(&seen, 1) {
				return false
			}
			h.GPUModel, ok = p.str()
		case "driver":
			if !once(&seen, 2) {
				return false
			}
			h.Driver, ok = p.str()
		case "gpu_count":
			if !once(&seen, 4) {
				return false
			}
			h.GPUCount, ok = p.integer()
		case "gpu_uuid_hashes":
			if !once(&seen, 8) || !p.eat('[') {
				return false
			}
			h.GPUUUIDHashes = []string{}
			if p.eat(']') {
				return true
			}
			for {
				v, ok := p.str()
				if !ok {
					return false
				}
				h.GPUUUIDHashes = append(h.GPUUUIDHashes, v)
				if p.eat(',') {
					continue
				}
				return p.eat(']')
			}
		default:
			return !foldsTo(key, "gpu_model", "driver", "gpu_count", "gpu_uuid_hashes") && p.skip(0)
		}
		return ok
	})
}

func (p *fastParser) executor(e *ExecutorInfo) bool {
	var seen uint8
	return p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "name":
			if !once(&seen, 1) {
				return false
			}
			e.Name, ok = p.str()
		case "isolation":
			if !once(&seen, 2) {
				return false
			}
			e.Isolation, ok = p.str()
		case "limits":
			if !once(&seen, 4) {
				return false
			}
			e.Limits, ok = p.str()
		case "separate_uid":
			if !once(&seen, 8) {
				return false
			}
			e.SeparateUID, ok = p.boolean()
		case "engine":
			if !once(&seen, 16) {
				return false
			}
			e.Engine, ok = p.str()
		case "partition":
			if !once(&seen, 32) {
				return false
			}
			e.Partition, ok = p.str()
		case "node":
			if !once(&seen, 64) {
				return false
			}
			e.Node, ok = p.str()
		default:
			return !foldsTo(key, "name", "isolation", "limits", "separate_uid", "engine", "partition", "node") && p.skip(0)
		}
		return ok
	})
}

func (p *fastParser) build(b *BuildInfo) bool {
	var seen uint8
	return p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "module":
			if !once(&seen, 1) {
				return false
			}
			b.Module, ok = p.str()
		case "version":
			if !once(&seen, 2) {
				return false
			}
			b.Version, ok = p.str()
		case "revision":
			if !once(&seen, 4) {
				return false
			}
			b.Revision, ok = p.str()
		case "modified":
			if !once(&seen, 8) {
				return false
			}
			b.Modified, ok = p.boolean()
		default:
			return !foldsTo(key, "module", "version", "revision", "modified") && p.skip(0)
		}
		return ok
	})
}

func (p *fastParser) exit(e *ExitStatus) bool {
	if !p.eat('{') {
		return false
	}
	var seen uint8
	return p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "code":
			if !once(&seen, 1) {
				return false
			}
			e.Code, ok = p.integer()
		case "signal":
			if !once(&seen, 2) {
				return false
			}
			e.Signal, ok = p.integer()
		case "oom_killed":
			if !once(&seen, 4) {
				return false
			}
			e.OOMKilled, ok = p.boolean()
		case "timed_out":
			if !once(&seen, 8) {
				return false
			}
			e.TimedOut, ok = p.boolean()
		case "reason":
			if !once(&seen, 16) {
				return false
			}
			e.Reason, ok = p.str()
		default:
			return !foldsTo(key, "code", "signal", "oom_killed", "timed_out", "reason") && p.skip(0)
		}
		return ok
	})
}

func fastRescore(b []byte) (*RescorePredicate, bool) {
	p := fastParser{b: b}
	if !p.eat('{') {
		return nil, false
	}
	r := &RescorePredicate{}
	var seen uint32
	ok := p.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "run":
			if !once32(&seen, 1) {
				return false
			}
			r.Run, ok = p.str()
		case "score":
			if !once32(&seen, 2) {
				return false
			}
			r.Score, ok = p.score()
		case "valid":
			if !once32(&seen, 4) {
				return false
			}
			r.Valid, ok = p.boolean()
		case "metric":
			if !once32(&seen, 8) {
				return false
			}
			r.Metric, ok = p.str()
		case "evaluator":
			if !once32(&seen, 16) {
				return false
			}
			r.Evaluator, ok = p.str()
		case "node":
			if !once32(&seen, 32) {
				return false
			}
			r.Node, ok = p.str()
		case "lab":
			if !once32(&seen, 64) {
				return false
			}
			r.Lab, ok = p.str()
		case "time":
			if !once32(&seen, 128) {
				return false
			}
			r.Time, ok = p.timeValue()
		case "draw":
			if !once32(&seen, 256) {
				return false
			}
			r.Draw, ok = p.str()
		default:
			return !foldsTo(key, "run", "score", "valid", "metric", "evaluator", "node", "lab", "time", "draw") && p.skip(0)
		}
		return ok
	})
	p.ws()
	return r, ok && p.i == len(b)
}

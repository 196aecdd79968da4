package attest

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// seedEnvelopes are real envelopes (certified, uncertified, re-score) for fuzz corpora.
func seedEnvelopes(f *testing.F) [][]byte {
	fx := newFixture(f)
	run, id := fx.signRun(f, 2, "sub", 0.25)
	rs := fx.signRescore(f, id, true, 0.25)
	st, _ := NewStatement(runSubjects("x"), PredicateRunV1, runPredicate(fx.nodeID, "", 0, 1))
	bare, _, _ := Sign(fx.node, nil, st)
	return [][]byte{run, rs, bare, fx.cert.Raw()}
}

// FuzzDecodeEnvelope checks the decoder never panics, and that its fast path agrees with
// encoding/json on every input it accepts.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, e := range seedEnvelopes(f) {
		f.Add(e)
	}
	f.Add([]byte(`{"payloadType":"a","payload":"","signatures":[{"sig":""}]}`))
	f.Add([]byte(`{"payloadType":"a","PAYLOAD":"YQ==","payload":"","signatures":[{"sig":"","keyid":null}]}`))
	f.Add([]byte(`{"payloadType":"a","payload":"YQ","signatures":[{"sig":"YQ","extension":{"kind":"` + CertExtensionKind + `","ext":{"a":[1,-2.5e3,true,null,"x"]}}}],"x":{}}`))
	f.Add([]byte(`{"payloadType":"a\u0062","payload":"","signatures":[]}`))
	f.Add([]byte(` {"payloadType":"a","payload":"","signatures":[{"sig":""}]} x`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeEnvelope(b)
		want, werr := decodeEnvelopeReference(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("fast path %v, encoding/json %v", err, werr)
		}
		if err == nil && !reflect.DeepEqual(normEnv(got), normEnv(want)) {
			t.Fatalf("fast path %+v, encoding/json %+v", got, want)
		}
		if err == nil {
			// Whatever decodes can be verified without panicking.
			trust := NewTrustStore()
			_, _ = Verify(b, trust, time.Unix(0, 0))
		}
	})
}

func normEnv(e *Envelope) Envelope {
	n := *e
	if len(n.Payload) == 0 {
		n.Payload = nil
	}
	if len(n.Sig) == 0 {
		n.Sig = nil
	}
	return n
}

// FuzzDecodeStatement: the statement and predicate decoder never panics, every refusal has
// a reason, and what it accepts survives a round trip through NewStatement.
func FuzzDecodeStatement(f *testing.F) {
	for _, e := range seedEnvelopes(f) {
		if d, err := DecodeEnvelope(e); err == nil {
			f.Add(d.Payload)
		}
	}
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + sha("") + `"}}],"predicateType":"` + PredicateRescoreV1 + `","predicate":{"run":"x","node":"n","metric":"m","evaluator":"e"}}`))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + sha("") + `"}}],"predicateType":"` + PredicateRescoreV1 + `","predicate":{"run":"x","node":"n","metric":"m","evaluator":"e","time":"2026-06-01T11:30:00Z"}}`))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"md5":"x"},"annotations":{"cid":1}}],"predicateType":"p","predicate":[]}`))
	fx := newFixture(f)
	rp := runPredicate(fx.nodeID, fx.lab.ID, 1, 0.1)
	rp.Telemetry = map[string]any{"gpu_util": []any{0.5, 0.9}, "peak_mem": 1e9, "x": nil}
	rp.Exit = ExitStatus{Code: 137, Signal: 9, OOMKilled: true, TimedOut: true, Reason: "oom"}
	rp.Valid, rp.Score, rp.InvalidReason = false, nil, "no submission"
	rp.Attempt = 2
	rp.Executor = &ExecutorInfo{Name: "docker", Isolation: IsolationContainer, Limits: "cgroup2", SeparateUID: true}
	rp.Build = &BuildInfo{Module: "github.com/evalmesh/evalmesh", Version: "(devel)", Revision: "abc", Modified: true}
	if st, err := NewStatement(runSubjects("x"), PredicateRunV1, rp); err == nil {
		f.Add(st)
		// Case-folded, repeated and escaped keys, exotic numbers: the fast path must decline
		// or agree.
		for _, r := range [][2]string{{`"metric"`, `"METRIC"`}, {`"seed":1`, `"seed":1,"seed":2`}, {`"node"`, `"no\u0064e"`},
			{`"wall_seconds":3600`, `"wall_seconds":3.6e3`}, {`"code":137`, `"code":137.0`}, {`"gpu_count":1`, `"gpu_count":-0`},
			{`"start"`, `"Start"`}, {`"slot":{`, `"slot":{"extra":[{}],`}, {`"attempt":2`, `"attempt":-1`},
			{`"executor":{`, `"executor":null,"x":{`}, {`"isolation"`, `"Isolation"`}, {`"modified":true`, `"modified":1`}} {
			f.Add(bytes.Replace(st, []byte(r[0]), []byte(r[1]), 1))
		}
	}
	// A repeated predicate: encoding/json would merge the two objects into one pointer.
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + sha("") + `"}}],"predicateType":"` + PredicateRescoreV1 + `","predicate":{"run":"x","node":"n","metric":"m","evaluator":"e"},"PREDICATE":{"metric":"z"}}`))
	// The re-scorer draw (rescorers.go): a well-formed proof, a short one, a repeated key.
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + sha("") + `"}}],"predicateType":"` + PredicateRescoreV1 + `","predicate":{"run":"x","node":"n","metric":"m","evaluator":"e","draw":"` + strings.Repeat("ab", 80) + `"}}`))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + sha("") + `"}}],"predicateType":"` + PredicateRescoreV1 + `","predicate":{"run":"x","node":"n","metric":"m","evaluator":"e","draw":"ab"}}`))
	f.Add([]byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + sha("") + `"}}],"predicateType":"` + PredicateRescoreV1 + `","predicate":{"run":"x","node":"n","metric":"m","evaluator":"e","draw":"` + strings.Repeat("ab", 80) + `","Draw":""}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, run, rs, err := DecodeStatement(b)
		rst, rrun, rrs, rerr := decodeStatementReference(b)
		if (err == nil) != (rerr == nil) || ReasonOf(err) != ReasonOf(rerr) {
			t.Fatalf("fast path %v, reference %v", err, rerr)
		}
		if err == nil && (!reflect.DeepEqual(st, rst) || !reflect.DeepEqual(run, rrun) || !reflect.DeepEqual(rs, rrs)) {
			t.Fatalf("fast path and reference disagree:\n%+v %+v %+v\n%+v %+v %+v", st, run, rs, rst, rrun, rrs)
		}
		if err != nil {
			if r := ReasonOf(err); r != ReasonMalformedStatement && r != ReasonMalformedPredicate {
				t.Fatalf("refusal without a statement reason: %v", err)
			}
			return
		}
		if run != nil && rs != nil {
			t.Fatal("both predicates decoded")
		}
		var pred any = nil
		switch {
		case run != nil:
			pred = run
		case rs != nil:
			pred = rs
		default:
			return
		}
		again, err := NewStatement(st.Subject, st.PredicateType, pred)
		if err != nil {
			t.Fatalf("accepted statement does not re-encode: %v", err)
		}
		st2, run2, rs2, err := DecodeStatement(again)
		if err != nil {
			t.Fatalf("re-encoded statement refused: %v", err)
		}
		if st2.SubmissionDigest() != st.SubmissionDigest() || (run2 == nil) != (run == nil) || (rs2 == nil) != (rs == nil) {
			t.Fatal("round trip changed the statement")
		}
	})
}

// FuzzParseTrust: the trust-file parser never panics, and what it accepts re-parses to the
// same labs and nodes after Marshal.
//
// Its exec counter can stand still for tens of seconds ("execs: 25 (0/sec)"): that is Go's
// minimizer, not the parser. A mutant of the 1.2 KB first seed that finds new coverage is
// minimized (up to -fuzzminimizetime, 60 s by default) before fuzzing resumes, and each
// candidate parses, marshals and re-parses a file with a signed revocation (~0.2 ms; ed25519
// twice). GODEBUG=fuzzdebug=1 shows it ("minimizing took: 7.5s"); between minimizations
// it runs ~10,000 execs/s on one core, and ParseTrust is linear in its input (1 MB of labs,
// 10,000-deep nesting, alias bombs: under 0.3 s each, aliases refused). For a quick run:
// go test ./attest -run '^$' -fuzz FuzzParseTrust -fuzztime 30s -fuzzminimizetime 200x
func FuzzParseTrust(f *testing.F) {
	fx := newFixture(f)
	rev, _ := fx.lab.Revoke([]string{fx.nodeID}, nil, t0, "test")
	fx.trust.AddRevocation(rev)
	pub, _ := fx.node.GetPublic().Raw()
	fx.trust.AddNode("laptop", pub)
	good, err := fx.trust.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("version: 1\nlabs: []\n"))
	f.Add([]byte("version: 1\nlabs:\n  - name: x\n    key: AAAA\n"))
	f.Add([]byte("version: 2\n"))
	f.Add([]byte("version: 1\nnodes:\n  - name: n\n    peer_id: 12D3KooW\n"))
	f.Add([]byte("version: 1\nrevocations:\n  - payload: 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := ParseTrust(b)
		if err != nil {
			return
		}
		out, err := ts.Marshal()
		if err != nil {
			t.Fatalf("accepted trust file does not marshal: %v", err)
		}
		ts2, err := ParseTrust(out)
		if err != nil {
			t.Fatalf("marshalled trust file does not parse: %v\n%s", err, out)
		}
		if len(ts2.labs) != len(ts.labs) || len(ts2.nodes) != len(ts.nodes) || len(*ts2.revoked.Load()) != len(*ts.revoked.Load()) {
			t.Fatalf("round trip changed the store:\n%s", out)
		}
		for id := range ts.labs {
			if _, ok := ts2.labs[id]; !ok {
				t.Fatalf("lab %s lost in round trip", id)
			}
		}
		if !bytes.HasPrefix(out, []byte("#")) {
			t.Fatal("marshalled trust file lost its header")
		}
	})
}

// The fast decoders must actually take the envelopes evalmesh itself writes (else they only
// cost time), and agree with the reference on them.
func TestFastPathsTakeOurOwnOutput(t *testing.T) {
	f := newFixture(t)
	run, id := f.signRun(t, 4, "sub", 0.5)
	rs := f.signRescore(t, id, false, 0)
	p := runPredicate(f.nodeID, f.lab.ID, 1, 0.1)
	p.Telemetry = map[string]any{"gpu_util": []any{0.5, 0.9}, "peak_mem": 1e9}
	p.Exit = ExitStatus{Code: 137, Signal: 9, OOMKilled: true, Reason: "oom"}
	p.Valid, p.Score, p.InvalidReason = false, nil, "no submission"
	st, _ := NewStatement(runSubjects("x"), PredicateRunV1, p)
	odd, _, _ := Sign(f.node, f.cert, st)
	for _, env := range [][]byte{run, rs, odd} {
		if _, ok := fastEnvelope(env); !ok {
			t.Fatalf("fast envelope path declined our envelope %s", env)
		}
		d, _ := DecodeEnvelope(env)
		st, r, s, ok := fastStatement(d.Payload)
		if !ok {
			t.Fatalf("fast statement path declined our statement %s", d.Payload)
		}
		rst, rr, rrs, err := decodeStatementReference(d.Payload)
		if err != nil || !reflect.DeepEqual(st, rst) || !reflect.DeepEqual(r, rr) || !reflect.DeepEqual(s, rrs) {
			t.Fatalf("fast and reference differ on %s: %v", d.Payload, err)
		}
	}
}

package attest

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// mutate decodes an envelope into a generic map, lets edit change it, and re-encodes it.
func mutate(t *testing.T, env []byte, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sig0(m map[string]any) map[string]any { return m["signatures"].([]any)[0].(map[string]any) }

// signRaw signs arbitrary statement bytes as the fixture's node (Sign refuses malformed ones).
func (f *fixture) signRaw(t *testing.T, payloadType string, body []byte) []byte {
	t.Helper()
	env, err := signDSSE(f.node, payloadType, body, f.nodeID, f.cert.Raw())
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestRejections(t *testing.T) {
	f := newFixture(t)
	good, _ := f.signRun(t, 0, "sub", 0.9)

	other := newFixture(t) // a lab the trust store does not know
	strangerEnv, _ := other.signRun(t, 0, "sub", 0.9)

	nodeB, nodeBID := newNode(t)

	predicate := func(edit func(p *RunPredicate)) []byte {
		p := runPredicate(f.nodeID, f.lab.ID, 0, 0.5)
		edit(&p)
		pb, _ := json.Marshal(p)
		st, _ := json.Marshal(Statement{Type: StatementTypeV1, Subject: runSubjects("s"), PredicateType: PredicateRunV1, Predicate: pb})
		return f.signRaw(t, PayloadType, st)
	}

	revoked := NewTrustStore()
	revoked.AddLab("acme", f.lab.Pub)
	rev, err := f.lab.Revoke([]string{f.nodeID}, nil, t0.Add(-time.Minute), "key leaked")
	if err != nil {
		t.Fatal(err)
	}
	if err := revoked.AddRevocation(rev); err != nil {
		t.Fatal(err)
	}
	revokedByCert := NewTrustStore()
	revokedByCert.AddLab("acme", f.lab.Pub)
	rev2, _ := f.lab.Revoke(nil, []string{f.cert.ID}, t0.Add(-time.Minute), "")
	revokedByCert.AddRevocation(rev2)

	cases := []struct {
		name   string
		env    []byte
		trust  *TrustStore
		now    time.Time
		reason Reason
		says   string // a fragment the message must contain
	}{
		{"not json", []byte("{nope"), f.trust, t0, ReasonMalformedEnvelope, "not a DSSE JSON envelope"},
		{"no payload", mutate(t, good, func(m map[string]any) { delete(m, "payload") }), f.trust, t0, ReasonMalformedEnvelope, "needs payloadType, payload and signatures"},
		{"two signatures", mutate(t, good, func(m map[string]any) { m["signatures"] = append(m["signatures"].([]any), sig0(m)) }), f.trust, t0, ReasonMalformedEnvelope, "exactly one"},
		{"payload not base64", mutate(t, good, func(m map[string]any) { m["payload"] = "%%%" }), f.trust, t0, ReasonMalformedEnvelope, "payload"},
		{"wrong payload type", f.signRaw(t, "text/plain", []byte("hi")), f.trust, t0, ReasonPayloadType, "text/plain"},
		{"malformed certificate", mutate(t, good, func(m map[string]any) {
			sig0(m)["extension"].(map[string]any)["ext"] = map[string]any{"payload": "e30", "payloadType": CertPayloadType, "signatures": []any{map[string]any{"sig": ""}}}
		}), f.trust, t0, ReasonMalformedCert, "node certificate"},
		{"bad certificate signature", mutate(t, good, func(m map[string]any) {
			ext := sig0(m)["extension"].(map[string]any)["ext"].(map[string]any)
			body, _ := DecodeBase64(ext["payload"].(string))
			// Stretch the validity window without the lab's consent.
			body = []byte(strings.Replace(string(body), `"not_after":"2026`, `"not_after":"2099`, 1))
			ext["payload"] = base64.StdEncoding.EncodeToString(body)
		}), f.trust, t0, ReasonBadCertSignature, f.lab.ID},
		{"unknown lab", strangerEnv, f.trust, t0, ReasonUnknownLab, other.lab.ID},
		{"unknown node", mutate(t, good, func(m map[string]any) { delete(sig0(m), "extension") }), f.trust, t0, ReasonUnknownNode, f.cert.nodeKeyID},
		{"keyid is not the certified node", func() []byte {
			st, _ := NewStatement(runSubjects("s"), PredicateRunV1, runPredicate(nodeBID, f.lab.ID, 0, 1))
			env, _ := signDSSE(nodeB, PayloadType, st, nodeBID, f.cert.Raw())
			return env
		}(), f.trust, t0, ReasonSignerMismatch, nodeBID},
		{"expired certificate", good, f.trust, f.cert.NotAfter, ReasonCertExpired, "expired at"},
		{"certificate not yet valid", good, f.trust, f.cert.NotBefore.Add(-time.Second), ReasonCertNotYetValid, "valid from"},
		{"revoked node", good, revoked, t0, ReasonCertRevoked, f.nodeID},
		{"revoked certificate", good, revokedByCert, t0, ReasonCertRevoked, f.cert.ID},
		{"bad signature", mutate(t, good, func(m map[string]any) {
			body, _ := DecodeBase64(m["payload"].(string))
			m["payload"] = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(body), `"score":0.9`, `"score":1`, 1)))
		}), f.trust, t0, ReasonBadSignature, "does not verify"},
		{"signed by another key", func() []byte {
			st, _ := NewStatement(runSubjects("s"), PredicateRunV1, runPredicate(f.nodeID, f.lab.ID, 0, 1))
			env, _ := signDSSE(nodeB, PayloadType, st, "", f.cert.Raw())
			return env
		}(), f.trust, t0, ReasonBadSignature, f.nodeID},
		{"statement not json", f.signRaw(t, PayloadType, []byte("not json")), f.trust, t0, ReasonMalformedStatement, "in-toto Statement"},
		{"statement type", f.signRaw(t, PayloadType, []byte(`{"_type":"https://in-toto.io/Statement/v0.1","subject":[{"digest":{"sha256":"`+sha("x")+`"}}],"predicateType":"x"}`)), f.trust, t0, ReasonMalformedStatement, "_type"},
		{"statement without subject", f.signRaw(t, PayloadType, []byte(`{"_type":"`+StatementTypeV1+`","subject":[],"predicateType":"x"}`)), f.trust, t0, ReasonMalformedStatement, "no subject"},
		{"bad sha256 digest", f.signRaw(t, PayloadType, []byte(`{"_type":"`+StatementTypeV1+`","subject":[{"name":"a","digest":{"sha256":"ABC"}}],"predicateType":"x"}`)), f.trust, t0, ReasonMalformedStatement, "64 lowercase hex"},
		{"predicate missing metric", predicate(func(p *RunPredicate) { p.Metric = "" }), f.trust, t0, ReasonMalformedPredicate, "metric"},
		{"predicate wrong type", f.signRaw(t, PayloadType, []byte(`{"_type":"`+StatementTypeV1+`","subject":[{"digest":{"sha256":"`+sha("x")+`"}}],"predicateType":"`+PredicateRunV1+`","predicate":{"slot":"x"}}`)), f.trust, t0, ReasonMalformedPredicate, "run predicate"},
		{"valid run without score", predicate(func(p *RunPredicate) { p.Score = nil }), f.trust, t0, ReasonMalformedPredicate, "needs a score"},
		{"end before start", predicate(func(p *RunPredicate) { p.End = p.Start.Add(-time.Second) }), f.trust, t0, ReasonMalformedPredicate, "before start"},
		{"predicate names another node", predicate(func(p *RunPredicate) { p.Node = nodeBID }), f.trust, t0, ReasonPredicateSigner, nodeBID},
		{"predicate names another lab", predicate(func(p *RunPredicate) { p.Lab = other.lab.ID }), f.trust, t0, ReasonPredicateSigner, other.lab.ID},
	}
	seen := map[Reason]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Verify(c.env, c.trust, c.now)
			if err == nil {
				t.Fatalf("accepted; want %q", c.reason)
			}
			if got := ReasonOf(err); got != c.reason {
				t.Fatalf("reason %q (%v), want %q", got, err, c.reason)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Fatalf("message %q does not say %q", err, c.says)
			}
			// The batch path reaches the same verdict.
			_, errs := VerifyBatch([][]byte{c.env}, c.trust, c.now)
			if ReasonOf(errs[0]) != c.reason {
				t.Fatalf("batch reason %v, want %q", errs[0], c.reason)
			}
		})
		seen[c.reason] = true
	}
	for _, r := range []Reason{ReasonMalformedEnvelope, ReasonPayloadType, ReasonMalformedCert, ReasonBadCertSignature,
		ReasonUnknownLab, ReasonUnknownNode, ReasonSignerMismatch, ReasonCertExpired, ReasonCertNotYetValid,
		ReasonCertRevoked, ReasonBadSignature, ReasonMalformedStatement, ReasonMalformedPredicate, ReasonPredicateSigner} {
		if !seen[r] {
			t.Errorf("no rejection test for %q", r)
		}
	}
	// The untouched envelope passes all the same trust stores' other checks.
	if _, err := Verify(good, f.trust, t0); err != nil {
		t.Fatal(err)
	}
}

func TestRevocationScope(t *testing.T) {
	f := newFixture(t)
	good, _ := f.signRun(t, 0, "sub", 0.9)
	other := newFixture(t)
	// Another lab cannot revoke acme's node.
	rev, _ := other.lab.Revoke([]string{f.nodeID}, nil, t0.Add(-time.Hour), "")
	f.trust.AddRevocation(rev)
	if _, err := Verify(good, f.trust, t0); err != nil {
		t.Fatalf("foreign revocation took effect: %v", err)
	}
	// A revocation takes effect at its time, not before.
	own, _ := f.lab.Revoke([]string{f.nodeID}, nil, t0.Add(time.Hour), "")
	f.trust.AddRevocation(own)
	if _, err := Verify(good, f.trust, t0); err != nil {
		t.Fatalf("revocation effective early: %v", err)
	}
	if _, err := Verify(good, f.trust, t0.Add(time.Hour)); ReasonOf(err) != ReasonCertRevoked {
		t.Fatalf("after revocation time: %v", err)
	}
}

func TestOtherPredicateTypesDoNotCount(t *testing.T) {
	f := newFixture(t)
	st, err := NewStatement([]Subject{{Name: "x", Digest: map[string]string{"sha256": sha("x")}}}, "https://slsa.dev/provenance/v1", map[string]any{"buildDefinition": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := Sign(f.node, f.cert, st)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Verify(env, f.trust, t0)
	if err != nil {
		t.Fatal(err)
	}
	if v.Counts || v.Run != nil || v.Rescore != nil || v.Statement.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Fatalf("foreign statement: %+v", v)
	}
}

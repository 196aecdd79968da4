package attest

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// A statement whose keys repeat, or differ only in case, means one thing to encoding/json
// and another to Python, jq or in-toto-python: refused at sign and at verify, by the fast
// decoder and the reference alike, at any depth.
func TestDuplicateKeysRefused(t *testing.T) {
	f := newFixture(t)
	p := runPredicate(f.nodeID, f.lab.ID, 0, 0.25)
	p.Telemetry = map[string]any{"gpu": map[string]any{"util": []any{0.5}}}
	good, err := NewStatement(runSubjects("dup"), PredicateRunV1, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Sign(f.node, f.cert, good); err != nil {
		t.Fatalf("the unmutated statement must sign: %v", err)
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("statement has no %s", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	for _, tc := range []struct {
		name string
		st   []byte
		want string
	}{
		{"score twice", edit(`"score":0.25`, `"score":0.25,"score":1`), `"score" appears twice`},
		{"score and Score", edit(`"score":0.25`, `"score":0.25,"Score":1`), `differ only in case`},
		{"escaped spelling", edit(`"score":0.25`, `"score":0.25,"sc\u006fre":1`), `appears twice`},
		{"statement level", edit(`"predicateType"`, `"PredicateType":"x","predicateType"`), `differ only in case`},
		{"slot", edit(`"seed":0`, `"seed":0,"Seed":1`), `/predicate/slot`},
		{"telemetry, deep", edit(`"util":[0.5]`, `"util":[0.5],"UTIL":[1]`), `/predicate/telemetry/gpu`},
		{"unknown field repeated", edit(`"metric"`, `"extra":1,"EXTRA":2,"metric"`), `differ only in case`},
		{"subject annotations", edit(`"role":"submission"`, `"role":"submission","Role":"logs"`), `/subject/0/annotations`},
		{"kelvin sign", edit(`"node"`, `"\u212aey":1,"key":2,"node"`), `differ only in case`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, fastErr := DecodeStatement(tc.st)
			_, _, _, refErr := decodeStatementReference(tc.st)
			for what, err := range map[string]error{"DecodeStatement": fastErr, "reference": refErr} {
				if ReasonOf(err) != ReasonMalformedStatement || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: %v, want %q saying %q", what, err, ReasonMalformedStatement, tc.want)
				}
			}
			if _, _, err := Sign(f.node, f.cert, tc.st); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Sign: %v, want a refusal saying %q", err, tc.want)
			}
			env := f.signRaw(t, PayloadType, tc.st) // signed anyway, by hand
			if _, err := Verify(env, f.trust, t0); ReasonOf(err) != ReasonMalformedStatement {
				t.Fatalf("Verify: %v, want %q", err, ReasonMalformedStatement)
			}
			if _, errs := VerifyBatch([][]byte{env}, f.trust, t0); ReasonOf(errs[0]) != ReasonMalformedStatement {
				t.Fatalf("VerifyBatch: %v, want %q", errs[0], ReasonMalformedStatement)
			}
		})
	}

	// NewStatement refuses a predicate whose map keys differ only in case.
	p.Telemetry = map[string]any{"peak": 1, "Peak": 2}
	if _, err := NewStatement(runSubjects("dup"), PredicateRunV1, p); err == nil || !strings.Contains(err.Error(), "differ only in case") {
		t.Fatalf("NewStatement with telemetry peak/Peak: %v", err)
	}
}

// The envelope and the certificate inside it are held to the same rule: two "payload"s
// would let two verifiers check two different statements.
func TestDuplicateKeysInEnvelopeRefused(t *testing.T) {
	f := newFixture(t)
	env, _ := f.signRun(t, 0, "env", 0.5)
	other, _ := f.signRun(t, 1, "env2", 0.5)
	d2, _ := DecodeEnvelope(other)
	payload2 := base64.StdEncoding.EncodeToString(d2.Payload)
	certPayload := `"payloadType":"` + CertPayloadType + `"`
	for _, tc := range []struct {
		name string
		env  []byte
	}{
		{"payload twice", bytes.Replace(env, []byte(`"payload":`), []byte(`"payload":"`+payload2+`","payload":`), 1)},
		{"Payload", bytes.Replace(env, []byte(`"payload":`), []byte(`"Payload":"`+payload2+`","payload":`), 1)},
		{"keyid twice", bytes.Replace(env, []byte(`"keyid":`), []byte(`"keyid":"x","KeyID":`), 1)},
		{"in the certificate", bytes.Replace(env, []byte(certPayload), []byte(certPayload+`,"PayloadType":"x"`), 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bytes.Equal(tc.env, env) {
				t.Fatal("edit did nothing")
			}
			_, err := DecodeEnvelope(tc.env)
			_, rerr := decodeEnvelopeReference(tc.env)
			if err == nil || rerr == nil {
				t.Fatalf("DecodeEnvelope %v, reference %v: want both refused", err, rerr)
			}
			if _, err := Verify(tc.env, f.trust, t0); err == nil {
				t.Fatal("Verify accepted it")
			}
		})
	}
	// The certificate on its own, too.
	bad := bytes.Replace(f.cert.Raw(), []byte(certPayload), []byte(certPayload+`,"payloadtype":"x"`), 1)
	if _, err := ParseNodeCert(bad); err == nil {
		t.Fatal("ParseNodeCert accepted a certificate envelope with payloadType twice")
	}
}

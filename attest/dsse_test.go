package attest

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"
)

// The DSSE spec's PAE test vector.
func TestPAEVector(t *testing.T) {
	got := string(PAE("http://example.com/HelloWorld", []byte("hello world")))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if got != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
	if got != string(dsse.PAE("http://example.com/HelloWorld", []byte("hello world"))) {
		t.Fatal("PAE differs from go-securesystemslib's")
	}
	if g := string(PAE("", nil)); g != "DSSEv1 0  0 " {
		t.Fatalf("empty PAE = %q", g)
	}
}

// sslibKey wraps a libp2p ed25519 key as a go-securesystemslib signer/verifier with the
// given keyid ("" is the library's default: it then derives SHA256KeyID of the key).
func sslibKey(t *testing.T, key crypto.PrivKey, withPrivate bool, keyID string) *signerverifier.ED25519SignerVerifier {
	t.Helper()
	pub, err := key.GetPublic().Raw()
	if err != nil {
		t.Fatal(err)
	}
	kv := signerverifier.KeyVal{Public: hex.EncodeToString(pub)}
	if withPrivate {
		priv, err := key.Raw()
		if err != nil {
			t.Fatal(err)
		}
		kv.Private = hex.EncodeToString(priv)
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(&signerverifier.SSLibKey{
		KeyType: "ed25519", Scheme: "ed25519", KeyID: keyID, KeyVal: kv,
	})
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

// sslibVerify checks env with go-securesystemslib's dsse verifier holding only key's public
// half and no keyid of its own (the library derives SHA256KeyID).
func sslibVerify(t *testing.T, env []byte, key crypto.PrivKey) ([]dsse.AcceptedKey, []byte, error) {
	t.Helper()
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	ev, err := dsse.NewEnvelopeVerifier(sslibKey(t, key, false, ""))
	if err != nil {
		t.Fatal(err)
	}
	return ev.VerifyAndDecode(context.Background(), &e)
}

func TestOurEnvelopesVerifyInSecureSystemsLib(t *testing.T) {
	f := newFixture(t)
	env, _ := f.signRun(t, 3, "sub", 0.7)
	pub, _ := f.node.GetPublic().Raw()
	keys, body, err := sslibVerify(t, env, f.node)
	if err != nil {
		t.Fatalf("go-securesystemslib (public key alone, default keyid) refused our envelope: %v", err)
	}
	want, _ := dsse.SHA256KeyID(ed25519.PublicKey(pub))
	if len(keys) != 1 || keys[0].KeyID != want {
		t.Fatalf("accepted keys %+v, want one with keyid %s", keys, want)
	}
	d, _ := DecodeEnvelope(env)
	if string(body) != string(d.Payload) {
		t.Fatal("payloads differ")
	}
	// A tampered one is refused there too: the test can fail.
	var e map[string]any
	_ = json.Unmarshal(env, &e)
	e["payload"] = base64.StdEncoding.EncodeToString(append(d.Payload, ' '))
	tampered, _ := json.Marshal(e)
	if _, _, err := sslibVerify(t, tampered, f.node); err == nil {
		t.Fatal("go-securesystemslib accepted a tampered envelope")
	}
	// Another key is refused.
	other, _ := newNode(t)
	if _, _, err := sslibVerify(t, env, other); err == nil {
		t.Fatal("go-securesystemslib accepted the envelope under another node's key")
	}
	// The node certificate inside verifies the same way with the lab's public key alone.
	if _, _, err := sslibVerify(t, f.cert.Raw(), f.lab.Key); err != nil {
		t.Fatalf("go-securesystemslib refused our node certificate under the lab key: %v", err)
	}
}

// Envelopes signed before keyids followed go-securesystemslib (keyid: the node's peer ID;
// certificates' keyid: the lab ID) keep verifying, and so do envelopes with no keyid.
func TestOldKeyIDEnvelopesStillVerify(t *testing.T) {
	f := newFixture(t)
	certBody, _ := DecodeEnvelope(f.cert.Raw())
	certSig, _ := f.lab.Key.Sign(PAE(CertPayloadType, certBody.Payload))
	oldCertRaw, _ := encodeEnvelope(CertPayloadType, certBody.Payload, f.lab.ID, certSig, nil)
	oldCert, err := ParseNodeCert(oldCertRaw)
	if err != nil {
		t.Fatalf("old-format certificate (keyid = lab ID) refused: %v", err)
	}
	st, err := NewStatement(runSubjects("old"), PredicateRunV1, runPredicate(f.nodeID, f.lab.ID, 0, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	for name, keyID := range map[string]string{"peer ID keyid": f.nodeID, "no keyid": ""} {
		old, err := signDSSE(f.node, PayloadType, st, keyID, oldCert.Raw())
		if err != nil {
			t.Fatal(err)
		}
		v, err := Verify(old, f.trust, t0)
		if err != nil {
			t.Fatalf("%s: old-format envelope refused: %v", name, err)
		}
		if v.Node != f.nodeID || v.Lab != f.lab.ID {
			t.Fatalf("%s: signer %s lab %s", name, v.Node, v.Lab)
		}
	}
	// Uncertified, trusted directly: by peer ID keyid, by the new keyid, and by no keyid
	// at all (the key is found among the trusted ones, never taken from the envelope).
	stDirect, _ := NewStatement(runSubjects("direct"), PredicateRunV1, runPredicate(f.nodeID, "", 0, 0.5))
	pub, _ := f.node.GetPublic().Raw()
	direct := NewTrustStore()
	_, _ = direct.AddNode("other", mustRaw(t, newFixture(t)))
	if _, err := direct.AddNode("laptop", pub); err != nil {
		t.Fatal(err)
	}
	for _, keyID := range []string{f.nodeID, KeyIDOf(ed25519.PublicKey(pub)), ""} {
		env, err := signDSSE(f.node, PayloadType, stDirect, keyID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := Verify(env, direct, t0); err != nil || v.Node != f.nodeID {
			t.Fatalf("keyid %q, trusted directly: %v", keyID, err)
		}
		if _, err := Verify(env, NewTrustStore(), t0); ReasonOf(err) != ReasonUnknownNode {
			t.Fatalf("keyid %q, not trusted: %v, want %s", keyID, err, ReasonUnknownNode)
		}
	}
	// A keyid naming anyone else is refused, certificate or not.
	_, strangerID := newNode(t)
	env, _ := signDSSE(f.node, PayloadType, st, strangerID, f.cert.Raw())
	if _, err := Verify(env, f.trust, t0); ReasonOf(err) != ReasonSignerMismatch {
		t.Fatalf("foreign keyid with certificate: %v, want %s", err, ReasonSignerMismatch)
	}
}

func TestSecureSystemsLibEnvelopesVerifyHere(t *testing.T) {
	f := newFixture(t)
	st, err := NewStatement(runSubjects("sub"), PredicateRunV1, runPredicate(f.nodeID, "", 1, 0.4))
	if err != nil {
		t.Fatal(err)
	}
	es, err := dsse.NewEnvelopeSigner(sslibKey(t, f.node, true, ""))
	if err != nil {
		t.Fatal(err)
	}
	e, err := es.SignPayload(context.Background(), PayloadType, st)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}

	// No certificate: accepted only where the node is trusted directly.
	if _, err := Verify(raw, f.trust, t0); ReasonOf(err) != ReasonUnknownNode {
		t.Fatalf("uncertified node: %v, want %s", err, ReasonUnknownNode)
	}
	pub, _ := f.node.GetPublic().Raw()
	direct := NewTrustStore()
	if _, err := direct.AddNode("laptop", pub); err != nil {
		t.Fatal(err)
	}
	v, err := Verify(raw, direct, t0)
	if err != nil {
		t.Fatalf("go-securesystemslib envelope refused: %v", err)
	}
	if v.Node != f.nodeID || v.Lab != "" || v.Run == nil {
		t.Fatalf("verified %+v", v)
	}

	// Adding our certificate extension next to their signature changes nothing signed.
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	sig := m["signatures"].([]any)[0].(map[string]any)
	sig["extension"] = map[string]any{"kind": CertExtensionKind, "ext": json.RawMessage(f.cert.Raw())}
	withCert, _ := json.Marshal(m)
	// Its predicate says lab "", the certificate says acme: the signer check must notice.
	if _, err := Verify(withCert, f.trust, t0); ReasonOf(err) != ReasonPredicateSigner {
		t.Fatalf("with cert: %v, want %s", err, ReasonPredicateSigner)
	}
}

// DSSE allows either base64 alphabet, padded or not; the signature covers the decoded bytes.
func TestBase64Alphabets(t *testing.T) {
	f := newFixture(t)
	env, _ := f.signRun(t, 0, "sub?>>", 0.9)
	d, _ := DecodeEnvelope(env)
	encs := map[string]*base64.Encoding{
		"std": base64.StdEncoding, "std-raw": base64.RawStdEncoding,
		"url": base64.URLEncoding, "url-raw": base64.RawURLEncoding,
	}
	for name, enc := range encs {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			_ = json.Unmarshal(env, &m)
			m["payload"] = enc.EncodeToString(d.Payload)
			m["signatures"].([]any)[0].(map[string]any)["sig"] = enc.EncodeToString(d.Sig)
			re, _ := json.Marshal(m)
			v, err := Verify(re, f.trust, t0)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if string(v.Payload) != string(d.Payload) {
				t.Fatal("payload changed")
			}
		})
	}
	for _, bad := range []string{"a", "ab=", "a+b-", "====", "ab!c"} {
		if _, err := DecodeBase64(bad); err == nil {
			t.Errorf("DecodeBase64(%q) accepted", bad)
		}
	}
}

func TestEnvelopeShape(t *testing.T) {
	f := newFixture(t)
	env, _ := f.signRun(t, 0, "sub", 0.9)
	var m struct {
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			KeyID     string `json:"keyid"`
			Extension struct {
				Kind string          `json:"kind"`
				Ext  json.RawMessage `json:"ext"`
			} `json:"extension"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	if m.PayloadType != PayloadType || len(m.Signatures) != 1 || m.Signatures[0].KeyID != KeyIDOf(f.cert.NodeKey) ||
		m.Signatures[0].Extension.Kind != CertExtensionKind || string(m.Signatures[0].Extension.Ext) != string(f.cert.Raw()) {
		t.Fatalf("envelope shape: %s", env)
	}
	if !strings.HasPrefix(EnvelopeID(env), "bafkrei") {
		t.Fatalf("ID %s is not a CIDv1 raw sha2-256", EnvelopeID(env))
	}
	if k, ok := digestOfID(EnvelopeID(env)); !ok || k != sumKey(env) {
		t.Fatal("digestOfID does not invert EnvelopeID")
	}
}

package attest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/multiformats/go-multihash"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/evalmesh/evalmesh/internal/jsonkeys"
)

// CertExtensionKind is the DSSE signature-extension kind under which an attestation carries
// the signing node's certificate (DSSE v1.1 "extension": {"kind", "ext"}); ext holds the
// certificate's own DSSE envelope, signed by the lab.
const CertExtensionKind = "application/vnd.evalmesh.node-cert+json;version=1"

// MaxEnvelopeSize bounds what DecodeEnvelope reads: an attestation is a few KiB; a
// megabyte leaves room for telemetry while refusing floods.
const MaxEnvelopeSize = 1 << 20

// PAE is the DSSE v1 pre-authentication encoding:
// "DSSEv1" SP len(type) SP type SP len(body) SP body, lengths in ASCII decimal.
func PAE(payloadType string, body []byte) []byte {
	b := make([]byte, 0, 7+20+len(payloadType)+1+20+1+len(body))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, ' ')
	return append(b, body...)
}

// wireEnvelope is the DSSE JSON envelope. Pointers tell "missing" from "empty": the spec
// requires payload, payloadType and signatures to be present.
type wireEnvelope struct {
	PayloadType *string    `json:"payloadType"`
	Payload     *string    `json:"payload"`
	Signatures  *[]wireSig `json:"signatures"`
}

type wireSig struct {
	KeyID     string   `json:"keyid,omitempty"`
	Sig       *string  `json:"sig"`
	Extension *wireExt `json:"extension,omitempty"`
}

type wireExt struct {
	Kind string          `json:"kind"`
	Ext  json.RawMessage `json:"ext"`
}

// Envelope is a decoded DSSE envelope with exactly one signature (evalmesh's rule: one
// signer per attestation, so "who said this" has one answer).
type Envelope struct {
	PayloadType string
	Payload     []byte // the body bytes, exactly as received (base64-decoded)
	KeyID       string
	Sig         []byte
	// Cert is the raw certificate envelope from the signature's extension, nil if none.
	Cert json.RawMessage
}

// DecodeEnvelope parses a DSSE JSON envelope. Both base64 alphabets are accepted, padded or
// not. Unknown fields are ignored, as DSSE requires.
func DecodeEnvelope(b []byte) (*Envelope, error) {
	if len(b) > MaxEnvelopeSize {
		return nil, fmt.Errorf("envelope is %d bytes, over the %d-byte limit", len(b), MaxEnvelopeSize)
	}
	w, ok := fastEnvelope(b)
	if !ok {
		return decodeEnvelopeReference(b)
	}
	return envelopeFromWire(w)
}

// decodeEnvelopeReference decodes with encoding/json only: the reference the fast path is
// fuzzed against.
func decodeEnvelopeReference(b []byte) (*Envelope, error) {
	if len(b) > MaxEnvelopeSize {
		return nil, fmt.Errorf("envelope is %d bytes, over the %d-byte limit", len(b), MaxEnvelopeSize)
	}
	var w wireEnvelope
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("not a DSSE JSON envelope: %w", err)
	}
	// After Unmarshal, so what is not JSON at all keeps encoding/json's wording.
	if err := jsonkeys.Check(b); err != nil {
		return nil, fmt.Errorf("DSSE envelope: %w", err)
	}
	return envelopeFromWire(w)
}

func envelopeFromWire(w wireEnvelope) (*Envelope, error) {
	if w.PayloadType == nil || w.Payload == nil || w.Signatures == nil {
		return nil, errors.New("DSSE envelope needs payloadType, payload and signatures")
	}
	sigs := *w.Signatures
	if len(sigs) != 1 {
		return nil, fmt.Errorf("envelope has %d signatures; an evalmesh envelope carries exactly one", len(sigs))
	}
	s := sigs[0]
	if s.Sig == nil {
		return nil, errors.New("DSSE signature has no sig field")
	}
	payload, err := DecodeBase64(*w.Payload)
	if err != nil {
		return nil, fmt.Errorf("envelope payload: %w", err)
	}
	sig, err := DecodeBase64(*s.Sig)
	if err != nil {
		return nil, fmt.Errorf("envelope signature: %w", err)
	}
	e := &Envelope{PayloadType: *w.PayloadType, Payload: payload, KeyID: s.KeyID, Sig: sig}
	if s.Extension != nil {
		if s.Extension.Kind != CertExtensionKind {
			return nil, fmt.Errorf("signature extension kind %q is not %q", s.Extension.Kind, CertExtensionKind)
		}
		if len(s.Extension.Ext) == 0 || s.Extension.Ext[0] != '{' {
			return nil, errors.New("signature extension ext must be the node certificate object")
		}
		e.Cert = s.Extension.Ext
	}
	return e, nil
}

// DecodeBase64 accepts standard and URL-safe base64, padded or not (DSSE allows either).
func DecodeBase64(s string) ([]byte, error) {
	// Strict: non-zero padding bits would let one signature hide behind many encodings.
	enc := base64.RawStdEncoding.Strict()
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding.Strict()
	}
	if strings.HasSuffix(s, "=") {
		if len(s)%4 != 0 {
			return nil, errors.New("base64 padding is wrong")
		}
		s = strings.TrimSuffix(s, "=")
		s = strings.TrimSuffix(s, "=") // at most two pad characters

	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64 (standard or URL-safe): %w", err)
	}
	return b, nil
}

// encodeEnvelope writes a DSSE envelope with standard padded base64, as go-securesystemslib does.
func encodeEnvelope(payloadType string, body []byte, keyID string, sig []byte, cert json.RawMessage) ([]byte, error) {
	s := base64.StdEncoding.EncodeToString(sig)
	ws := wireSig{KeyID: keyID, Sig: &s}
	if cert != nil {
		ws.Extension = &wireExt{Kind: CertExtensionKind, Ext: cert}
	}
	p := base64.StdEncoding.EncodeToString(body)
	sigs := []wireSig{ws}
	return json.Marshal(wireEnvelope{PayloadType: &payloadType, Payload: &p, Signatures: &sigs})
}

// signDSSE signs PAE(payloadType, body) once with key and returns the envelope bytes.
func signDSSE(key crypto.PrivKey, payloadType string, body []byte, keyID string, cert json.RawMessage) ([]byte, error) {
	if key == nil || key.Type() != crypto.Ed25519 {
		return nil, errors.New("signing key must be ed25519")
	}
	sig, err := key.Sign(PAE(payloadType, body))
	if err != nil {
		return nil, err
	}
	return encodeEnvelope(payloadType, body, keyID, sig, cert)
}

// Sign signs the statement bytes once (DSSE PAE) with the node key and embeds the node
// certificate (nil: then only a trust store that trusts the node key directly accepts it).
// It returns the envelope JSON and its ID (EnvelopeID).
func Sign(key crypto.PrivKey, cert *NodeCert, statement []byte) (envelope []byte, id string, err error) {
	// Sign only what Verify would accept: a malformed evalmesh predicate is refused here,
	// not discovered by every peer.
	if _, _, _, err := DecodeStatement(statement); err != nil {
		return nil, "", fmt.Errorf("refusing to sign: %w", err)
	}
	nodeID, err := peerIDOf(key)
	if err != nil {
		return nil, "", err
	}
	var raw json.RawMessage
	if cert != nil {
		if cert.Node != nodeID {
			return nil, "", fmt.Errorf("certificate is for node %s, but the signing key is node %s", cert.Node, nodeID)
		}
		raw = cert.Raw()
	}
	raw32, err := key.GetPublic().Raw()
	if err != nil {
		return nil, "", err
	}
	env, err := signDSSE(key, PayloadType, statement, KeyIDOf(ed25519.PublicKey(raw32)), raw)
	if err != nil {
		return nil, "", err
	}
	return env, EnvelopeID(env), nil
}

// KeyIDOf is the DSSE keyid evalmesh writes for an ed25519 key: the one go-securesystemslib
// derives when its verifier has no KeyID of its own (dsse.SHA256KeyID, the OpenSSH
// "SHA256:…" fingerprint), so a verifier that holds only the public key accepts the
// envelope. The keyid is a hint, never authority: the signer's identity is the certificate
// (or the directly trusted key whose signature verifies), and the verification key always
// comes from the trust store.
func KeyIDOf(pub ed25519.PublicKey) string {
	id, err := dsse.SHA256KeyID(pub)
	if err != nil {
		return "" // not a 32-byte key: no keyid; verification refuses the key anyway
	}
	return id
}

// EnvelopeID is the ID of an envelope: the CIDv1 (raw codec, sha2-256) of its bytes.
func EnvelopeID(envelope []byte) string {
	return idOfDigest(sha256.Sum256(envelope))
}

// EnvelopeIDOfDigest is EnvelopeID for an envelope whose sha256 digest is d, for callers
// that hashed the bytes already (the store hashes each arriving envelope once).
func EnvelopeIDOfDigest(d [32]byte) string { return idOfDigest(d) }

func idOfDigest(d [32]byte) string {
	mh, _ := multihash.Encode(d[:], multihash.SHA2_256)
	return cid.NewCidV1(cid.Raw, mh).String()
}

// digestOfID recovers the sha256 digest from an envelope ID.
func digestOfID(id string) ([32]byte, bool) {
	var d [32]byte
	c, err := cid.Decode(id)
	if err != nil || c.Prefix().MhType != multihash.SHA2_256 {
		return d, false
	}
	dm, err := multihash.Decode(c.Hash())
	if err != nil || len(dm.Digest) != 32 {
		return d, false
	}
	copy(d[:], dm.Digest)
	return d, true
}

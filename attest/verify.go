package attest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Reason says why an envelope was refused. The strings are stable: logs, the CLI and peers
// show them.
type Reason string

const (
	ReasonMalformedEnvelope  Reason = "malformed envelope"
	ReasonPayloadType        Reason = "wrong payload type"
	ReasonMalformedCert      Reason = "malformed node certificate"
	ReasonBadCertSignature   Reason = "bad certificate signature"
	ReasonUnknownLab         Reason = "unknown lab"
	ReasonUnknownNode        Reason = "unknown node"
	ReasonSignerMismatch     Reason = "signer does not match certificate"
	ReasonCertExpired        Reason = "expired certificate"
	ReasonCertNotYetValid    Reason = "certificate not yet valid"
	ReasonCertRevoked        Reason = "revoked certificate"
	ReasonBadSignature       Reason = "bad signature"
	ReasonMalformedStatement Reason = "malformed statement"
	ReasonMalformedPredicate Reason = "malformed evalmesh predicate"
	ReasonPredicateSigner    Reason = "predicate names another node or lab"
	// ReasonNoClaimedTime: checked at its claimed time (VerifyOptions.AtClaimedTime), a
	// certified run or re-score statement that claims no time cannot be placed in its
	// certificate's window (a re-score signed without its "time" field).
	ReasonNoClaimedTime Reason = "no claimed time"
	// ReasonLabRetired: the certifying lab retired from the network before the time the
	// statement claims (or, live, before now).
	ReasonLabRetired Reason = "lab retired"
)

// VerifyError is a refusal with its reason and the detail that names the bad input.
type VerifyError struct {
	Reason Reason
	Detail string
}

func (e *VerifyError) Error() string {
	if e.Detail == "" {
		return string(e.Reason)
	}
	return string(e.Reason) + ": " + e.Detail
}

// Is lets errors.Is(err, &VerifyError{Reason: R}) match on the reason alone.
func (e *VerifyError) Is(target error) bool {
	t, ok := target.(*VerifyError)
	return ok && t.Reason == e.Reason && (t.Detail == "" || t.Detail == e.Detail)
}

// ReasonOf returns the reason of a verification error, or "" for other errors.
func ReasonOf(err error) Reason {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return ""
}

func refuse(r Reason, format string, args ...any) error {
	return &VerifyError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// intrinsic reasons depend only on the envelope bytes, never on the trust store or clock:
// such refusals may be cached forever.
func intrinsic(r Reason) bool {
	switch r {
	case ReasonMalformedEnvelope, ReasonPayloadType, ReasonMalformedCert, ReasonBadCertSignature,
		ReasonSignerMismatch, ReasonBadSignature, ReasonMalformedStatement, ReasonMalformedPredicate,
		ReasonPredicateSigner:
		return true
	}
	return false
}

// Verified is an envelope whose signature chain and statement were accepted.
type Verified struct {
	ID        string // EnvelopeID of the bytes
	Envelope  []byte // the bytes as received
	Statement *Statement
	Payload   []byte // the statement bytes that were signed
	Node      string // signer's peer ID
	Lab       string // lab ID from the certificate; "" for a directly trusted node
	Cert      *NodeCert
	// Counts is true for evalmesh predicates (run, re-score); other predicate types verify
	// as signed statements but do not count for the ledger.
	Counts  bool
	Run     *RunPredicate
	Rescore *RescorePredicate
	// Grant is set for a grant (grant.go): signed by a certified node of the lab it says
	// granted it; it never counts.
	Grant *GrantPredicate
	// Witness is set for a witness record (witness.go), signed by the node and lab it names;
	// it never counts by itself, runs cite it.
	Witness *WitnessPredicate
	// Audit is set for an audit (audit.go), signed by the node and lab it names, its VRF
	// draw checked against that node's key; it never counts by itself.
	Audit *AuditPredicate
	// Claim and Release are set for claim and release records (claimrec.go), signed by the
	// node and lab they name; neither counts by itself.
	Claim   *ClaimPredicate
	Release *ReleasePredicate
}

// Principal is who answers for the envelope: its lab, or the node when trusted directly.
func (v *Verified) Principal() string {
	if v.Lab != "" {
		return v.Lab
	}
	return v.Node
}

// VerifyOptions says at what time the trust policy (certificate window, revocations) is
// applied.
type VerifyOptions struct {
	// Now is the time a certificate must be valid at, unless AtClaimedTime.
	Now time.Time
	// AtClaimedTime checks each certificate's window at the times the signed statement
	// itself claims (a run's start and end, both; a re-score's time) instead of Now,
	// so the verdict is a function of the bytes and the trust store alone: the ledger's mode
	// (docs/design.md §7: no wall clock may reach the output). A certificate that has expired since
	// still vouches for what its node signed while it was valid. Revocations are then
	// absolute: a revoked certificate or node refuses every attestation signed under it,
	// whatever time it claims, because a compromised key can backdate its claims. Now is
	// not used. Statements of other predicate types claim no time and are checked for lab
	// and revocation only (they never count).
	AtClaimedTime bool
}

// Verify decides whether envelope is acceptable under trust at time now, and if not, why.
// The signature is checked over the payload bytes as received.
func Verify(envelope []byte, trust *TrustStore, now time.Time) (*Verified, error) {
	return verifyDigest(envelope, sumKey(envelope), trust, VerifyOptions{Now: now})
}

// VerifyWith is Verify with the policy time chosen by o.
func VerifyWith(envelope []byte, trust *TrustStore, o VerifyOptions) (*Verified, error) {
	return verifyDigest(envelope, sumKey(envelope), trust, o)
}

func verifyDigest(envelope []byte, digest [32]byte, trust *TrustStore, o VerifyOptions) (*Verified, error) {
	v, err := verifyCore(envelope, digest, trust, o)
	if err != nil {
		return nil, err
	}
	if err := trust.claimedPolicy(v, o); err != nil {
		return nil, err
	}
	return v, nil
}

// verifyCore checks all but the claimed-time window (AtClaimedTime), which needs the
// authenticated statement: what it accepts depends on the bytes and the trust store's
// labs, nodes and revocations, never on o's mode, so the cache may share it across modes.
func verifyCore(envelope []byte, digest [32]byte, trust *TrustStore, o VerifyOptions) (*Verified, error) {
	p, err := prepare(envelope, digest, trust, o)
	if err != nil {
		return nil, err
	}
	if testHookSigCheck != nil {
		testHookSigCheck()
	}
	if !trust.verifyKey(p.pub, PAE(PayloadType, p.env.Payload), p.env.Sig) {
		return nil, refuse(ReasonBadSignature, "envelope signature does not verify with node %s's key", p.v.Node)
	}
	return finish(p)
}

// ClaimedTime is the time the signed statement says it was made: a run's end (its start
// if it has no end), a re-score's time. ok is false when it claims none.
func (v *Verified) ClaimedTime() (t time.Time, ok bool) {
	switch {
	case v.Run != nil && !v.Run.End.IsZero():
		return v.Run.End, true
	case v.Run != nil && !v.Run.Start.IsZero():
		return v.Run.Start, true
	case v.Rescore != nil && !v.Rescore.Time.IsZero():
		return v.Rescore.Time, true
	case v.Grant != nil:
		return v.Grant.Time, true
	case v.Witness != nil:
		return v.Witness.Time, true
	case v.Claim != nil:
		return v.Claim.Time, true
	case v.Release != nil:
		return v.Release.Time, true
	}
	return time.Time{}, false
}

// testHookSigCheck, when set (tests only, before any verification starts), is called once
// per envelope signature checked, single or batched: how the cache's "never twice" is
// counted.
var testHookSigCheck func()

// prepared is an envelope decoded and whose signer is resolved, before its signature check.
type prepared struct {
	env *Envelope
	pub ed25519.PublicKey
	v   *Verified
}

func prepare(envelope []byte, digest [32]byte, trust *TrustStore, o VerifyOptions) (*prepared, error) {
	if trust == nil {
		return nil, errors.New("no trust store")
	}
	env, err := DecodeEnvelope(envelope)
	if err != nil {
		return nil, refuse(ReasonMalformedEnvelope, "%v", err)
	}
	if env.PayloadType != PayloadType {
		return nil, refuse(ReasonPayloadType, "payloadType %q, want %q", env.PayloadType, PayloadType)
	}
	v := &Verified{ID: idOfDigest(digest), Envelope: envelope, Payload: env.Payload}
	var pub ed25519.PublicKey
	if env.Cert != nil {
		cert, err := trust.checkCert(env.Cert)
		if err != nil {
			return nil, err
		}
		// The keyid only has to be one of the node's spellings (none, the go-securesystemslib
		// keyid, or the peer ID that envelopes carried before); the key is the certificate's.
		if env.KeyID != "" && env.KeyID != cert.nodeKeyID && env.KeyID != cert.Node {
			return nil, refuse(ReasonSignerMismatch, "keyid %s is not the certified node %s (whose keyid is %s)", env.KeyID, cert.Node, cert.nodeKeyID)
		}
		if err := trust.certStanding(cert, o); err != nil {
			return nil, err
		}
		pub = cert.NodeKey
		v.Node, v.Lab, v.Cert = cert.Node, cert.Lab, cert
	} else {
		node, k, err := trust.directSigner(env)
		if err != nil {
			return nil, err
		}
		pub, v.Node = k, node
	}
	return &prepared{env: env, pub: pub, v: v}, nil
}

// directSigner finds, among the directly trusted node keys, the one an envelope without a
// certificate is signed by. The keyid narrows the search (a peer ID, as envelopes before
// go-securesystemslib keyids carried, or KeyIDOf); without one, every directly trusted key
// is tried in peer-ID order (a trust file trusts few nodes directly). The key always comes
// from the store; the signature check that follows decides.
func (t *TrustStore) directSigner(env *Envelope) (string, ed25519.PublicKey, error) {
	if env.KeyID != "" {
		if k, ok := t.nodes[env.KeyID]; ok {
			return env.KeyID, k, nil
		}
		if node, ok := t.nodeKeyIDs[env.KeyID]; ok {
			return node, t.nodes[node], nil
		}
		return "", nil, refuse(ReasonUnknownNode, "envelope has no node certificate and its signer (keyid %s) is not trusted directly (add a lab certificate, or `evalmesh trust add --node-key BASE64 --name NAME`)", env.KeyID)
	}
	msg := PAE(env.PayloadType, env.Payload)
	for _, node := range slices.Sorted(maps.Keys(t.nodes)) {
		if t.verifyKey(t.nodes[node], msg, env.Sig) {
			return node, t.nodes[node], nil
		}
	}
	return "", nil, refuse(ReasonUnknownNode, "envelope has neither a node certificate nor a keyid, and no directly trusted node key verifies it")
}

// finish parses the (now authenticated) statement and its predicate.
func finish(p *prepared) (*Verified, error) {
	v := p.v
	st, run, rs, err := DecodeStatement(p.env.Payload)
	if err != nil {
		return nil, err
	}
	v.Statement = st
	if run != nil || rs != nil {
		node, lab := "", ""
		if run != nil {
			node, lab = run.Node, run.Lab
		} else {
			node, lab = rs.Node, rs.Lab
		}
		if node != v.Node || lab != v.Lab {
			return nil, refuse(ReasonPredicateSigner, "predicate says node %s lab %q, but the signer is node %s lab %q", node, lab, v.Node, v.Lab)
		}
		v.Run, v.Rescore, v.Counts = run, rs, true
	}
	if st.PredicateType == PredicateGrantV1 {
		g, err := decodeGrantPredicate(st)
		if err != nil {
			return nil, err
		}
		if g.Node != v.Node || g.GrantedBy != v.Lab {
			return nil, refuse(ReasonPredicateSigner, "grant says node %s lab %q, but the signer is node %s lab %q", g.Node, g.GrantedBy, v.Node, v.Lab)
		}
		v.Grant = g
	}
	if st.PredicateType == PredicateWitnessV1 {
		w, err := decodeWitnessPredicate(st)
		if err != nil {
			return nil, err
		}
		if w.Node != v.Node || w.Lab != v.Lab {
			return nil, refuse(ReasonPredicateSigner, "witness says node %s lab %q, but the signer is node %s lab %q", w.Node, w.Lab, v.Node, v.Lab)
		}
		v.Witness = w
	}
	if st.PredicateType == PredicateAuditV1 {
		a, err := decodeAuditPredicate(st)
		if err != nil {
			return nil, err
		}
		if a.Node != v.Node || a.Lab != v.Lab {
			return nil, refuse(ReasonPredicateSigner, "audit says node %s lab %q, but the signer is node %s lab %q", a.Node, a.Lab, v.Node, v.Lab)
		}
		v.Audit = a
	}
	switch st.PredicateType {
	case PredicateClaimV1:
		c, err := decodeClaimPredicate(st)
		if err != nil {
			return nil, err
		}
		if c.Node != v.Node || c.Lab != v.Lab {
			return nil, refuse(ReasonPredicateSigner, "claim record says node %s lab %q, but the signer is node %s lab %q", c.Node, c.Lab, v.Node, v.Lab)
		}
		v.Claim = c
	case PredicateReleaseV1:
		r, err := decodeReleasePredicate(st)
		if err != nil {
			return nil, err
		}
		if r.Node != v.Node || r.Lab != v.Lab {
			return nil, refuse(ReasonPredicateSigner, "release record says node %s lab %q, but the signer is node %s lab %q", r.Node, r.Lab, v.Node, v.Lab)
		}
		v.Release = r
	}
	return v, nil
}

// DecodeStatement parses an in-toto Statement v1 and, for the evalmesh predicate types, its
// predicate (exactly one of run, rescore is then non-nil; both are nil for other types).
// Errors are *VerifyError with ReasonMalformedStatement or ReasonMalformedPredicate.
func DecodeStatement(b []byte) (*Statement, *RunPredicate, *RescorePredicate, error) {
	if st, run, rs, ok := fastStatement(b); ok {
		return st, run, rs, nil
	}
	return decodeStatementReference(b)
}

// decodeStatementReference is the plain two-step decoder (statement, then predicate) that
// fastStatement is fuzzed against, and that decides every input fastStatement declines.
func decodeStatementReference(b []byte) (*Statement, *RunPredicate, *RescorePredicate, error) {
	st, err := ParseStatement(b)
	if err != nil {
		return nil, nil, nil, refuse(ReasonMalformedStatement, "%v", err)
	}
	switch st.PredicateType {
	case PredicateRunV1, PredicateRescoreV1:
		run, rs, err := decodePredicate(st.PredicateType, st.Predicate)
		if err != nil {
			return nil, nil, nil, refuse(ReasonMalformedPredicate, "%v", err)
		}
		return st, run, rs, nil
	}
	return st, nil, nil, nil
}

// checkCert parses a certificate envelope and verifies its lab signature, once per distinct
// certificate bytes; the trust policy is applied separately, on every use.
func (t *TrustStore) checkCert(raw []byte) (*NodeCert, error) {
	key := sumKey(raw)
	if c, ok := t.certs.Get(key); ok {
		return c, nil
	}
	c, sig, body, err := decodeNodeCert(raw)
	if err != nil {
		return nil, refuse(ReasonMalformedCert, "%v", err)
	}
	// Unknown labs are refused before spending a signature check on them.
	if _, ok := t.labs[c.Lab]; !ok {
		return nil, refuse(ReasonUnknownLab, "lab %s (certifying node %s) is not in the trust file; add it with `evalmesh trust add`", c.Lab, c.Node)
	}
	if !t.verifyKey(c.LabKey, PAE(CertPayloadType, body), sig) {
		return nil, refuse(ReasonBadCertSignature, "certificate for node %s is not signed by lab %s", c.Node, c.Lab)
	}
	t.certs.Add(key, c)
	return c, nil
}

// certStanding is the part of the certificate policy known before the statement is read:
// at now, all of it (certPolicy); at the claimed time, the lab trusted and no revocation
// of the certificate or its node, whatever its time.
func (t *TrustStore) certStanding(c *NodeCert, o VerifyOptions) error {
	if !o.AtClaimedTime {
		return t.certPolicy(c, o.Now)
	}
	if _, ok := t.labs[c.Lab]; !ok {
		return refuse(ReasonUnknownLab, "lab %s (certifying node %s) is not in the trust file; add it with `evalmesh trust add`", c.Lab, c.Node)
	}
	for _, s := range [2]string{c.Node, c.ID} {
		if at, ok := t.revokedAt(c.Lab, s); ok {
			return refuse(ReasonCertRevoked, "lab %s revoked %s at %s; a revoked key may have backdated its claims, so nothing signed under it counts", c.Lab, s, at.Format(time.RFC3339))
		}
	}
	return nil
}

// CheckNodeCert parses a node certificate envelope, verifies its lab's signature (once per
// distinct bytes, cached) and applies the trust policy at now: lab trusted, inside its
// validity window, not revoked. For callers that see a certificate outside an attestation
// (the claim validator in protocol); the error is a *VerifyError with its Reason.
func (t *TrustStore) CheckNodeCert(raw []byte, now time.Time) (*NodeCert, error) {
	c, err := t.checkCert(raw)
	if err != nil {
		return nil, err
	}
	if err := t.certPolicy(c, now); err != nil {
		return nil, err
	}
	return c, nil
}

// certPolicy applies the trust store to a signature-checked certificate at time now.
func (t *TrustStore) certPolicy(c *NodeCert, now time.Time) error {
	if _, ok := t.labs[c.Lab]; !ok {
		return refuse(ReasonUnknownLab, "lab %s (certifying node %s) is not in the trust file; add it with `evalmesh trust add`", c.Lab, c.Node)
	}
	if err := certWindow(c, now, "now"); err != nil {
		return err
	}
	if err := t.retiredAt(c, now, "now"); err != nil {
		return err
	}
	for _, s := range [2]string{c.Node, c.ID} {
		if at, ok := t.revokedAt(c.Lab, s); ok && !now.Before(at) {
			return refuse(ReasonCertRevoked, "lab %s revoked %s at %s", c.Lab, s, at.Format(time.RFC3339))
		}
	}
	return nil
}

// certWindow checks that at (named what in the detail) is in the certificate's window.
func certWindow(c *NodeCert, at time.Time, what string) error {
	if at.Before(c.NotBefore) {
		return refuse(ReasonCertNotYetValid, "certificate %s for node %s is valid from %s (%s %s)", c.ID, c.Node, c.NotBefore.Format(time.RFC3339), what, at.UTC().Format(time.RFC3339))
	}
	if !at.Before(c.NotAfter) {
		return refuse(ReasonCertExpired, "certificate %s for node %s expired at %s (%s %s)", c.ID, c.Node, c.NotAfter.Format(time.RFC3339), what, at.UTC().Format(time.RFC3339))
	}
	return nil
}

// claimedPolicy is the rest of the policy at the claimed time, once the statement is
// authenticated: the certificate's window at the time it claims. Nothing at now (the
// window was checked by certStanding) or for a directly trusted node (no window).
func (t *TrustStore) claimedPolicy(v *Verified, o VerifyOptions) error {
	if !o.AtClaimedTime || v.Cert == nil || (!v.Counts && v.Grant == nil && v.Witness == nil && v.Claim == nil && v.Release == nil) {
		return nil
	}
	// A run claims an interval: both ends must lie in the window, or a node could date a
	// run's start into an expired certificate's window (or its end into a future one).
	if v.Run != nil {
		if err := certWindow(v.Cert, v.Run.Start, "claimed start"); err != nil {
			return err
		}
		if err := certWindow(v.Cert, v.Run.End, "claimed end"); err != nil {
			return err
		}
		if err := t.retiredAt(v.Cert, v.Run.Start, "claimed start"); err != nil {
			return err
		}
		return t.retiredAt(v.Cert, v.Run.End, "claimed end")
	}
	at, ok := v.ClaimedTime()
	if !ok {
		return refuse(ReasonNoClaimedTime, "statement %s by node %s claims no time to check certificate %s at; re-scores must set \"time\"", v.ID, v.Node, v.Cert.ID)
	}
	if err := certWindow(v.Cert, at, "claimed"); err != nil {
		return err
	}
	return t.retiredAt(v.Cert, at, "claimed")
}

// retiredAt refuses a time (named what) at or after the certifying lab's retirement.
func (t *TrustStore) retiredAt(c *NodeCert, at time.Time, what string) error {
	if r := t.labs[c.Lab].retired; !r.IsZero() && !at.Before(r) {
		return refuse(ReasonLabRetired, "lab %s (certifying node %s) retired from the network at %s (%s %s): what it signs from then on does not count", c.Lab, c.Node, r.UTC().Format(time.RFC3339), what, at.UTC().Format(time.RFC3339))
	}
	return nil
}

// policy re-applies the trust store to an envelope verified earlier (the cache's hit path),
// in o's mode.
func (t *TrustStore) policy(v *Verified, o VerifyOptions) error {
	if v.Cert != nil {
		if err := t.certStanding(v.Cert, o); err != nil {
			return err
		}
		return t.claimedPolicy(v, o)
	}
	if _, ok := t.nodes[v.Node]; !ok {
		return refuse(ReasonUnknownNode, "node %s is not trusted directly", v.Node)
	}
	return nil
}

// verifyKey checks an ed25519 signature under ZIP-215 rules (cofactored; see
// docs/attestation-format.md) with a precomputed key, so single and batch verification agree
// on every input and every node reaches the same verdict.
func (t *TrustStore) verifyKey(pub ed25519.PublicKey, msg, sig []byte) bool {
	xk := t.expanded(pub)
	if xk == nil {
		return false
	}
	return voi.VerifyExpandedWithOptions(xk, msg, sig, &zip215)
}

var zip215 = voi.Options{Verify: voi.VerifyOptionsZIP_215}

func (t *TrustStore) expanded(pub ed25519.PublicKey) *voi.ExpandedPublicKey {
	var k [32]byte
	if len(pub) != 32 {
		return nil
	}
	copy(k[:], pub)
	if xk, ok := t.keys.Get(k); ok {
		return xk
	}
	xk, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		return nil
	}
	t.keys.Add(k, xk)
	return xk
}

// verifySig is the store-less form (parsing a certificate or revocation on its own).
func verifySig(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != 32 {
		return false
	}
	return voi.VerifyWithOptions(voi.PublicKey(pub), msg, sig, &zip215)
}

func peerIDFromEd25519(pub ed25519.PublicKey) (string, error) {
	pk, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		return "", err
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func sumKey(b []byte) [32]byte { return sha256.Sum256(b) }

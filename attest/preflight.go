package attest

import (
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// CheckSigningChain is the runner's preflight: it says, before any agent starts, whether an
// attestation that key signs with cert at time at would be accepted, so a run never spends
// its compute only to fail at signing. The error is a *VerifyError whose Reason says what is
// wrong (ReasonOf):
//
//   - ReasonSignerMismatch: key is not ed25519, or cert is for another node;
//   - ReasonCertNotYetValid / ReasonCertExpired: at lies outside cert's window;
//   - ReasonUnknownLab: trust (when given) does not list cert's lab;
//   - ReasonCertRevoked: trust holds a revocation of the cert or its node in effect at at;
//   - ReasonUnknownNode: cert is nil and trust (nil or not) does not trust the node directly.
//
// cert's lab signature is checked. trust may be nil (the node's own trust file is optional):
// then the lab is not checked. A run lasts: call it again at the end, or with the time the
// run will end, because verifiers check both the claimed start and end.
func CheckSigningChain(key crypto.PrivKey, cert *NodeCert, trust *TrustStore, at time.Time) error {
	node, err := peerIDOf(key)
	if err != nil {
		return refuse(ReasonSignerMismatch, "node key: %v", err)
	}
	if cert == nil {
		if trust != nil {
			if _, ok := trust.nodes[node]; ok {
				return nil
			}
		}
		return refuse(ReasonUnknownNode, "node %s has no node certificate, so no trust store would accept what it signs unless it trusts the node key directly; get one with `evalmesh lab certify --node %s` and pass it to the node", node, node)
	}
	if cert.Node != node {
		return refuse(ReasonSignerMismatch, "certificate %s is for node %s, but this node's key is node %s: use the certificate issued for this node (`evalmesh id` prints its peer ID)", cert.ID, cert.Node, node)
	}
	// A NodeCert built by hand (not ParseNodeCert) has no checked signature: check again.
	if _, err := ParseNodeCert(cert.Raw()); err != nil {
		return refuse(ReasonBadCertSignature, "certificate %s: %v", cert.ID, err)
	}
	if err := certWindow(cert, at, "at"); err != nil {
		ve := err.(*VerifyError)
		ve.Detail += "; ask lab " + cert.Lab + " for a new certificate (`evalmesh lab certify`)"
		return ve
	}
	if trust == nil {
		return nil
	}
	if err := trust.certPolicy(cert, at); err != nil {
		return err
	}
	return nil
}

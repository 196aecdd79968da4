package attest

import "fmt"

// Lab-signed documents other packages define (campaigns, in protocol) share the DSSE code
// here: one signature by the lab key over PAE(payloadType, body), keyid = the lab ID.

// SignLabEnvelope signs body under payloadType with the lab key and returns the DSSE
// envelope bytes (keyid = the lab ID, no certificate extension).
func (l *Lab) SignLabEnvelope(payloadType string, body []byte) ([]byte, error) {
	return signDSSE(l.Key, payloadType, body, l.ID, nil)
}

// LabSigned is a lab-signed envelope whose signature checked out against a trusted lab key.
type LabSigned struct {
	Lab     string // lab ID (the envelope's keyid)
	LabName string // the name the trust store knows it by
	Payload []byte // the signed body, exactly as received
}

// VerifyLabEnvelope decodes a lab-signed DSSE envelope of payloadType and checks its
// signature with the key of the lab its keyid names, which must be in the trust store.
// Errors are *VerifyError: ReasonMalformedEnvelope, ReasonPayloadType, ReasonUnknownLab,
// ReasonBadSignature. Revocations do not apply: they revoke node certificates, not labs.
func (t *TrustStore) VerifyLabEnvelope(envelope []byte, payloadType string) (*LabSigned, error) {
	if t == nil {
		return nil, fmt.Errorf("no trust store")
	}
	env, err := DecodeEnvelope(envelope)
	if err != nil {
		return nil, refuse(ReasonMalformedEnvelope, "%v", err)
	}
	if env.PayloadType != payloadType {
		return nil, refuse(ReasonPayloadType, "payloadType %q, want %q", env.PayloadType, payloadType)
	}
	if env.Cert != nil {
		return nil, refuse(ReasonMalformedEnvelope, "a lab-signed envelope carries no node certificate")
	}
	lab, ok := t.labs[env.KeyID]
	if !ok {
		return nil, refuse(ReasonUnknownLab, "signer %q is not a lab in the trust file; add it with `evalmesh trust add --lab LABDIR`", env.KeyID)
	}
	if !t.verifyKey(lab.pub, PAE(payloadType, env.Payload), env.Sig) {
		return nil, refuse(ReasonBadSignature, "envelope signature does not verify with lab %s's key", env.KeyID)
	}
	return &LabSigned{Lab: env.KeyID, LabName: lab.name, Payload: env.Payload}, nil
}

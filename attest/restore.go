package attest

// Restore rebuilds the Verified of an envelope that was verified and accepted earlier (a
// node's store keeps the bytes of what it accepted), without checking the envelope
// signature again: that check is what a store pays once, on arrival. The rest is cheap and
// is redone, so a changed trust file still counts: the envelope and statement are parsed,
// the certificate is resolved (its lab signature is checked once per distinct certificate
// and remembered by the trust store), and the trust policy is applied at the claimed time
// (VerifyOptions.AtClaimedTime, the ledger's mode: lab trusted, no revocation, the
// certificate valid when the statement says it was made).
//
// Only bytes this process (or its store) accepted before may be given to Restore: it
// vouches for no signature.
func Restore(envelope []byte, trust *TrustStore) (*Verified, error) {
	o := VerifyOptions{AtClaimedTime: true}
	p, err := prepare(envelope, sumKey(envelope), trust, o)
	if err != nil {
		return nil, err
	}
	v, err := finish(p)
	if err != nil {
		return nil, err
	}
	if err := trust.claimedPolicy(v, o); err != nil {
		return nil, err
	}
	return v, nil
}

// Intrinsic reports whether a refusal for this reason depends only on the envelope bytes
// (bad signature, malformed, ...), never on the trust store or a clock: the same bytes are
// refused again whatever changes, so a store need not verify them a second time.
func (r Reason) Intrinsic() bool { return intrinsic(r) }

// Recheck re-applies trust's policy, at the claimed time (the ledger's mode), to a value
// verified or restored earlier under the same trust store: a revocation recorded since
// refuses it, as Restore of its bytes would. No envelope is parsed and no signature checked.
func (t *TrustStore) Recheck(v *Verified) error {
	return t.policy(v, VerifyOptions{AtClaimedTime: true})
}

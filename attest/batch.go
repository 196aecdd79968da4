package attest

import (
	"time"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// VerifyBatch verifies many envelopes at once; results[i] and errs[i] are what
// Verify(envelopes[i], trust, now) would return. Signatures are checked together with
// curve25519-voi's batch verifier (ZIP-215 rules, the same as Verify uses, so the verdicts
// are identical), which costs less per signature than one-by-one verification when the
// batch is valid; a batch with a bad signature falls back to checking each one.
func VerifyBatch(envelopes [][]byte, trust *TrustStore, now time.Time) ([]*Verified, []error) {
	return VerifyBatchWith(envelopes, trust, VerifyOptions{Now: now})
}

// VerifyBatchWith is VerifyBatch with the policy time chosen by o: results[i] and errs[i]
// are what VerifyWith(envelopes[i], trust, o) would return.
func VerifyBatchWith(envelopes [][]byte, trust *TrustStore, o VerifyOptions) ([]*Verified, []error) {
	digests := make([][32]byte, len(envelopes))
	for i, e := range envelopes {
		digests[i] = sumKey(e)
	}
	vs, errs := verifyBatch(envelopes, digests, trust, o)
	for i, v := range vs {
		if v != nil {
			if err := trust.claimedPolicy(v, o); err != nil {
				vs[i], errs[i] = nil, err
			}
		}
	}
	return vs, errs
}

// verifyBatch is verifyCore for many envelopes: the claimed-time window is left to the
// caller.
func verifyBatch(envelopes [][]byte, digests [][32]byte, trust *TrustStore, o VerifyOptions) ([]*Verified, []error) {
	results := make([]*Verified, len(envelopes))
	errs := make([]error, len(envelopes))
	preps := make([]*prepared, len(envelopes))
	bv := voi.NewBatchVerifierWithCapacity(len(envelopes))
	idx := make([]int, 0, len(envelopes))
	for i, env := range envelopes {
		p, err := prepare(env, digests[i], trust, o)
		if err != nil {
			errs[i] = err
			continue
		}
		xk := trust.expanded(p.pub)
		if xk == nil {
			errs[i] = refuse(ReasonBadSignature, "node %s's key is not a valid ed25519 point", p.v.Node)
			continue
		}
		preps[i] = p
		if testHookSigCheck != nil {
			testHookSigCheck()
		}
		bv.AddExpandedWithOptions(xk, PAE(PayloadType, p.env.Payload), p.env.Sig, &zip215)
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return results, errs
	}
	_, valid := bv.Verify(nil)
	for j, i := range idx {
		if !valid[j] {
			errs[i] = refuse(ReasonBadSignature, "envelope signature does not verify with node %s's key", preps[i].v.Node)
			continue
		}
		results[i], errs[i] = finish(preps[i])
	}
	return results, errs
}
